//! No public entry panics, whatever its arguments, on any valid limiter.
//!
//! Each case builds limiters of arbitrary valid parameters (any of the six
//! algorithms, or `Limits` of 1 to 4 of them with distinct names), and calls
//! them with arbitrary keys (any string, empty, unicode, braces, 100 KB),
//! costs (any `u64`) and clock times (any `u64`, far beyond 2^48 too):
//!
//! * `limiters`: `check`, `check_all`, `check_with` and `refund_with` (with
//!   a second algorithm of the same type, sharing state where names and
//!   algorithms match), `peek`, `refund`; a concurrency limiter's
//!   `acquire`, `peek`, `in_flight`, `Lease::release` and dropped leases;
//! * `layers`: a `ConcurrencyLimitLayer` around a `RateLimitLayer` around
//!   another one, on an axum `Router` through `oneshot`, with arbitrary
//!   header bytes (for `Header`, `ClientIp`, `PeerIp` and a tuple key), an
//!   arbitrary `Cost` extension, `cost` or `cost_fn`, a `limits_for`
//!   closure, every counting mode, header style, shadow mode and custom
//!   rejections.
//!
//! On a `MemoryStore` with `PROPTEST_CASES` cases (default 256), and on a
//! real Redis with an eighth of that (default 32), failing with
//! `ReturnError` after 10 s: on Redis every call must return `Ok` (and no
//! response be a 503), so an answer the crate cannot read, or a script
//! error, fails the test instead of failing open.
//!
//! Invariants checked on the way, for every configuration the constructors
//! accept: a decision's reason agrees with `allowed` and `retry_after`; a
//! cost of 0 and a refund are admitted; a cost above a limit is denied as
//! `CostTooHigh` without `retry_after`; `remaining <= limit`;
//! `in_flight <= max`. The generators build only accepted configurations,
//! at their ends too (`try_*().ok()`, or the longest window a sliding log
//! of that limit may have). `regressions`, at the end, keeps what this file
//! found and is now fixed.
//!
//! And two limits of the inputs: a cost that a sliding log could admit is
//! at most 4096 (the larger ones are above `MAX_LOG`, which every sliding
//! log denies unwritten), because a check writes one log entry per unit of
//! an admitted cost: a cost of `MAX_LOG` takes Redis about 150 ms, 4096
//! about 5 to 15 ms; the layers on Redis get no leaky bucket, whose delay
//! the layer sleeps, in real time there.

mod common;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode};
use axum::routing::get;
use axum::Router;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::concurrency::{ConcurrencyLimiter, Lease};
use floodgate::failure::FailurePolicy;
use floodgate::headers::{HeaderStyle, ResetUnit};
use floodgate::key::{ClientIp, Global, Header, KeyExtractor, KeyRejection, PeerIp, ProxyHeader};
use floodgate::layer::predicate::{ServerErrors, Status};
use floodgate::layer::{ConcurrencyLimitLayer, Cost, RateLimitLayer};
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Decision, Decisions, Limiter, Reason};
use proptest::collection::{btree_set, vec};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tower::ServiceExt;

const MAX: u64 = 1 << 40;
#[allow(clippy::cast_precision_loss, reason = "2^40 is exact in f64")]
const MIN_RATE: f64 = 1000.0 / MAX as f64;
#[allow(clippy::cast_precision_loss, reason = "2^40 is exact in f64")]
const MAX_RATE: f64 = MAX as f64 * 1000.0;
/// The largest generated cost that a sliding log may admit: each unit
/// admitted is a log entry written in that call (see the file's docs).
const LOG_COST_MAX: u64 = 4096;
/// Redis calls fail with an error after this, rather than failing open.
const REDIS_TIMEOUT: Duration = Duration::from_secs(10);

type Outcome = Result<(), TestCaseError>;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ---------------------------------------------------------------- inputs

/// A count (limit, capacity, burst): small ones often, every size, the ends.
fn count() -> impl Strategy<Value = u64> + Clone {
    count_to(MAX)
}

/// A count up to `most`, as `count`.
fn count_to(most: u64) -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        4 => 1..=4u64,
        4 => 1..=16u64,
        3 => 1..=most,
        1 => Just(1),
        1 => Just(most),
    ]
}

/// A window in ms: short ones often, every length, the ends.
fn window_ms() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![3 => 1..=10_000u64, 3 => 1..=MAX, 1 => Just(1), 1 => Just(MAX)]
}

/// A rate per second, spread evenly over its whole range in orders of
/// magnitude, and the ends.
fn rate() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![
        4 => (MIN_RATE.log2()..=MAX_RATE.log2()).prop_map(|x| x.exp2().clamp(MIN_RATE, MAX_RATE)),
        2 => 0.1..1_000.0f64,
        1 => Just(MIN_RATE),
        1 => Just(MAX_RATE),
    ]
}

/// A cost: small ones often, every size, the ends; none between
/// `LOG_COST_MAX` and `MAX_LOG`, where a sliding log would write as many
/// entries in one call.
fn cost() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        6 => Just(1),
        4 => 0..=4u64,
        4 => 0..=16u64,
        2 => 0..=LOG_COST_MAX,
        2 => MAX_LOG + 1..=u64::MAX,
        2 => MAX_LOG + 1..=MAX + 2,
        1 => Just(MAX_LOG + 1),
        1 => Just(u64::MAX),
    ]
}

