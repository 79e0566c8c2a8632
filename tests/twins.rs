//! One truth per algorithm: for random traffic (keys, time steps, costs,
//! peeks), the Lua script on a real Redis and the Rust twin in memory give
//! identical decisions, every field.
//!
//! `PROPTEST_CASES` sets the cases per algorithm (default 500).

mod common;

use common::twins::{self, ops, rate, window, Op};
use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::{MemoryStore, RedisStore};
use floodgate::Limiter;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500)
}

/// Run `ops` through `alg` on both stores and compare every decision.
fn same_decisions<A: Algorithm>(
    redis: &RedisServer,
    alg: A,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    // Each case gets its own namespace in the shared server.
    let prefix = format!("case{}", CASE.fetch_add(1, Ordering::Relaxed));
    let clock = ManualClock::new(1_700_000_000_000);
    let rt = rt();
    let store = RedisStore::from_url(&redis.url()).unwrap();
    let on_redis = Limiter::builder(store, alg.clone())
        .prefix(&prefix)
        .clock(clock.clone())
        // Errors, not silent fail-open decisions, on a loaded machine.
        .on_store_failure(FailurePolicy::ReturnError)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let in_memory = Limiter::builder(MemoryStore::new(), alg)
        .prefix(&prefix)
        .clock(clock.clone())
        .build()
        .unwrap();
    rt.block_on(twins::same_decisions(&on_redis, &in_memory, &clock, ops))
}

fn run<A: Algorithm + 'static, S: Strategy<Value = (A, Vec<Op>)>>(strategy: S) {
    // One server per test, stopped when the test ends (a static would leak it).
    let redis = RedisServer::start();
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |(alg, ops)| same_decisions(&redis, alg, &ops))
        .unwrap();
}

/// Keys per case.
const KEYS: u8 = 3;

#[test]
fn fixed_window_script_equals_twin() {
    run(twins::fixed_window(KEYS));
}

#[test]
fn sliding_log_script_equals_twin() {
    run(twins::sliding_log(KEYS));
}

#[test]
fn sliding_window_script_equals_twin() {
    run(twins::sliding_window(KEYS));
}

#[test]
fn token_bucket_script_equals_twin() {
    run(twins::token_bucket(KEYS));
}

#[test]
fn leaky_bucket_script_equals_twin() {
    run(twins::leaky_bucket(KEYS));
}

#[test]
fn gcra_script_equals_twin() {
    run(twins::gcra(KEYS));
}

/// One of the six algorithms with random small parameters.
#[derive(Debug, Clone)]
enum AnyAlg {
    Fixed(FixedWindow),
    Log(SlidingLog),
    Sliding(SlidingWindow),
    Token(TokenBucket),
    Leaky(LeakyBucket),
    Gcra(Gcra),
}

fn any_algorithm() -> impl Strategy<Value = AnyAlg> {
    prop_oneof![
        (1..15u64, window())
            .prop_map(|(l, w)| AnyAlg::Fixed(FixedWindow::new(l, Duration::from_millis(w)))),
        (1..15u64, window())
            .prop_map(|(l, w)| AnyAlg::Log(SlidingLog::new(l, Duration::from_millis(w)))),
        (1..15u64, window())
            .prop_map(|(l, w)| AnyAlg::Sliding(SlidingWindow::new(l, Duration::from_millis(w)))),
        (1..15u64, rate()).prop_map(|(c, r)| AnyAlg::Token(TokenBucket::new(c, r))),
        (1..15u64, rate()).prop_map(|(c, r)| AnyAlg::Leaky(LeakyBucket::new(c, r))),
        (1..15u64, window(), 1..15u64).prop_map(|(l, p, b)| AnyAlg::Gcra(
            Gcra::new(l, Duration::from_millis(p)).try_burst(b).unwrap()
        )),
    ]
}

/// `algs` as limits `p0`, `p1`, ... (at least one).
fn limits_of(algs: &[AnyAlg]) -> Limits {
    fn add<A: Single>(acc: Option<Limits>, name: &str, a: A) -> Option<Limits> {
        Some(match acc {
            None => Limits::new(name, a),
            Some(acc) => acc.try_with(name, a).unwrap(),
        })
    }
    let limits = algs.iter().enumerate().fold(None, |acc, (i, a)| {
        let name = format!("p{i}");
        match a {
            AnyAlg::Fixed(x) => add(acc, &name, *x),
            AnyAlg::Log(x) => add(acc, &name, *x),
            AnyAlg::Sliding(x) => add(acc, &name, *x),
            AnyAlg::Token(x) => add(acc, &name, *x),
            AnyAlg::Leaky(x) => add(acc, &name, *x),
            AnyAlg::Gcra(x) => add(acc, &name, *x),
        }
    });
    limits.expect("at least one algorithm")
}

#[test]
fn several_limits_script_equals_twin_all_or_nothing() {
    run(prop::collection::vec(any_algorithm(), 2..4)
        .prop_flat_map(|algs| (Just(limits_of(&algs)), ops(KEYS, 15, 3000))));
}
