//! Random traffic for the twins properties: the script on Redis
//! (`tests/twins.rs`) or on a Redis Cluster (`tests/cluster.rs`) and the
//! Rust twin in memory must give identical decisions, every field.

use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::concurrency::{ConcurrencyLimiter, ConcurrencyLimiterBuilder, Lease};
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Decision, Error, Limiter};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::runtime::Runtime;

/// The tests of a twins file: `<algorithm>::$test` for each of the six
/// algorithms, the two jittered windows, and `concurrency::$test`, each running
/// `$run_cases(<its strategy>($keys), <its case>)`. (Unused in the test
/// crates other than those two, which compile `common` too.)
#[allow(unused_macros)]
macro_rules! twins_tests {
    ($test:ident: $run_cases:ident, $keys:expr) => {
        $crate::common::twins::twins_tests!(@each $test, $run_cases, $keys, rate_case;
            fixed_window sliding_log sliding_window token_bucket leaky_bucket gcra
            jittered_fixed_window jittered_sliding_window);
        $crate::common::twins::twins_tests!(@each $test, $run_cases, $keys, lease_case;
            concurrency);
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

/// Every case of `strategy` through `case`, each on its own runtime and
/// store, on one server per test from `start` (`RedisServer::start`, or
/// another version's), stopped when the test ends (a static would leak
/// it). Returns the server, to inspect what the run did to it.
pub fn run_cases_on<T: Debug>(
    start: fn() -> super::RedisServer,
    strategy: impl Strategy<Value = T>,
    case: impl Fn(&Runtime, RedisStore, T) -> Result<(), TestCaseError>,
) -> super::RedisServer {
    let redis = start();
    runner(500)
        .run(&strategy, |value| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let store = RedisStore::from_url(&redis.url()).unwrap();
            case(&rt, store, value)
        })
        .unwrap();
    redis
}

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

/// One case of the concurrency limit: `leases` over `remote` (Redis or a
/// cluster) and the twin in memory, on a fresh namespace and clock.
pub fn lease_case<S: Into<Store>>(
    rt: &Runtime,
    remote: S,
    (leases, ops): (Leases, Vec<LeaseOp>),
) -> Result<(), TestCaseError> {
    let (prefix, clock) = fresh();
    let remote = strict!(leases.builder(remote))
        .prefix(&prefix)
        .clock(clock.clone())
        .build()
        .unwrap();
    let in_memory = leases
        .builder(MemoryStore::new())
        .prefix(&prefix)
        .clock(clock.clone())
        .build()
        .unwrap();
    rt.block_on(same_lease_decisions(&remote, &in_memory, &clock, &ops))
}

#[derive(Debug, Clone)]
pub enum Kind {
    Check,
    Peek,
    Refund,
    /// A reservation that may wait up to this many ms.
    Reserve(u64),
    /// Cancel one of the granted reservations held (all keys), if any.
    Cancel(Index),
    /// Charge the cost whether it fits or not.
    Debit,
    /// Refuse the key for this many ms (an error for a window or the log,
    /// on both sides).
    Block(u64),
    /// Grant as much of the cost as fits now.
    AtMost,
}

#[derive(Debug, Clone)]
pub struct Op {
    pub key: u8,
    pub step_ms: u64,
    pub cost: u64,
    pub kind: Kind,
}

/// Up to 60 operations over `keys` keys: mostly checks, some peeks,
/// refunds, reservations (waits of 0, small, or up to twice `max_step`),
/// cancellations, debits, blocks and partial grants, costs up to `max_cost + 2`, time steps of 0, small, or up to
/// `max_step` ms.
pub fn ops(keys: u8, max_cost: u64, max_step: u64) -> impl Strategy<Value = Vec<Op>> {
    let step = step(max_step);
    let wait = prop_oneof![1 => Just(0u64), 2 => 1..50u64, 2 => 1..=2 * max_step];
    let kind = prop_oneof![
        8 => Just(Kind::Check),
        1 => Just(Kind::Peek),
        1 => Just(Kind::Refund),
        3 => wait.prop_map(Kind::Reserve),
        1 => any::<Index>().prop_map(Kind::Cancel),
        1 => Just(Kind::Debit),
        1 => (1..=2 * max_step).prop_map(Kind::Block),
        1 => Just(Kind::AtMost),
    ];
    let op = (0..keys, step, 0..=max_cost + 2, kind).prop_map(|(key, step_ms, cost, kind)| Op {
        key,
        step_ms,
        cost,
        kind,
    });
    prop::collection::vec(op, 1..60)
}

/// A time step: 0, small, or up to `max_step` ms.
fn step(max_step: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(0u64),
        4 => 1..50u64,
        3 => 1..=max_step,
    ]
}