/// A clock reading: anything, the clamp at 2^48 and beyond it.
fn time() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        3 => 0..=1u64 << 48,
        2 => any::<u64>(),
        1 => Just(0),
        1 => Just(1 << 48),
        1 => Just(u64::MAX),
        2 => (1u64 << 40)..(1 << 41),
    ]
}

/// How a case moves its clock: to any time, or on by a little (so that
/// limits fill up).
#[derive(Debug, Clone, Copy)]
enum Tick {
    Set(u64),
    Advance(u64),
}

fn tick() -> impl Strategy<Value = Tick> + Clone {
    prop_oneof![
        1 => time().prop_map(Tick::Set),
        3 => (0..=500u64).prop_map(Tick::Advance),
    ]
}

impl Tick {
    fn apply(self, clock: &ManualClock) {
        match self {
            Tick::Set(t) => clock.set(t),
            Tick::Advance(by) => clock.advance(ms(by)),
        }
    }
}

/// A user key: any string, the edge cases of storage keys, 100 KB ones.
fn key() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        4 => any::<String>(),
        1 => Just(String::new()),
        2 => "[{}%#: a]{0,8}",
        2 => "\\PC{0,16}",
        1 => "[a-z]{126,130}",
        1 => "#[0-9a-f]{32}",
        1 => Just("k".repeat(100_000)),
        1 => Just("{é}".repeat(25_000)),
    ]
}

/// Header bytes: what `HeaderValue::from_bytes` takes (visible ASCII,
/// space, tab, obs-text), the separators of proxy headers, and 100 KB.
fn header_bytes() -> impl Strategy<Value = Vec<u8>> + Clone {
    let byte = prop_oneof![
        8 => 0x20u8..=0x7e,
        2 => 0x80u8..=0xff,
        1 => Just(b'\t'),
        3 => prop::sample::select(b"{},;=\"[]:%#.0123456789abcdef".to_vec()),
    ];
    prop_oneof![
        12 => vec(byte, 0..40),
        1 => Just(vec![b'k'; 100_000]),
        1 => Just(b"127.0.0.1, ".repeat(10_000)),
    ]
}

// ------------------------------------------------------------ algorithms

/// What a generated algorithm does that the runs must know.
#[derive(Debug, Clone, Copy)]
struct Traits {
    /// A leaky bucket: admitted requests may wait.
    delays: bool,
}

const PLAIN: Traits = Traits { delays: false };
const DELAYS: Traits = Traits { delays: true };

