//! Random traffic for the twins properties: the script on Redis
//! (`tests/twins.rs`) or on a Redis Cluster (`tests/cluster.rs`) and the
//! Rust twin in memory must give identical decisions, every field.

use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::{MemoryStore, Store};
use floodgate::Limiter;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::runtime::Runtime;

/// The tests of a twins file: `<algorithm>::$test` for each of the six
/// algorithms, each running `$run_cases(<its strategy>($keys), <its case>)`.
/// (Unused in the test crates other than those two, which compile `common`
/// too.)
#[allow(unused_macros)]
macro_rules! twins_tests {
    ($test:ident: $run_cases:ident, $keys:expr) => {
        $crate::common::twins::twins_tests!(@each $test, $run_cases, $keys, rate_case;
            fixed_window sliding_log sliding_window token_bucket leaky_bucket gcra);
    };
    (@each $test:ident, $run_cases:ident, $keys:expr, $case:ident; $($strategy:ident)*) => {$(
        mod $strategy {
            use super::*;
            #[test]
            fn $test() {
                $run_cases(
                    $crate::common::twins::$strategy($keys),
                    $crate::common::twins::$case,
                );
            }
        }
    )*};
}
#[allow(unused_imports)]
pub(crate) use twins_tests;

/// A proptest runner of `PROPTEST_CASES` cases, else `default`.
pub fn runner(default: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// The remote limiter of a case: store errors reach the caller (no silent
/// fail-open decisions on a loaded machine), after a timeout long enough
/// for a loaded 2-core machine.
macro_rules! strict {
    ($builder:expr) => {
        $builder
            .on_store_failure(FailurePolicy::ReturnError)
            .timeout(Duration::from_secs(10))
            .circuit_breaker(CircuitBreaker::disabled())
    };
}

/// A fresh namespace and clock for one case: each case gets its own keys in
/// a shared server.
fn fresh() -> (String, ManualClock) {
    static CASE: AtomicU64 = AtomicU64::new(0);
    let prefix = format!("twin{}", CASE.fetch_add(1, Ordering::Relaxed));
    (prefix, ManualClock::new(1_700_000_000_000))
}

/// One case of a rate algorithm: `alg` over `remote` (Redis or a cluster)
/// and the twin in memory, on a fresh namespace and clock.
pub fn rate_case<S: Into<Store>, A: Algorithm>(
    rt: &Runtime,
    remote: S,
    (alg, ops): (A, Vec<Op>),
) -> Result<(), TestCaseError> {
    let (prefix, clock) = fresh();
    let remote = strict!(Limiter::builder(remote, alg.clone()))
        .prefix(&prefix)
        .clock(clock.clone())
        .build()
        .unwrap();
    let in_memory = Limiter::builder(MemoryStore::new(), alg)
        .prefix(&prefix)
        .clock(clock.clone())
        .build()
        .unwrap();
    rt.block_on(same_decisions(&remote, &in_memory, &clock, &ops))
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Check,
    Peek,
    Refund,
}

#[derive(Debug, Clone)]
pub struct Op {
    pub key: u8,
    pub step_ms: u64,
    pub cost: u64,
    pub kind: Kind,
}

/// Up to 60 operations over `keys` keys: mostly checks, some peeks and
/// refunds, costs up to `max_cost + 2`, time steps of 0, small, or up to
/// `max_step` ms.
pub fn ops(keys: u8, max_cost: u64, max_step: u64) -> impl Strategy<Value = Vec<Op>> {
    let step = prop_oneof![
        3 => Just(0u64),
        4 => 1..50u64,
        3 => 1..=max_step,
    ];
    let kind = prop_oneof![8 => Just(Kind::Check), 1 => Just(Kind::Peek), 1 => Just(Kind::Refund)];
    let op = (0..keys, step, 0..=max_cost + 2, kind).prop_map(|(key, step_ms, cost, kind)| Op {
        key,
        step_ms,
        cost,
        kind,
    });
    prop::collection::vec(op, 1..60)
}

pub fn window() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1000u64), 1..50u64, 50..5000u64]
}

pub fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(10.0),
        Just(1.0 / 3.0),
        0.5..200.0f64,
        (1..100u32).prop_map(|n| n as f64 / 7.0)
    ]
}

pub fn fixed_window(keys: u8) -> impl Strategy<Value = (FixedWindow, Vec<Op>)> {
    (1..20u64, window()).prop_flat_map(move |(l, w)| {
        (
            Just(FixedWindow::new(l, Duration::from_millis(w))),
            ops(keys, l, 3 * w),
        )
    })
}

pub fn sliding_log(keys: u8) -> impl Strategy<Value = (SlidingLog, Vec<Op>)> {
    (1..20u64, window()).prop_flat_map(move |(l, w)| {
        (
            Just(SlidingLog::new(l, Duration::from_millis(w))),
            ops(keys, l, 3 * w),
        )
    })
}

pub fn sliding_window(keys: u8) -> impl Strategy<Value = (SlidingWindow, Vec<Op>)> {
    (1..20u64, window()).prop_flat_map(move |(l, w)| {
        (
            Just(SlidingWindow::new(l, Duration::from_millis(w))),
            ops(keys, l, 3 * w),
        )
    })
}

/// Time steps up to the time a bucket of `c` at rate `r` takes to fill.
fn full_ms(c: u64, r: f64) -> u64 {
    ((c as f64 / r * 1000.0) as u64 + 1).min(60_000)
}

pub fn token_bucket(keys: u8) -> impl Strategy<Value = (TokenBucket, Vec<Op>)> {
    (1..20u64, rate())
        .prop_flat_map(move |(c, r)| (Just(TokenBucket::new(c, r)), ops(keys, c, full_ms(c, r))))
}

pub fn leaky_bucket(keys: u8) -> impl Strategy<Value = (LeakyBucket, Vec<Op>)> {
    (1..20u64, rate())
        .prop_flat_map(move |(c, r)| (Just(LeakyBucket::new(c, r)), ops(keys, c, full_ms(c, r))))
}

pub fn gcra(keys: u8) -> impl Strategy<Value = (Gcra, Vec<Op>)> {
    (1..20u64, window(), 1..25u64).prop_flat_map(move |(l, p, b)| {
        (
            Just(Gcra::new(l, Duration::from_millis(p)).try_burst(b).unwrap()),
            ops(keys, b, 2 * p),
        )
    })
}

/// Run `ops` through both limiters (sharing `clock`) and compare every
/// decision, each policy's included.
pub async fn same_decisions<A: Algorithm>(
    remote: &Limiter<A>,
    in_memory: &Limiter<A>,
    clock: &ManualClock,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    for (i, op) in ops.iter().enumerate() {
        clock.advance(Duration::from_millis(op.step_ms));
        let key = format!("k{}", op.key);
        let (r, m) = match op.kind {
            Kind::Peek => (
                remote.peek(&key).await.unwrap(),
                in_memory.peek(&key).await.unwrap(),
            ),
            Kind::Refund => (
                remote.refund(&key, op.cost).await.unwrap(),
                in_memory.refund(&key, op.cost).await.unwrap(),
            ),
            Kind::Check => {
                let (r, m) = (
                    remote.check_all(&key, op.cost).await.unwrap(),
                    in_memory.check_all(&key, op.cost).await.unwrap(),
                );
                prop_assert_eq!(&r.each, &m.each, "op {} of {:?}", i, ops);
                (r.combined, m.combined)
            }
        };
        prop_assert_eq!(r, m, "op {} of {:?}", i, ops);
    }
    Ok(())
}
