//! TLS on real `redis-server --tls-port` processes, with certificates the
//! test makes (`tests/common/tls.rs`): decisions through a CA given to the
//! builder; a wrong CA is an error that names TLS, from `probe()` and as the
//! failure report of a decision; a server that requires client
//! certificates refuses a store without one and serves one with it; the
//! same for a cluster started with `--tls-cluster yes`. (The platform trust
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