impl Traits {
    fn and(self, o: Traits) -> Traits {
        Traits {
            delays: self.delays || o.delays,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum One {
    Fw(FixedWindow),
    Sl(SlidingLog),
    Sw(SlidingWindow),
    Tb(TokenBucket),
    Lb(LeakyBucket),
    Gcra(Gcra),
}

type Gen<T> = (T, Traits);

fn fixed_window() -> impl Strategy<Value = Gen<FixedWindow>> + Clone {
    (count(), window_ms()).prop_map(|(l, w)| (FixedWindow::new(l, ms(w)), PLAIN))
}

fn sliding_window() -> impl Strategy<Value = Gen<SlidingWindow>> + Clone {
    (count(), window_ms()).prop_map(|(l, w)| (SlidingWindow::new(l, ms(w)), PLAIN))
}

/// A sliding log, its window cut to the longest its limit allows
/// (`limit` × `window` below 2^50).
fn sliding_log() -> impl Strategy<Value = Gen<SlidingLog>> + Clone {
    (count_to(MAX_LOG), window_ms()).prop_map(|(l, w)| {
        let w = w.min(((1 << 50) - 1) / l);
        (SlidingLog::try_new(l, ms(w)).unwrap(), PLAIN)
    })
}

fn token_bucket() -> impl Strategy<Value = Gen<TokenBucket>> + Clone {
    (count(), rate()).prop_filter_map("refills within 2^40 ms", |(c, r)| {
        Some((TokenBucket::try_new(c, r).ok()?, PLAIN))
    })
}

fn leaky_bucket() -> impl Strategy<Value = Gen<LeakyBucket>> + Clone {
    (count(), rate()).prop_filter_map("drains within 2^40 ms", |(c, r)| {
        Some((LeakyBucket::try_new(c, r).ok()?, DELAYS))
    })
}

fn gcra() -> impl Strategy<Value = Gen<Gcra>> + Clone {
    let gcra = (count(), window_ms(), prop::option::of(count()));
    gcra.prop_filter_map("a schedule within 2^40 ms", |(l, p, b)| {
        let g = Gcra::new(l, ms(p)).try_burst(b.unwrap_or(l)).ok()?;
        Some((g, PLAIN))
    })
}

fn one() -> BoxedStrategy<Gen<One>> {
    prop_oneof![
        fixed_window().prop_map(|(a, t)| (One::Fw(a), t)),
        sliding_log().prop_map(|(a, t)| (One::Sl(a), t)),
        sliding_window().prop_map(|(a, t)| (One::Sw(a), t)),
        token_bucket().prop_map(|(a, t)| (One::Tb(a), t)),
        leaky_bucket().prop_map(|(a, t)| (One::Lb(a), t)),
        gcra().prop_map(|(a, t)| (One::Gcra(a), t)),
    ]
    .boxed()
}

fn with<A: Single>(limits: Option<Limits>, name: &str, a: A) -> Limits {
    match limits {
        None => Limits::new(name, a),
        Some(l) => l.try_with(name, a).unwrap(),
    }
}

impl One {
    fn add_to(self, limits: Option<Limits>, name: &str) -> Limits {
        match self {
            One::Fw(a) => with(limits, name, a),
            One::Sl(a) => with(limits, name, a),
            One::Sw(a) => with(limits, name, a),
            One::Tb(a) => with(limits, name, a),
            One::Lb(a) => with(limits, name, a),
            One::Gcra(a) => with(limits, name, a),
        }
    }
}

/// 1 to 4 limits with distinct names, often from a small set so that a
/// limiter's own limits and a request's share state.
fn limits() -> impl Strategy<Value = Gen<Limits>> + Clone {
    let name = prop_oneof!["[ab]", "[A-Za-z0-9_-]{1,32}"];
    (btree_set(name, 1..=4), vec(one(), 4)).prop_map(|(names, ones)| {
        let mut limits = None;
        let mut traits = PLAIN;
        for (name, (one, t)) in names.iter().zip(ones) {
            limits = Some(one.add_to(limits, name));
            traits = traits.and(t);
        }
        (limits.unwrap(), traits)
    })
}

/// A limiter's algorithm and a per-request one of the same type.
#[derive(Debug, Clone)]
enum Algs {
    Fw(FixedWindow, FixedWindow),
    Sl(SlidingLog, SlidingLog),
    Sw(SlidingWindow, SlidingWindow),
    Tb(TokenBucket, TokenBucket),
    Lb(LeakyBucket, LeakyBucket),
    Gcra(Gcra, Gcra),
    Limits(Limits, Limits),
}

fn pair<T, S>(s: S, f: fn(T, T) -> Algs) -> impl Strategy<Value = Gen<Algs>> + Clone
where
    T: std::fmt::Debug + Clone,
    S: Strategy<Value = Gen<T>> + Clone,
{
    (s.clone(), s).prop_map(move |((a, ta), (b, tb))| (f(a, b), ta.and(tb)))
}

fn algs() -> BoxedStrategy<Gen<Algs>> {
    prop_oneof![
        1 => pair(fixed_window(), Algs::Fw),
        1 => pair(sliding_log(), Algs::Sl),
        1 => pair(sliding_window(), Algs::Sw),
        1 => pair(token_bucket(), Algs::Tb),
        1 => pair(leaky_bucket(), Algs::Lb),
        1 => pair(gcra(), Algs::Gcra),
        2 => pair(limits(), Algs::Limits),
    ]
    .boxed()
}

/// `$body` with `$own` and `$other` bound to the two algorithms, whatever
/// their type.
macro_rules! on_algs {
    ($algs:expr, |$own:ident, $other:ident| $body:expr) => {
        match $algs {
            Algs::Fw($own, $other) => $body,
            Algs::Sl($own, $other) => $body,
            Algs::Sw($own, $other) => $body,
            Algs::Tb($own, $other) => $body,
            Algs::Lb($own, $other) => $body,
            Algs::Gcra($own, $other) => $body,
            Algs::Limits($own, $other) => $body,
        }
    };
}

// ------------------------------------------------------------ invariants

/// The reason agrees with the rest; `remaining <= limit`; nothing degraded
/// (the store never fails here).
fn sane(d: &Decision) -> Outcome {
    prop_assert!(!d.is_degraded(), "{d:?}");
    match d.reason() {
        Reason::WithinLimit => prop_assert!(d.allowed() && d.retry_after().is_none(), "{d:?}"),
        Reason::OverLimit => prop_assert!(!d.allowed() && d.retry_after().is_some(), "{d:?}"),
        Reason::CostTooHigh => prop_assert!(!d.allowed() && d.retry_after().is_none(), "{d:?}"),
        _ => prop_assert!(false, "the store never fails here: {d:?}"),
    }
    prop_assert!(d.remaining() <= d.limit(), "{d:?}");
    Ok(())
}

/// A charge of `cost`: a cost of 0 is admitted, a cost above a limit never.
fn charged(d: &Decision, cost: u64) -> Outcome {
    sane(d)?;
    if cost == 0 {
        prop_assert!(d.allowed(), "cost 0: {d:?}");
    }
    if cost > d.limit() {
        prop_assert_eq!(d.reason(), Reason::CostTooHigh, "cost {}: {:?}", cost, d);
    }
    Ok(())
}

/// Each limit's decision and what they add up to.
fn charged_all(ds: &Decisions, cost: u64) -> Outcome {
    charged(ds.overall(), cost)?;
    prop_assert!((1..=MAX_LIMITS).contains(&ds.each().len()), "{ds:?}");
    for each in ds.each() {
        charged(each.decision(), cost)?;
    }
    let all = ds.each().iter().all(|e| e.decision().allowed());
    prop_assert_eq!(ds.overall().allowed(), all, "{:?}", ds);
    let lowest = ds
        .each()
        .iter()
        .map(|e| e.decision().limit())
        .min()
        .unwrap();
    if cost > lowest {
        prop_assert_eq!(ds.overall().reason(), Reason::CostTooHigh, "{:?}", ds);
    }
    Ok(())
}

fn refunded(d: &Decision) -> Outcome {
    sane(d)?;
    prop_assert!(d.allowed(), "a refund is admitted: {d:?}");
    Ok(())
}

/// `Ok`, or the case fails naming the call: a store error is a failure.
fn ok<T>(what: &impl std::fmt::Debug, r: Result<T, floodgate::Error>) -> Result<T, TestCaseError> {
    r.map_err(|e| TestCaseError::fail(format!("{what:?}: {e}")))
}

// ---------------------------------------------------- limiter property

#[derive(Debug, Clone)]
enum Op {
    Time(Tick),
    Check(usize, u64),
    CheckAll(usize, u64),
    CheckWith(usize, u64),
    Peek(usize),
    Refund(usize, u64),
    RefundWith(usize, u64),
    Acquire(usize),
    PeekLeases(usize),
    InFlight(usize),
    Release(usize),
    DropLease(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let k = || 0..3usize;
    prop_oneof![
        3 => tick().prop_map(Op::Time),
        3 => (k(), cost()).prop_map(|(k, c)| Op::Check(k, c)),
        2 => (k(), cost()).prop_map(|(k, c)| Op::CheckAll(k, c)),
        2 => (k(), cost()).prop_map(|(k, c)| Op::CheckWith(k, c)),
        1 => k().prop_map(Op::Peek),
        2 => (k(), cost()).prop_map(|(k, c)| Op::Refund(k, c)),
        1 => (k(), cost()).prop_map(|(k, c)| Op::RefundWith(k, c)),
        2 => k().prop_map(Op::Acquire),
        1 => k().prop_map(Op::PeekLeases),
        1 => k().prop_map(Op::InFlight),
        1 => any::<usize>().prop_map(Op::Release),
        1 => any::<usize>().prop_map(Op::DropLease),
    ]
}

#[derive(Debug, Clone)]
struct LimiterCase {
    algs: Algs,
    deny_cache: bool,
    max: u64,
    lease_ms: u64,
    start: u64,
    keys: Vec<String>,
    ops: Vec<Op>,
}

fn in_flight_max() -> impl Strategy<Value = u64> + Clone {
    prop_oneof![3 => 1..=4u64, 1 => 1..=1u64 << 20]
}

fn limiter_case() -> impl Strategy<Value = LimiterCase> {
    (
        algs(),
        any::<bool>(),
        in_flight_max(),
        window_ms(),
        time(),
        vec(key(), 1..=3),
        vec(op(), 1..=40),
    )
        .prop_map(
            |((algs, _), deny_cache, max, lease_ms, start, keys, ops)| LimiterCase {
                algs,
                deny_cache,
                max,
                lease_ms,
                start,
                keys,
                ops,
            },
        )
}

/// What every limiter of a case is built with.
struct Env {
    store: Store,
    prefix: String,
    clock: ManualClock,
}

impl Env {
    /// A rate limiter named `name`, failing with an error.
    fn limiter<A: Algorithm>(&self, name: &str, algorithm: A, deny_cache: bool) -> Limiter<A> {
        let mut builder = Limiter::builder(self.store.clone(), algorithm)
            .prefix(self.prefix.clone())
            .name(name)
            .clock(self.clock.clone())
            .timeout(REDIS_TIMEOUT)
            .on_store_failure(FailurePolicy::ReturnError);
        if deny_cache {
            builder = builder.deny_cache(NonZeroUsize::new(4).unwrap());
        }
        builder.build().unwrap()
    }

    /// A concurrency limiter, failing with an error.
    fn leases(&self, max: u64, lease_ms: u64) -> ConcurrencyLimiter {
        ConcurrencyLimiter::builder(self.store.clone(), max)
            .prefix(self.prefix.clone())
            .clock(self.clock.clone())
            .lease(ms(lease_ms))
            .timeout(REDIS_TIMEOUT)
            .on_store_failure(FailurePolicy::ReturnError)
            .build()
            .unwrap()
    }
}

async fn limiter_ops<A: Algorithm>(env: &Env, c: &LimiterCase, own: A, other: A) -> Outcome {
    let limiter = env.limiter("np", own, c.deny_cache);
    let leases = env.leases(c.max, c.lease_ms);
    let key = |k: usize| c.keys[k % c.keys.len()].as_str();
    let mut held: Vec<Lease> = Vec::new();
    for op in &c.ops {
        match *op {
            Op::Time(t) => t.apply(&env.clock),
            Op::Check(k, cost) => {
                charged(&ok(op, limiter.check(key(k), cost).await)?, cost)?;
            }
            Op::CheckAll(k, cost) => {
                charged_all(&ok(op, limiter.check_all(key(k), cost).await)?, cost)?;
            }
            Op::CheckWith(k, cost) => {
                let ds = ok(op, limiter.check_with(key(k), cost, &other).await)?;
                charged_all(&ds, cost)?;
            }
            Op::Peek(k) => sane(&ok(op, limiter.peek(key(k)).await)?)?,
            Op::Refund(k, cost) => refunded(&ok(op, limiter.refund(key(k), cost).await)?)?,
            Op::RefundWith(k, cost) => {
                let d = ok(op, limiter.refund_with(key(k), cost, &other).await)?;
                refunded(&d)?;
            }
            Op::Acquire(k) => match ok(op, leases.acquire(key(k)).await)? {
                Ok(lease) => {
                    sane(lease.decision())?;
                    prop_assert!(lease.decision().allowed());
                    held.push(lease);
                }
                Err(d) => {
                    sane(&d)?;
                    prop_assert_eq!(d.reason(), Reason::OverLimit, "{:?}", d);
                }
            },
            Op::PeekLeases(k) => sane(&ok(op, leases.peek(key(k)).await)?)?,
            Op::InFlight(k) => {
                let n = ok(op, leases.in_flight(key(k)).await)?;
                prop_assert!(n <= c.max, "{n} in flight, max {}", c.max);
            }
            Op::Release(i) if !held.is_empty() => {
                held.swap_remove(i % held.len()).release().await;
            }
            Op::DropLease(i) if !held.is_empty() => drop(held.swap_remove(i % held.len())),
            Op::Release(_) | Op::DropLease(_) => {}
        }
    }
    Ok(())
}

async fn limiter_case_on(store: Store, prefix: String, c: LimiterCase) -> Outcome {
    let env = Env {
        store,
        prefix,
        clock: ManualClock::new(c.start),
    };
    on_algs!(c.algs.clone(), |own, other| limiter_ops(
        &env, &c, own, other
    )
    .await)
}

// ------------------------------------------------------ layer property

/// The rate-limit layer's key: one type for every extractor tried.
#[derive(Debug, Clone)]
enum AnyKey {
    Header(Header),
    Client(ClientIp),
    Peer(PeerIp),
    Global(Global),
    Both((Header, PeerIp)),
}

impl KeyExtractor for AnyKey {
    fn extract<'r, B>(
        &self,
        req: &'r Request<B>,
    ) -> Result<std::borrow::Cow<'r, str>, KeyRejection> {
        match self {
            AnyKey::Header(k) => k.extract(req),
            AnyKey::Client(k) => k.extract(req),
            AnyKey::Peer(k) => k.extract(req),
            AnyKey::Global(k) => k.extract(req),
            AnyKey::Both(k) => k.extract(req),
        }
    }
}

fn any_key() -> impl Strategy<Value = AnyKey> {
    let header = (1..=512usize).prop_map(|n| Header::try_new("x-key").unwrap().max_len(n).unwrap());
    let proxy = prop::sample::select(vec![
        ProxyHeader::XForwardedFor,
        ProxyHeader::Forwarded,
        ProxyHeader::XRealIp,
    ]);
    let client = (proxy, 0..=64usize, 1..=32u8, 1..=128u8).prop_map(|(h, hops, v4, v6)| {
        ClientIp::new()
            .trust_loopback()
            .trust_private()
            .proxy_headers([h, ProxyHeader::XForwardedFor])
            .trusted_hops(hops)
            .and_then(|c| c.ipv4_prefix(v4))
            .and_then(|c| c.ipv6_prefix(v6))
            .unwrap()
    });
    let peer = (1..=32u8, 1..=128u8).prop_map(|(v4, v6)| {
        PeerIp::new()
            .ipv4_prefix(v4)
            .and_then(|p| p.ipv6_prefix(v6))
            .unwrap()
    });
    prop_oneof![
        header.clone().prop_map(AnyKey::Header),
        client.prop_map(AnyKey::Client),
        peer.clone().prop_map(AnyKey::Peer),
        Just(AnyKey::Global(Global::new())),
        (header, peer).prop_map(AnyKey::Both),
    ]
}

/// Marks a request for the per-request limits of `limits_for`.
#[derive(Clone)]
struct Plan;

#[derive(Debug, Clone)]
struct Req {
    time: Tick,
    /// `/ok` (200), `/unauthorized` (401) or `/fail` (500).
    path: &'static str,
    key: Option<Vec<u8>>,
    proxy: Option<Vec<u8>>,
    cost_header: Option<Vec<u8>>,
    cost: Option<u64>,
    plan: bool,
    grpc: bool,
    peer: Option<SocketAddr>,
    read_body: bool,
}

fn req() -> BoxedStrategy<Req> {
    let peer = prop_oneof![
        2 => Just(SocketAddr::from(([127, 0, 0, 1], 40_000))),
        2 => any::<SocketAddr>(),
        1 => Just(SocketAddr::from(([0, 0, 0, 0, 0, 0xffff, 0x0a00, 1], 1))),
    ];
    let cost_header = prop_oneof![
        cost().prop_map(|c| c.to_string().into_bytes()),
        header_bytes()
    ];
    // Keys from a small set often, so that requests share a bucket.
    let key = prop_oneof![
        3 => "[a-c]{1,2}".prop_map(String::into_bytes),
        2 => header_bytes(),
    ];
    (
        tick(),
        prop::sample::select(vec!["/ok", "/unauthorized", "/fail"]),
        prop::option::weighted(0.8, key),
        prop::option::of(header_bytes()),
        prop::option::of(cost_header),
        prop::option::weighted(0.3, cost()),
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::option::weighted(0.9, peer),
        any::<bool>(),
    )
        .prop_map(
            |(time, path, key, proxy, cost_header, cost, plan, grpc, peer, read_body)| Req {
                time,
                path,
                key,
                proxy,
                cost_header,
                cost,
                plan,
                grpc,
                peer,
                read_body,
            },
        )
        .boxed()
}

#[derive(Debug, Clone)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "each is one switch of the layers"
)]
struct LayerCase {
    algs: Algs,
    key: AnyKey,
    /// `cost(n)`, or `None` for a `cost_fn` reading `x-cost`.
    fixed_cost: Option<u64>,
    /// 0: always charged, 1: `refund_when` 5xx, 2: `count_only_when` 401.
    counting: u8,
    refund_inner: bool,
    style: HeaderStyle,
    shadow: bool,
    custom_rejection: bool,
    deny_cache: bool,
    max: u64,
    lease_ms: u64,
    retry_after_ms: u64,
    concurrency_shadow: bool,
    concurrency_by_header: bool,
    requests: Vec<Req>,
}