pub fn window() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1000u64), 1..50u64, 50..5000u64]
}

pub fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(10.0),
        Just(1.0 / 3.0),
        0.5..200.0f64,
        (1..100u32).prop_map(|n| f64::from(n) / 7.0)
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

/// A jittered fixed window: each key's windows start at its own offset,
/// which the memory twin computes as the client sends it to Redis.
pub fn jittered_fixed_window(keys: u8) -> impl Strategy<Value = (FixedWindow, Vec<Op>)> {
    fixed_window(keys).prop_map(|(a, ops)| (a.jittered(), ops))
}

/// A jittered sliding window, as [`jittered_fixed_window`].
pub fn jittered_sliding_window(keys: u8) -> impl Strategy<Value = (SlidingWindow, Vec<Op>)> {
    sliding_window(keys).prop_map(|(a, ops)| (a.jittered(), ops))
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
    // The granted reservations, as (remote, in memory) pairs.
    let mut held = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        clock.advance(Duration::from_millis(op.step_ms));
        let key = format!("k{}", op.key);
        let (r, m) = match &op.kind {
            Kind::Reserve(ms) => {
                let wait = Duration::from_millis(*ms);
                let r = remote.reserve(&key, op.cost, wait).await.unwrap();
                let m = in_memory.reserve(&key, op.cost, wait).await.unwrap();
                let both = (*r.decision(), *m.decision());
                if r.is_granted() && m.is_granted() {
                    held.push((r, m));
                }
                both
            }
            Kind::Debit => (
                remote.debit(&key, op.cost).await.unwrap(),
                in_memory.debit(&key, op.cost).await.unwrap(),
            ),
            Kind::Block(ms) => {
                let t = Duration::from_millis(*ms);
                match (remote.block(&key, t).await, in_memory.block(&key, t).await) {
                    (Ok(r), Ok(m)) => (r, m),
                    (Err(Error::Unsupported(r)), Err(Error::Unsupported(m))) => {
                        prop_assert_eq!(r.to_string(), m.to_string());
                        continue;
                    }
                    other => panic!("op {i}: {other:?}"),
                }
            }
            Kind::AtMost => {
                let r = remote.check_at_most(&key, op.cost).await.unwrap();
                let m = in_memory.check_at_most(&key, op.cost).await.unwrap();
                prop_assert_eq!(r.granted(), m.granted(), "op {} of {:?}", i, ops);
                (*r.decision(), *m.decision())
            }
            Kind::Cancel(_) if held.is_empty() => continue,
            Kind::Cancel(which) => {
                let (r, m) = held.remove(which.index(held.len()));
                (r.cancel().await.unwrap(), m.cancel().await.unwrap())
            }
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
                prop_assert_eq!(r.each(), m.each(), "op {} of {:?}", i, ops);
                (*r.overall(), *m.overall())
            }
        };
        prop_assert_eq!(r, m, "op {} of {:?}", i, ops);
    }
    Ok(())
}

/// A concurrency limit: at most `max` leases alive per key, of `lease_ms`
/// each.
#[derive(Debug, Clone, Copy)]
pub struct Leases {
    pub max: u64,
    pub lease_ms: u64,
}

impl Leases {
    /// Its limiter over `store`.
    pub fn builder(self, store: impl Into<Store>) -> ConcurrencyLimiterBuilder {
        ConcurrencyLimiter::builder(store, self.max).lease(Duration::from_millis(self.lease_ms))
    }
}

#[derive(Debug, Clone)]
pub enum LeaseKind {
    Acquire,
    /// Release one of the leases held (all keys), if any.
    Release(Index),
    /// A server that crashes holding one of the leases: never released.
    Forget(Index),
    Peek,
    InFlight,
}

#[derive(Debug, Clone)]
pub struct LeaseOp {
    pub key: u8,
    pub step_ms: u64,
    pub kind: LeaseKind,
}

/// A concurrency limit of 1 to 5 leases of 1 to 5000 ms, and up to 60
/// operations over `keys` keys: mostly acquires and releases, some crashes,
/// peeks and counts; time steps of 0, small, exactly a lease (onto an
/// expiry), or up to two leases.
pub fn concurrency(keys: u8) -> impl Strategy<Value = (Leases, Vec<LeaseOp>)> {
    (1..6u64, window()).prop_flat_map(move |(max, lease_ms)| {
        let step = prop_oneof![9 => step(2 * lease_ms), 1 => Just(lease_ms)];
        let kind = prop_oneof![
            4 => Just(LeaseKind::Acquire),
            2 => any::<Index>().prop_map(LeaseKind::Release),
            1 => any::<Index>().prop_map(LeaseKind::Forget),
            1 => Just(LeaseKind::Peek),
            1 => Just(LeaseKind::InFlight),
        ];
        let op =
            (0..keys, step, kind).prop_map(|(key, step_ms, kind)| LeaseOp { key, step_ms, kind });
        (
            Just(Leases { max, lease_ms }),
            prop::collection::vec(op, 1..60),
        )
    })
}

