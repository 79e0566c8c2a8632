//! One truth per algorithm: for random traffic (keys, time steps, costs,
//! peeks), the Lua script on a real Redis and the Rust twin in memory give
//! identical decisions, every field.
//!
//! `PROPTEST_CASES` sets the cases per algorithm (default 500).

mod common;

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

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Check,
    Peek,
    Refund,
}

#[derive(Debug, Clone)]
struct Op {
    key: u8,
    step_ms: u64,
    cost: u64,
    kind: Kind,
}

fn ops(max_cost: u64, max_step: u64) -> impl Strategy<Value = Vec<Op>> {
    let step = prop_oneof![
        3 => Just(0u64),
        4 => 1..50u64,
        3 => 1..=max_step,
    ];
    let kind = prop_oneof![8 => Just(Kind::Check), 1 => Just(Kind::Peek), 1 => Just(Kind::Refund)];
    let op = (0..3u8, step, 0..=max_cost + 2, kind).prop_map(|(key, step_ms, cost, kind)| Op {
        key,
        step_ms,
        cost,
        kind,
    });
    prop::collection::vec(op, 1..60)
}

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
    rt.block_on(async {
        for (i, op) in ops.iter().enumerate() {
            clock.advance(Duration::from_millis(op.step_ms));
            let key = format!("k{}", op.key);
            let (r, m) = match op.kind {
                Kind::Peek => (
                    on_redis.peek(&key).await.unwrap(),
                    in_memory.peek(&key).await.unwrap(),
                ),
                Kind::Refund => (
                    on_redis.refund(&key, op.cost).await.unwrap(),
                    in_memory.refund(&key, op.cost).await.unwrap(),
                ),
                Kind::Check => {
                    let (r, m) = (
                        on_redis.check_all(&key, op.cost).await.unwrap(),
                        in_memory.check_all(&key, op.cost).await.unwrap(),
                    );
                    prop_assert_eq!(&r.each, &m.each, "op {} of {:?}", i, ops);
                    (r.combined, m.combined)
                }
            };
            prop_assert_eq!(r, m, "op {} of {:?}", i, ops);
        }
        Ok(())
    })
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

fn window() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1000u64), 1..50u64, 50..5000u64]
}

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(10.0),
        Just(1.0 / 3.0),
        0.5..200.0f64,
        (1..100u32).prop_map(|n| n as f64 / 7.0)
    ]
}

#[test]
fn fixed_window_script_equals_twin() {
    run((1..20u64, window()).prop_flat_map(|(l, w)| {
        (
            Just(FixedWindow::new(l, Duration::from_millis(w))),
            ops(l, 3 * w),
        )
    }));
}

#[test]
fn sliding_log_script_equals_twin() {
    run((1..20u64, window()).prop_flat_map(|(l, w)| {
        (
            Just(SlidingLog::new(l, Duration::from_millis(w))),
            ops(l, 3 * w),
        )
    }));
}

#[test]
fn sliding_window_script_equals_twin() {
    run((1..20u64, window()).prop_flat_map(|(l, w)| {
        (
            Just(SlidingWindow::new(l, Duration::from_millis(w))),
            ops(l, 3 * w),
        )
    }));
}

#[test]
fn token_bucket_script_equals_twin() {
    run((1..20u64, rate()).prop_flat_map(|(c, r)| {
        let full = (c as f64 / r * 1000.0) as u64 + 1;
        (Just(TokenBucket::new(c, r)), ops(c, full.min(60_000)))
    }));
}

#[test]
fn leaky_bucket_script_equals_twin() {
    run((1..20u64, rate()).prop_flat_map(|(c, r)| {
        let full = (c as f64 / r * 1000.0) as u64 + 1;
        (Just(LeakyBucket::new(c, r)), ops(c, full.min(60_000)))
    }));
}

#[test]
fn gcra_script_equals_twin() {
    run((1..20u64, window(), 1..25u64).prop_flat_map(|(l, p, b)| {
        (
            Just(Gcra::new(l, Duration::from_millis(p)).burst(b)),
            ops(b, 2 * p),
        )
    }));
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
        (1..15u64, window(), 1..15u64)
            .prop_map(|(l, p, b)| AnyAlg::Gcra(Gcra::new(l, Duration::from_millis(p)).burst(b))),
    ]
}

fn limits_of(algs: &[AnyAlg]) -> Limits {
    algs.iter().enumerate().fold(Limits::new(), |acc, (i, a)| {
        let name = format!("p{i}");
        match a {
            AnyAlg::Fixed(x) => acc.with(&name, *x),
            AnyAlg::Log(x) => acc.with(&name, *x),
            AnyAlg::Sliding(x) => acc.with(&name, *x),
            AnyAlg::Token(x) => acc.with(&name, *x),
            AnyAlg::Leaky(x) => acc.with(&name, *x),
            AnyAlg::Gcra(x) => acc.with(&name, *x),
        }
    })
}

#[test]
fn several_limits_script_equals_twin_all_or_nothing() {
    run(prop::collection::vec(any_algorithm(), 2..4)
        .prop_flat_map(|algs| (Just(limits_of(&algs)), ops(15, 3000))));
}