fn style() -> impl Strategy<Value = HeaderStyle> {
    prop::sample::select(vec![
        HeaderStyle::Ietf,
        HeaderStyle::Legacy {
            reset: ResetUnit::DeltaSeconds,
        },
        HeaderStyle::Legacy {
            reset: ResetUnit::EpochSeconds,
        },
        HeaderStyle::Both,
        HeaderStyle::None,
    ])
}

fn layer_case(redis: bool) -> impl Strategy<Value = LayerCase> {
    // A leaky bucket's delay is slept: on Redis, where time is not paused,
    // it could be years.
    let algs = algs().prop_filter("no delay", move |(_, t)| !redis || !t.delays);
    let layer = (
        algs,
        any_key(),
        prop::option::of(prop_oneof![2 => Just(1), 1 => cost()]),
        0..3u8,
        any::<bool>(),
        style(),
        prop::bool::weighted(0.2),
        any::<bool>(),
        any::<bool>(),
    );
    let concurrency = (
        in_flight_max(),
        window_ms(),
        prop_oneof![Just(0), any::<u64>(), 1..=10_000u64],
        prop::bool::weighted(0.2),
        any::<bool>(),
    );
    (layer, concurrency, vec(req(), 1..=6)).prop_map(
        |(
            ((algs, _), key, fixed_cost, counting, refund_inner, style, shadow, custom, deny),
            (max, lease_ms, retry_after_ms, concurrency_shadow, concurrency_by_header),
            requests,
        )| LayerCase {
            algs,
            key,
            fixed_cost,
            counting,
            refund_inner,
            style,
            shadow,
            custom_rejection: custom,
            deny_cache: deny,
            max,
            lease_ms,
            retry_after_ms,
            concurrency_shadow,
            concurrency_by_header,
            requests,
        },
    )
}

