//! Random traffic for the twins properties: the script on Redis
//! (`tests/twins.rs`) or on a Redis Cluster (`tests/cluster.rs`) and the
//! Rust twin in memory must give identical decisions, every field.

use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::Limiter;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::time::Duration;

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
