//! TLS on real `redis-server --tls-port` processes, with certificates the
//! test makes (`tests/common/tls.rs`): decisions through a CA given to the
//! builder; a wrong CA is an error that names TLS, from `probe()` and as the
//! failure report of a decision; a server that requires client
//! certificates refuses a store without one and serves one with it; the
//! same for a cluster started with `--tls-cluster yes`; `rediss+sentinel://`
//! through a TLS sentinel to TLS data nodes that replicate over TLS, and
//! through a failover of those nodes. (The platform trust
//! store, through `SSL_CERT_FILE`, is `tests/tls_platform_store.rs`: it sets
//! the process's environment.)

mod common;

use common::cluster::RedisCluster;
use common::tls::{TestCerts, TlsOptions};
use common::RedisServer;
use floodgate::algorithm::FixedWindow;
use floodgate::failure::{FailureKind, FailurePolicy};
use floodgate::store::{RedisClusterStore, RedisStore, Store, StoreErrorKind};
use floodgate::{Error, Limiter};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A limiter whose store errors reach the caller.
fn strict(store: impl Into<Store>, name: &str) -> Limiter<FixedWindow> {
    Limiter::builder(store, FixedWindow::new(3, Duration::from_secs(60)))
        .name(name)
        .timeout(Duration::from_secs(3))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap()
}