fn header(bytes: &[u8]) -> HeaderValue {
    HeaderValue::from_bytes(bytes).expect("the generator makes valid header values")
}

fn request(r: &Req) -> Request<Body> {
    let mut req = Request::get(r.path).body(Body::empty()).unwrap();
    let headers = req.headers_mut();
    if let Some(k) = &r.key {
        headers.insert("x-key", header(k));
    }
    if let Some(p) = &r.proxy {
        for name in ["x-forwarded-for", "forwarded", "x-real-ip"] {
            headers.insert(name, header(p));
        }
    }
    if let Some(c) = &r.cost_header {
        headers.insert("x-cost", header(c));
    }
    if r.grpc {
        headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    }
    let ext = req.extensions_mut();
    if let Some(c) = r.cost {
        ext.insert(Cost(c));
    }
    if r.plan {
        ext.insert(Plan);
    }
    if let Some(peer) = r.peer {
        ext.insert(ConnectInfo(peer));
    }
    req
}

/// The statuses the app can answer with: its own (200, 401, 500) and the
/// layers' (400, 429; gRPC rejections are 200). Never 503: the store never
/// fails here.
const STATUSES: [u16; 5] = [200, 400, 401, 429, 500];

async fn layer_requests<A: Algorithm>(env: &Env, c: &LayerCase, own: A, other: A) -> Outcome {
    let limiter = env.limiter("np", own, c.deny_cache);
    let mut rate = RateLimitLayer::new(limiter, c.key.clone())
        .limits_for(move |req| req.extensions().get::<Plan>().map(|_| other.clone()))
        .refund_inner_denials(c.refund_inner)
        .headers(c.style)
        .shadow(c.shadow);
    rate = match c.fixed_cost {
        Some(n) => rate.cost(n),
        None => rate.cost_fn(|req| {
            let value = req.headers().get("x-cost").and_then(|v| v.to_str().ok());
            value.and_then(|v| v.parse().ok()).unwrap_or(1)
        }),
    };
    if c.custom_rejection {
        rate = rate.on_rejection(|r| {
            let mut res = r.default_response();
            res.headers_mut()
                .insert("x-rejected", HeaderValue::from_static("1"));
            res
        });
    }
    // Stacked inside it: a second limit, whose denials the first refunds.
    let inner = env.limiter("inner", FixedWindow::new(2, ms(1_000)), false);
    let leases = env.leases(c.max, c.lease_ms);
    let concurrency_key = if c.concurrency_by_header {
        AnyKey::Header(Header::try_new("x-key").unwrap())
    } else {
        AnyKey::Global(Global::new())
    };
    let concurrency = ConcurrencyLimitLayer::new(leases, concurrency_key)
        .retry_after(ms(c.retry_after_ms))
        .shadow(c.concurrency_shadow);
    let app = Router::new()
        .route("/ok", get(|| async { "ok" }))
        .route("/unauthorized", get(|| async { StatusCode::UNAUTHORIZED }))
        .route("/fail", get(|| async { StatusCode::INTERNAL_SERVER_ERROR }))
        .layer(RateLimitLayer::new(inner, Global::new()));
    // Each way of charging is a type of its own.
    let app = match c.counting {
        0 => app.layer(rate),
        1 => app.layer(rate.refund_when(ServerErrors)),
        _ => app.layer(rate.count_only_when(Status(StatusCode::UNAUTHORIZED))),
    }
    .layer(concurrency);
    for r in &c.requests {
        r.time.apply(&env.clock);
        let res = app.clone().oneshot(request(r)).await.unwrap();
        let status = res.status().as_u16();
        prop_assert!(STATUSES.contains(&status), "{status} for {r:?}");
        if r.read_body {
            axum::body::to_bytes(res.into_body(), usize::MAX)
                .await
                .unwrap();
        }
    }
    Ok(())
}

