//! One truth per algorithm: for random traffic (keys, time steps, costs,
//! peeks), the Lua script on a real Redis and the Rust twin in memory give
//! identical decisions, every field.
//!
//! `PROPTEST_CASES` sets the cases per algorithm (default 500).
//!
//! The concurrency limit's leases too: acquires, releases, leases that a
//! crashed server never releases, peeks and counts, each on both sides.

mod common;

use common::twins::{self, ops, rate, window};
use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::store::RedisStore;
use proptest::prelude::*;
use std::fmt::Debug;
use std::time::Duration;
use tokio::runtime::Runtime;

/// Every case of `strategy` through `case`, on one server per test.
fn run_cases<T: Debug>(
    strategy: impl Strategy<Value = T>,
    case: impl Fn(&Runtime, RedisStore, T) -> Result<(), TestCaseError>,
) {
    twins::run_cases_on(RedisServer::start, strategy, case);
}

/// Keys per case.
const KEYS: u8 = 3;

twins::twins_tests!(script_equals_twin: run_cases, KEYS);

/// One of the six algorithms with random small parameters (the windows
/// jittered or not).
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
        (1..15u64, window()).prop_map(|(l, w)| AnyAlg::Fixed(
            FixedWindow::new(l, Duration::from_millis(w)).jittered()
        )),
        (1..15u64, window())
            .prop_map(|(l, w)| AnyAlg::Log(SlidingLog::new(l, Duration::from_millis(w)))),
        (1..15u64, window())
            .prop_map(|(l, w)| AnyAlg::Sliding(SlidingWindow::new(l, Duration::from_millis(w)))),
        (1..15u64, window()).prop_map(|(l, w)| AnyAlg::Sliding(
            SlidingWindow::new(l, Duration::from_millis(w)).jittered()
        )),
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
    let strategy = prop::collection::vec(any_algorithm(), 2..4)
        .prop_flat_map(|algs| (Just(limits_of(&algs)), ops(KEYS, 15, 3000)));
    run_cases(strategy, twins::rate_case);
}

/// Limits with some in shadow mode (`shadow`: bit `i` for limit `i`): a
/// shadowed limit's denial stops no other limit's charge, the same on both
/// sides, decision by decision and field by field (each limit's own
/// decision, through `check_all`).
#[test]
fn several_limits_with_some_in_shadow_mode_script_equals_twin() {
    let strategy =
        (prop::collection::vec(any_algorithm(), 2..4), 1..8u16).prop_flat_map(|(algs, shadow)| {
            let mut limits = limits_of(&algs);
            for i in 0..algs.len() {
                if shadow & (1 << i) != 0 {
                    limits = limits.shadow(&format!("p{i}")).unwrap();
                }
            }
            (Just(limits), ops(KEYS, 15, 3000))
        });
    run_cases(strategy, twins::rate_case);
}

/// Several keys, one decision: each limit charged to a key of its own,
/// all or nothing, the same on both sides.
#[test]
fn several_keys_in_one_decision_script_equals_twin() {
    let strategy = prop::collection::vec(any_algorithm(), 2..4).prop_flat_map(|algs| {
        let n = algs.len();
        (Just(limits_of(&algs)), twins::keys_ops(n, KEYS, 3000))
    });
    run_cases(strategy, twins::keys_case);
}