/// Three admitted, the fourth denied: decided by Redis.
async fn decides(limiter: &Limiter<FixedWindow>) {
    for i in 0..3 {
        let d = limiter.check("ana", 1).await.expect("a decision over TLS");
        assert!(d.allowed() && !d.is_degraded(), "check {i}: {d:?}");
    }
    assert!(!limiter.check("ana", 1).await.unwrap().allowed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_through_a_ca_given_to_the_builder() {
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs);
    let store = RedisStore::builder(&server.tls_url())
        .ca_certificate(certs.ca_pem.clone())
        .build()
        .unwrap();
    let report = store.probe().await.expect("probe over TLS");
    assert!(report.nodes()[0].tls(), "{report:?}");
    decides(&strict(store, "tls")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_is_an_error_that_names_tls() {
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs);
    let store = RedisStore::builder(&server.tls_url())
        .ca_certificate(certs.wrong_ca_pem.clone())
        .build()
        .unwrap();

    let e = store
        .probe()
        .await
        .expect_err("the certificate does not verify");
    assert_eq!(e.kind(), StoreErrorKind::Tls, "{e}");
    let text = e.to_string();
    assert!(text.contains("TLS") && text.contains("127.0.0.1"), "{text}");
    assert!(text.contains("unknown issuer"), "{text}");
    // A CA was given: the advice is about that CA, not to give one.
    assert!(
        text.contains("the CA given with `ca_certificate` did not sign it"),
        "{text}"
    );
    // The whole cause chain says it once: the words, then rustls's error.
    let mut chain = text.clone();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        write!(chain, " / {c}").unwrap();
        cause = c.source();
    }
    assert_eq!(chain.matches("UnknownIssuer").count(), 1, "{chain}");
    assert_eq!(chain.matches("unknown issuer").count(), 1, "{chain}");

    // A decision meets the same error, reported as TLS to the failure hook,
    // and the failure policy decides.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = seen.clone();
    let limiter = Limiter::builder(store, FixedWindow::new(3, Duration::from_secs(60)))
        .name("wrong-ca")
        .timeout(Duration::from_secs(3))
        .on_store_failure(FailurePolicy::ReturnError)
        .failure_hook(move |event| {
            let error = event.error.map(ToString::to_string).unwrap_or_default();
            hook_seen.lock().unwrap().push((event.kind, error));
        })
        .build()
        .unwrap();
    match limiter.check("ana", 1).await {
        Err(Error::Store(e)) => assert_eq!(e.kind(), StoreErrorKind::Tls, "{e}"),
        other => panic!("expected a TLS error, got {other:?}"),
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, FailureKind::Store(StoreErrorKind::Tls));
    assert!(seen[0].1.contains("TLS"), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_ca_given_advises_giving_one() {
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs);
    let store = RedisStore::from_url(&server.tls_url()).unwrap();
    let e = store.probe().await.expect_err("the test CA is not trusted");
    assert_eq!(e.kind(), StoreErrorKind::Tls, "{e}");
    let text = e.to_string();
    assert!(
        text.contains("give the CA that signed it with `ca_certificate`"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rediss_url_to_a_plain_port_is_a_tls_error_that_says_so() {
    let server = RedisServer::start();
    let url = format!("rediss://127.0.0.1:{}", server.port());
    let store = RedisStore::from_url(&url).unwrap();
    let e = store.probe().await.expect_err("no TLS on a plain port");
    assert_eq!(e.kind(), StoreErrorKind::Tls, "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("redis at 127.0.0.1:{}", server.port())),
        "{text}"
    );
    assert!(
        text.contains("plain text") && text.contains("redis://"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_requires_client_certificates() {
    let certs = TestCerts::generate();
    let options = TlsOptions {
        auth_clients: true,
        ..TlsOptions::default()
    };
    let server = RedisServer::start_tls_with(&certs, options, &[]);

    let without = RedisStore::builder(&server.tls_url())
        .ca_certificate(certs.ca_pem.clone())
        .build()
        .unwrap();
    let e = without.probe().await.expect_err("no client certificate");
    assert_eq!(e.kind(), StoreErrorKind::Tls, "{e}");

    let with = RedisStore::builder(&server.tls_url())
        .ca_certificate(certs.ca_pem.clone())
        .client_certificate(certs.client_cert_pem.clone(), certs.client_key_pem.clone())
        .build()
        .unwrap();
    with.probe().await.expect("with a client certificate");
    decides(&strict(with, "mtls")).await;
}

#[test]
fn certificates_that_are_not_pem_name_their_field() {
    let e = RedisStore::builder("rediss://127.0.0.1:1")
        .ca_certificate(b"not a certificate".to_vec())
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "ca_certificate", "{e}");
    let e = RedisStore::builder("rediss://127.0.0.1:1")
        .client_certificate(b"x".to_vec(), b"y".to_vec())
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "client_certificate", "{e}");
    // Certificates for a server that does not speak TLS.
    let e = RedisStore::builder("redis://127.0.0.1:1")
        .ca_certificate(b"-----BEGIN CERTIFICATE-----\n".to_vec())
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "ca_certificate", "{e}");
    let e = RedisClusterStore::builder(["redis://127.0.0.1:1"])
        .ca_certificate(b"x".to_vec())
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "ca_certificate", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_cluster() {
    let certs = TestCerts::generate();
    let cluster = RedisCluster::start_tls(&certs);

    let store = RedisClusterStore::builder(cluster.urls())
        .ca_certificate(certs.ca_pem.clone())
        .client_certificate(certs.client_cert_pem.clone(), certs.client_key_pem.clone())
        .build()
        .unwrap();
    let report = store.probe().await.expect("probe of a TLS cluster");
    assert!(report.nodes().len() >= 3, "{report:?}");
    assert!(
        report.nodes().iter().all(floodgate::store::NodeReport::tls),
        "{report:?}"
    );
    decides(&strict(store, "cluster-tls")).await;

    let wrong = RedisClusterStore::builder(cluster.urls())
        .ca_certificate(certs.wrong_ca_pem.clone())
        .build()
        .unwrap();
    let e = wrong
        .probe()
        .await
        .expect_err("the nodes' certificates do not verify");
    assert_eq!(e.kind(), StoreErrorKind::Tls, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// redis-rs's `#insecure` fragment: no verification (tests only; floodgate
/// logs a warning).
async fn insecure_skips_verification() {
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls(&certs);
    let url = format!("{}#insecure", server.tls_url());
    let report = RedisStore::from_url(&url)
        .unwrap()
        .probe()
        .await
        .expect("#insecure");
    assert!(report.nodes()[0].tls());
}

/// A sentinel of TLS data nodes, itself on TLS (and on a plain port for the
/// test's own questions), killed on drop.
struct TlsSentinel {
    child: std::process::Child,
    tls: u16,
    plain: u16,
    dir: std::path::PathBuf,
}

impl TlsSentinel {
    fn start(certs: &TestCerts, primary_tls_port: u16) -> Self {
        let (plain, tls) = (common::free_port(), common::free_port());
        let dir = std::env::temp_dir().join(format!("floodgate-tls-sentinel-{plain}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut conf = format!(
            "port {plain}\ntls-port {tls}\nbind 127.0.0.1\ndir {}\ntls-replication yes\n\
             tls-auth-clients no\nsentinel monitor mymaster 127.0.0.1 {primary_tls_port} 1\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 5000\n",
            dir.display()
        );
        for pair in certs.server_args().chunks(2) {
            let _ = writeln!(conf, "{} {}", pair[0].trim_start_matches("--"), pair[1]);
        }
        let path = dir.join("sentinel.conf");
        std::fs::write(&path, conf).unwrap();
        let child = std::process::Command::new("redis-server")
            .arg(&path)
            .arg("--sentinel")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server --sentinel (apt-get install redis-server)");
        let sentinel = Self {
            child,
            tls,
            plain,
            dir,
        };
        // Ready: it names the primary, and has found its replica.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let replicas = sentinel.ask::<Vec<redis::Value>>("REPLICAS");
            if replicas.is_ok_and(|r| !r.is_empty()) {
                return sentinel;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the TLS sentinel on {plain} did not find the replica in 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `SENTINEL <question> mymaster`, asked on the sentinel's plain port.
    fn ask<T: redis::FromRedisValue>(&self, question: &str) -> redis::RedisResult<T> {
        let mut conn =
            redis::Client::open(format!("redis://127.0.0.1:{}", self.plain))?.get_connection()?;
        redis::cmd("SENTINEL")
            .arg(question)
            .arg("mymaster")
            .query(&mut conn)
    }

    /// `rediss+sentinel://` through this sentinel.
    fn url(&self) -> String {
        format!("rediss+sentinel://127.0.0.1:{}/mymaster", self.tls)
    }

    /// A store through this sentinel, trusting the test's CA.
    fn store(&self, certs: &TestCerts) -> RedisStore {
        RedisStore::builder(&self.url())
            .ca_certificate(certs.ca_pem.clone())
            .build()
            .unwrap()
    }

    /// The primary's port as the sentinel names it now.
    fn primary_port(&self) -> Option<u16> {
        let addr: Vec<String> = self.ask("GET-MASTER-ADDR-BY-NAME").ok()?;
        addr.get(1)?.parse().ok()
    }
}

/// A TLS primary, and a replica in sync with it over TLS; both also listen
/// on a plain port for the test's own questions.
fn tls_primary_and_replica(certs: &Arc<TestCerts>) -> (RedisServer, RedisServer) {
    let options = TlsOptions {
        auth_clients: false,
        plain_port: true,
    };
    let tls_replication = ["--tls-replication", "yes"];
    let primary = RedisServer::start_tls_with(certs, options, &tls_replication);
    let primary_port = primary.port().to_string();
    let replica = RedisServer::start_tls_with(
        certs,
        options,
        &[
            &tls_replication[..],
            &["--replicaof", "127.0.0.1", &primary_port],
        ]
        .concat(),
    );
    let synced = std::time::Instant::now() + Duration::from_secs(30);
    while !replica
        .cmd::<String>(&["INFO", "replication"])
        .contains("master_link_status:up")
    {
        assert!(std::time::Instant::now() < synced, "replica not in sync");
        std::thread::sleep(Duration::from_millis(50));
    }
    (primary, replica)
}

impl Drop for TlsSentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `rediss+sentinel://`: TLS to the sentinel and to the data nodes it
/// names (which replicate over TLS), with the CA given to the builder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_sentinel_reaches_tls_data_nodes_through_a_tls_sentinel() {
    let certs = TestCerts::generate();
    let (primary, _replica) = tokio::task::block_in_place(|| tls_primary_and_replica(&certs));
    let sentinel = tokio::task::block_in_place(|| TlsSentinel::start(&certs, primary.port()));
    let store = sentinel.store(&certs);
    let report = store.probe().await.expect("through the TLS sentinel");
    assert!(format!("{report:?}").contains("tls: true"), "{report:?}");
    let limiter = Limiter::builder(store, FixedWindow::new(2, Duration::from_secs(3600)))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    assert!(limiter.check("k", 1).await.unwrap().allowed());
    assert!(limiter.check("k", 1).await.unwrap().allowed());
    assert!(limiter.check("k", 1).await.unwrap().denied());
    // The state is on the primary (asked on its plain port).
    assert_eq!(
        primary.cmd::<u64>(&["EXISTS", "floodgate:default:fw:{k}"]),
        1
    );
    // Without the CA, the sentinel's certificate is not trusted.
    let untrusted = RedisStore::from_url(&sentinel.url())
        .unwrap()
        .probe()
        .await
        .unwrap_err();
    assert_eq!(untrusted.kind(), StoreErrorKind::Tls, "{untrusted}");
}

/// A failover behind a TLS sentinel: the primary dies, the sentinel
/// promotes the replica (both on TLS, replicating over TLS), and a
/// `rediss+sentinel://` store decides on the new primary by itself, without
/// a new store or a restart. Until then the failure policy answers, within
/// the limiter's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_sentinel_follows_a_failover() {
    let certs = TestCerts::generate();
    let (mut primary, replica) = tokio::task::block_in_place(|| tls_primary_and_replica(&certs));
    let sentinel = tokio::task::block_in_place(|| TlsSentinel::start(&certs, primary.port()));
    let store = sentinel.store(&certs);
    let timeout = Duration::from_millis(500);
    let limiter = Limiter::builder(store, FixedWindow::new(1_000, Duration::from_secs(3600)))
        .timeout(timeout)
        .on_store_failure(FailurePolicy::FailClosed)
        .build()
        .unwrap();
    let d = limiter.check("before", 1).await.unwrap();
    assert!(d.allowed() && !d.is_degraded(), "{d:?}");

    tokio::task::block_in_place(|| primary.kill());
    let killed = std::time::Instant::now();
    // Until the sentinel promotes the replica: fail closed, each answer
    // within the timeout (and some slack for a loaded machine).
    let mut degraded = 0;
    while sentinel.primary_port() != Some(replica.port()) {
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "no failover within 30 s (the sentinel names {:?})",
            sentinel.primary_port()
        );
        let asked = std::time::Instant::now();
        let d = limiter.check("during", 1).await.unwrap();
        assert!(
            asked.elapsed() < timeout + Duration::from_millis(500),
            "a decision took {:?} during the failover",
            asked.elapsed()
        );
        if d.is_degraded() {
            assert!(d.denied(), "fail closed: {d:?}");
            degraded += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let promoted = killed.elapsed();
    // After the promotion, the store finds the new primary by itself.
    let resumed = loop {
        let d = limiter.check("after", 1).await.unwrap();
        if !d.is_degraded() {
            assert!(d.allowed(), "{d:?}");
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < promoted + Duration::from_secs(5),
            "still degraded 5 s after the promotion: {d:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!(
        "promoted after {promoted:?}, decided again after {resumed:?}; \
         {degraded} decisions failed closed in between"
    );
    assert!(degraded > 0, "the outage was not seen");
    // The new primary holds the key decided after the failover.
    assert_eq!(
        replica.cmd::<u64>(&["EXISTS", "floodgate:default:fw:{after}"]),
        1
    );
}