async fn layer_case_on(store: Store, prefix: String, c: LayerCase) -> Outcome {
    let env = Env {
        store,
        prefix,
        clock: ManualClock::new(0),
    };
    on_algs!(c.algs.clone(), |own, other| layer_requests(
        &env, &c, own, other
    )
    .await)
}

// ---------------------------------------------------------------- runs

type CaseFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Outcome>>>;

/// Run `property` over `cases` cases of `strategy` on `rt`.
fn run<S: Strategy>(
    cases: u32,
    rt: &tokio::runtime::Runtime,
    strategy: S,
    property: impl Fn(S::Value) -> CaseFuture,
) {
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |case| rt.block_on(property(case)))
        .unwrap();
}

/// Time stands still unless a task waits for it: a leaky bucket's delay
/// passes at once.
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn redis_cases() -> u32 {
    (cases() / 8).max(1)
}

/// A namespace of its own for each case on the shared Redis.
fn fresh_prefix() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("np{}", N.fetch_add(1, Ordering::Relaxed))
}

/// `case_on` for `cases()` cases of `strategy`, each on a memory store of
/// its own.
fn on_memory<S: Strategy, F>(strategy: S, case_on: impl Fn(Store, String, S::Value) -> F)
where
    F: std::future::Future<Output = Outcome> + 'static,
{
    run(cases(), &paused_runtime(), strategy, |c| {
        Box::pin(case_on(MemoryStore::new().into(), "np".into(), c))
    });
}

