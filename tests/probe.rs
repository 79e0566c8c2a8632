//! `probe()` on real servers: what it reports (server, version, role,
//! functions, the eviction policy and its warning), and the servers it
//! refuses: one that runs no scripts at all (its scripting commands renamed
//! away, as a build without Lua answers), one that is not reachable.

mod common;

use common::RedisServer;
use floodgate::algorithm::Gcra;
use floodgate::failure::{FailureKind, FailurePolicy};
use floodgate::store::{RedisClusterStore, RedisStore, StoreErrorKind};
use floodgate::{Error, Limiter};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[tokio::test]
async fn what_a_plain_server_reports() {
    let server =
        RedisServer::start_with(&["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"]);
    let report = RedisStore::from_url(&server.url())
        .unwrap()
        .probe()
        .await
        .unwrap();
    let node = &report.nodes()[0];
    assert_eq!(node.server(), "redis");
    assert!(
        node.version().starts_with(|c: char| c.is_ascii_digit()),
        "{node:?}"
    );
    assert_eq!(node.role(), "master");
    // An address is `host:port`; words are `Display`'s.
    assert_eq!(node.address(), format!("127.0.0.1:{}", server.port()));
    assert_eq!(
        node.to_string(),
        format!(
            "redis {} (master) at 127.0.0.1:{}",
            node.version(),
            server.port()
        )
    );
    assert!(!node.tls());
    assert_eq!(node.maxmemory(), Some(64 * 1024 * 1024));
    assert_eq!(node.maxmemory_policy(), Some("noeviction"));
    assert!(report.functions());
    assert!(report.warnings().is_empty(), "{report:?}");
}

#[tokio::test]
async fn an_eviction_policy_that_may_evict_floodgates_keys_is_a_warning() {
    let server =
        RedisServer::start_with(&["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"]);
    let report = RedisStore::from_url(&server.url())
        .unwrap()
        .probe()
        .await
        .unwrap();
    let warnings = report.warnings().join("\n");
    assert!(
        warnings.contains("volatile-lru") && warnings.contains("evict"),
        "{warnings}"
    );
}

#[tokio::test]
async fn a_replica_is_refused() {
    let primary = RedisServer::start();
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    // The probe's own decision fails on a replica (READONLY): an error.
    let e = RedisStore::from_url(&replica.url())
        .unwrap()
        .probe()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Server, "{e}");
    let text = e.to_string().to_lowercase();
    assert!(
        text.contains("read only") || text.contains("readonly"),
        "{e}"
    );
}

#[tokio::test]
async fn a_server_without_scripting_is_refused_by_probe_and_every_decision() {
    let server = RedisServer::start_with(&[
        "--rename-command",
        "FCALL",
        "",
        "--rename-command",
        "FUNCTION",
        "",
        "--rename-command",
        "EVAL",
        "",
        "--rename-command",
        "EVALSHA",
        "",
    ]);
    let store = RedisStore::from_url(&server.url()).unwrap();
    let e = store.probe().await.unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Scripting, "{e}");

    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = seen.clone();
    let limiter = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1)))
        .timeout(Duration::from_secs(2))
        .on_store_failure(FailurePolicy::ReturnError)
        .failure_hook(move |event| hook_seen.lock().unwrap().push(event.kind))
        .build()
        .unwrap();
    match limiter.check("ana", 1).await {
        Err(Error::Store(e)) => assert_eq!(e.kind(), StoreErrorKind::Scripting, "{e}"),
        other => panic!("expected a scripting error, got {other:?}"),
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [FailureKind::Store(StoreErrorKind::Scripting)]
    );
}

#[tokio::test]
async fn nothing_listening_is_unavailable_at_once() {
    let port = common::free_port();
    let url = format!("redis://127.0.0.1:{port}");
    let e = RedisStore::from_url(&url)
        .unwrap()
        .probe()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
    assert!(
        e.to_string().contains(&port.to_string()),
        "names the address: {e}"
    );
    let e = RedisClusterStore::from_url(&url)
        .unwrap()
        .probe()
        .await
        .unwrap_err();
    assert_eq!(e.kind(), StoreErrorKind::Unavailable, "{e}");
}