/// An acquire's decision: `Ok` with the one that granted the lease.
fn granted(acquired: &Result<Lease, Decision>) -> Result<Decision, Decision> {
    acquired.as_ref().map(|l| *l.decision()).map_err(|d| *d)
}

/// Run `ops` through both concurrency limiters (sharing `clock`), each side
/// holding its own leases, and compare every decision and count.
pub async fn same_lease_decisions(
    remote: &ConcurrencyLimiter,
    in_memory: &ConcurrencyLimiter,
    clock: &ManualClock,
    ops: &[LeaseOp],
) -> Result<(), TestCaseError> {
    // The leases held, as (remote, in memory) pairs from the same acquire.
    let mut held: Vec<(Lease, Lease)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        clock.advance(Duration::from_millis(op.step_ms));
        let key = format!("k{}", op.key);
        match &op.kind {
            LeaseKind::Acquire => {
                let r = remote.acquire(&key).await.unwrap();
                let m = in_memory.acquire(&key).await.unwrap();
                prop_assert_eq!(granted(&r), granted(&m), "op {} of {:?}", i, ops);
                if let (Ok(r), Ok(m)) = (r, m) {
                    held.push((r, m));
                }
            }
            LeaseKind::Release(_) | LeaseKind::Forget(_) if held.is_empty() => {}
            LeaseKind::Release(which) => {
                let (r, m) = held.remove(which.index(held.len()));
                r.release().await;
                m.release().await;
            }
            LeaseKind::Forget(which) => {
                std::mem::forget(held.remove(which.index(held.len())));
            }
            LeaseKind::Peek => prop_assert_eq!(
                remote.peek(&key).await.unwrap(),
                in_memory.peek(&key).await.unwrap(),
                "op {} of {:?}",
                i,
                ops
            ),
            LeaseKind::InFlight => prop_assert_eq!(
                remote.in_flight(&key).await.unwrap(),
                in_memory.in_flight(&key).await.unwrap(),
                "op {} of {:?}",
                i,
                ops
            ),
        }
    }
    for (r, m) in held {
        r.release().await;
        m.release().await;
    }
    Ok(())
}

/// One call of several keys: for each limit (`p0`, `p1`, ...) the key it
/// is charged to, the cost, and the time step before it.
#[derive(Debug, Clone)]
pub struct KeysOp {
    pub keys: Vec<u8>,
    pub step_ms: u64,
    pub cost: u64,
}

/// Up to 40 calls of `limits` limits, each limit's key one of `keys`.
pub fn keys_ops(limits: usize, keys: u8, max_step: u64) -> impl Strategy<Value = Vec<KeysOp>> {
    let op = (
        prop::collection::vec(0..keys, limits),
        step(max_step),
        0..6u64,
    )
        .prop_map(|(keys, step_ms, cost)| KeysOp {
            keys,
            step_ms,
            cost,
        });
    prop::collection::vec(op, 1..40)
}

/// One case of several keys, one decision: `limits` over `remote` and the
/// twin in memory, decision by decision and limit by limit.
pub fn keys_case<S: Into<Store>>(
    rt: &Runtime,
    remote: S,
    (limits, ops): (Limits, Vec<KeysOp>),
) -> Result<(), TestCaseError> {
    let (prefix, clock) = fresh();
    let remote = strict!(Limiter::builder(remote, limits.clone()))
        .prefix(&prefix)
        .clock(clock.clone())
        .build()
        .unwrap();
    let in_memory = Limiter::builder(MemoryStore::new(), limits)
        .prefix(&prefix)
        .clock(clock.clone())
        .build()
        .unwrap();
    rt.block_on(async {
        for (i, op) in ops.iter().enumerate() {
            clock.advance(Duration::from_millis(op.step_ms));
            let names: Vec<String> = (0..op.keys.len()).map(|l| format!("p{l}")).collect();
            let values: Vec<String> = op.keys.iter().map(|k| format!("k{k}")).collect();
            let keys: Vec<(&str, &str)> = names
                .iter()
                .zip(&values)
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            let r = remote.check_keys(&keys, op.cost).await.unwrap();
            let m = in_memory.check_keys(&keys, op.cost).await.unwrap();
            prop_assert_eq!(r.each(), m.each(), "op {} of {:?}", i, ops);
            prop_assert_eq!(r.overall(), m.overall(), "op {} of {:?}", i, ops);
        }
        Ok(())
    })
}