/// `case_on` for `redis_cases()` cases of `strategy`, on a Redis of its
/// own, each case under a prefix of its own.
fn on_redis<S: Strategy, F>(strategy: S, case_on: impl Fn(Store, String, S::Value) -> F)
where
    F: std::future::Future<Output = Outcome> + 'static,
{
    let server = common::RedisServer::start();
    let store: Store = RedisStore::from_url(&server.url()).unwrap().into();
    run(redis_cases(), &runtime(), strategy, |c| {
        Box::pin(case_on(store.clone(), fresh_prefix(), c))
    });
}

#[test]
fn limiters_on_memory() {
    on_memory(limiter_case(), limiter_case_on);
}

#[test]
fn layers_on_memory() {
    on_memory(layer_case(false), layer_case_on);
}

#[test]
fn limiters_on_redis() {
    on_redis(limiter_case(), limiter_case_on);
}

#[test]
fn layers_on_redis() {
    on_redis(layer_case(true), layer_case_on);
}

/// What this file found, now fixed, as tests of their own: the properties
/// above draw these configurations only now and then.
mod regressions {
    use super::*;
    use floodgate::ConfigError;

    /// `algorithm` as a limiter on a memory store and on a real Redis (as
    /// long as the server returned lives), at `now`, failing with an error.
    fn on_both<A: Algorithm>(
        algorithm: &A,
        now: u64,
    ) -> (common::RedisServer, [(&'static str, Limiter<A>); 2]) {
        let server = common::RedisServer::start();
        let limiter = |store: Store| {
            let env = Env {
                store,
                prefix: "regress".into(),
                clock: ManualClock::new(now),
            };
            env.limiter("regress", algorithm.clone(), false)
        };
        let redis = RedisStore::from_url(&server.url()).unwrap();
        let limiters = [
            ("memory", limiter(MemoryStore::new().into())),
            ("redis", limiter(redis.into())),
        ];
        (server, limiters)
    }

    /// A fresh key of `algorithm` admits `capacity` checks of 1 and no
    /// more, its time standing still, `remaining` never above `limit`.
    async fn admits_capacity<A: Algorithm>(algorithm: A, capacity: u32) {
        let (_server, limiters) = on_both(&algorithm, 1_000_000);
        for (store, limiter) in limiters {
            let fresh = limiter.check("k", 0).await.unwrap();
            assert!(fresh.remaining() <= fresh.limit(), "{store}: {fresh:?}");
            let mut admitted = 0;
            for _ in 0..capacity + 10 {
                let d = limiter.check("k", 1).await.unwrap();
                assert!(d.remaining() <= d.limit(), "{store}: {d:?}");
                admitted += u32::from(d.allowed());
            }
            assert_eq!(admitted, capacity, "{store}: {algorithm:?}");
        }
    }

    /// A unit of a bucket of 10^12 per second takes 10^-9 ms, less than the
    /// schedule's float tolerance was (10^-6 ms, `EPS` in
    /// `src/algorithm/gcra.rs` and `lua/gcra.lua`), so 1000 more tokens fit
    /// than the bucket holds; the tolerance is now a millionth of a unit.
    #[tokio::test]
    async fn a_fast_bucket_admits_no_more_than_its_capacity() {
        admits_capacity(TokenBucket::new(1, 1e12), 1).await;
        admits_capacity(TokenBucket::new(3, MAX_RATE), 3).await;
        admits_capacity(LeakyBucket::new(2, 1e12), 2).await;
        admits_capacity(Gcra::new(1 << 30, ms(1)).try_burst(5).unwrap(), 5).await;
    }

    /// The same tolerance admitted a cost above the burst where one unit
    /// takes less than it: `Gcra::new(2^40, 1 ms)` admitted 2^40 + 1.
    #[tokio::test]
    async fn a_cost_above_a_fast_gcra_s_burst_is_cost_too_high() {
        let (_server, limiters) = on_both(&Gcra::new(MAX, ms(1)), 1_000_000);
        for (store, limiter) in limiters {
            let d = limiter.check("k", MAX + 1).await.unwrap();
            assert_eq!(d.reason(), Reason::CostTooHigh, "{store}: {d:?}");
            assert_eq!(d.retry_after(), None, "{store}: {d:?}");
            // The whole burst at once still fits, and then nothing.
            let d = limiter.check("k", MAX).await.unwrap();
            assert!(d.allowed(), "{store}: {d:?}");
            let d = limiter.check("k", 1).await.unwrap();
            assert_eq!(d.reason(), Reason::OverLimit, "{store}: {d:?}");
        }
    }

    /// A burst × time per unit beyond about 2^63 ms, each within its own
    /// bound, made the script write `SET … PX` with a time Redis refuses
    /// ("invalid expire time in 'set' command"). Such schedules are now
    /// refused when they exceed 2^40 ms, naming the field.
    #[test]
    fn a_schedule_longer_than_2_40_ms_is_refused_naming_the_field() {
        let field = |e: ConfigError| e.field();
        let slow = Gcra::new(1, ms(MAX));
        assert_eq!(slow.try_burst(2).map_err(field), Err("burst"));
        assert_eq!(slow.try_burst(MAX).map_err(field), Err("burst"));
        let g = Gcra::new(1 << 10, ms(1 << 30));
        assert_eq!(g.try_burst((1 << 20) + 1).map_err(field), Err("burst"));
        for (capacity, rate) in [(MAX, MIN_RATE), (2, MIN_RATE), (MAX, 999.0)] {
            let e = TokenBucket::try_new(capacity, rate).map_err(field);
            assert_eq!(e, Err("capacity"), "{capacity} at {rate}/s");
            let e = LeakyBucket::try_new(capacity, rate).map_err(field);
            assert_eq!(e, Err("capacity"), "{capacity} at {rate}/s");
        }
    }

    /// The longest schedules accepted, 2^40 ms, filled at the top of the
    /// clock (2^48 ms), on Redis as on the memory store: decided without
    /// error, the whole burst admitted at once, and then nothing.
    #[tokio::test]
    async fn the_longest_schedules_accepted_are_decided_on_redis() {
        async fn fill<A: Algorithm>(algorithm: A, burst: u64) {
            let (server, limiters) = on_both(&algorithm, 1 << 48);
            for (store, limiter) in limiters {
                let d = limiter.check("k", burst).await;
                assert!(
                    d.as_ref().is_ok_and(floodgate::Decision::allowed),
                    "{store}: {d:?}"
                );
                let d = limiter.check("k", 1).await.unwrap();
                assert_eq!(d.reason(), Reason::OverLimit, "{store}: {d:?}");
                let peek = limiter.peek("k").await.unwrap();
                assert_eq!(peek.remaining(), 0, "{store}: {peek:?}");
            }
            // Redis keeps the state as long as the schedule, and then some.
            let keys: Vec<String> = server.cmd(&["KEYS", "regress:*"]);
            assert_eq!(keys.len(), 1, "{keys:?}");
            let ttl: i64 = server.cmd(&["PTTL", &keys[0]]);
            let ttl = u64::try_from(ttl).unwrap();
            assert!(
                (MAX - 1_000..=MAX + 10_000).contains(&ttl),
                "{algorithm:?}: {ttl} ms"
            );
        }
        fill(Gcra::new(1, ms(MAX)), 1).await;
        fill(Gcra::new(MAX, ms(MAX)), MAX).await;
        // A burst above the limit: 2^20 units of 2^20 ms.
        fill(
            Gcra::new(1 << 10, ms(1 << 30)).try_burst(1 << 20).unwrap(),
            1 << 20,
        )
        .await;
        fill(TokenBucket::new(1, MIN_RATE), 1).await;
        fill(TokenBucket::new(MAX, 1000.0), MAX).await;
        fill(LeakyBucket::new(MAX, 1000.0), MAX).await;
    }
}
