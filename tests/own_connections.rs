//! A store over connections the app already has: `RedisStore::from_client`
//! (a configured redis-rs client) and `RedisStore::from_pool` (a
//! deadpool-redis pool, feature `deadpool`) make the same decisions as the
//! in-memory twin, as `from_url` does (a subset of `tests/twins.rs`: 100
//! cases per algorithm, leases included), and `probe()` works over them.

#![cfg(feature = "deadpool")]

mod common;

use common::twins;
use common::RedisServer;
use floodgate::store::RedisStore;
use proptest::prelude::*;
use std::fmt::Debug;
use tokio::runtime::Runtime;

/// Cases per algorithm (the full properties run in `tests/twins.rs`).
const CASES: u32 = 100;
const KEYS: u8 = 3;

fn run_cases<T: Debug>(
    make: impl Fn(&str) -> RedisStore,
    strategy: impl Strategy<Value = T>,
    case: impl Fn(&Runtime, RedisStore, T) -> Result<(), TestCaseError>,
) {
    let redis = RedisServer::start();
    twins::runner(CASES)
        .run(&strategy, |value| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            case(&rt, make(&redis.url()), value)
        })
        .unwrap();
}

fn client_store(url: &str) -> RedisStore {
    RedisStore::from_client(redis::Client::open(url).unwrap())
}

fn pool_store(url: &str) -> RedisStore {
    let pool = deadpool_redis::Config::from_url(url)
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .unwrap();
    RedisStore::from_pool(pool)
}

mod from_client {
    use super::*;

    fn run_cases<T: Debug>(
        strategy: impl Strategy<Value = T>,
        case: impl Fn(&Runtime, RedisStore, T) -> Result<(), TestCaseError>,
    ) {
        super::run_cases(client_store, strategy, case);
    }

    twins::twins_tests!(same_as_the_twin: run_cases, KEYS);
}

mod from_pool {
    use super::*;

    fn run_cases<T: Debug>(
        strategy: impl Strategy<Value = T>,
        case: impl Fn(&Runtime, RedisStore, T) -> Result<(), TestCaseError>,
    ) {
        super::run_cases(pool_store, strategy, case);
    }

    twins::twins_tests!(same_as_the_twin: run_cases, KEYS);
}

#[tokio::test]
async fn probe_over_a_client_and_a_pool() {
    let redis = RedisServer::start();
    for store in [client_store(&redis.url()), pool_store(&redis.url())] {
        let report = store.probe().await.unwrap();
        let node = &report.nodes()[0];
        assert_eq!(node.server(), "redis");
        assert!(node.version().starts_with(char::is_numeric), "{report:?}");
        assert_eq!(node.role(), "master");
        assert!(!node.tls());
        assert!(report.functions());
    }
}

#[tokio::test]
async fn a_pool_that_cannot_connect_is_unavailable() {
    let port = common::free_port();
    let store = pool_store(&format!("redis://127.0.0.1:{port}"));
    let e = store.probe().await.unwrap_err();
    assert_eq!(
        e.kind(),
        floodgate::store::StoreErrorKind::Unavailable,
        "{e}"
    );
}
