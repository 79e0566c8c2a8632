// `criterion_group!` makes a public function without docs.
#![allow(missing_docs)]
//! In-memory decisions per key: floodgate's six algorithms on `MemoryStore`
//! against governor's keyed GCRA limiter, in the same run.
//!
//! ```text
//! cargo bench --bench memory                    # criterion, then the ratio table
//! cargo bench --bench memory -- --test          # smoke: every bench once, tiny table
//! FLOODGATE_BENCH_PROFILE=gcra cargo bench --bench memory --no-run   # see below
//! FLOODGATE_BENCH_TABLE=gcra,token_bucket cargo bench --bench memory  # the ratio table alone
//! FLOODGATE_BENCH_TABLE=router cargo bench --bench memory             # the axum table alone
//! ```
//!
//! Like for like: both sides take `String` keys from the same pre-built pool
//! of 10 000 clients, visited in the same order, with a quota high enough
//! that (almost) every decision admits, so both do the full read-decide-write
//! path. governor is `DefaultKeyedRateLimiter<String>` (dashmap, std hasher,
//! quanta clock), as its users get it from `RateLimiter::keyed`.
//!
//! Measured as a user measures it from a crate of their own (issue 16):
//! each decision is `limiter.check(&keys[i % 10_000], 1)`, a fresh future
//! pinned and polled once with `Waker::noop()`, against governor's
//! `check_key(&keys[i % 10_000])`; 400 000 decisions per thread a round, 9
//! interleaved rounds, medians. On two threads both hammer the same limiter
//! and the same pool (as governor's shared limiter is used), each from its
//! own place in it.
//!
//! After criterion's groups, a ratio table is printed: each contender is
//! timed in interleaved rounds (floodgate and governor alternate, so drift on
//! this noisy machine hits both alike) and the medians are compared. That
//! table is what BENCHMARKS.md quotes; criterion's own numbers are there for
//! the usual statistics and history.
//!
//! A third group, `layer`, serves an axum hello `Router` in process (no
//! socket, no HTTP parsing) with and without `RateLimitLayer` (GCRA on the
//! memory store, key = `x-client` header): the layer's own cost per request,
//! which the HTTP tool (`benches/http_load.rs`) can only see through the
//! noise of a network stack and a client sharing the cores.
//!
//! For callgrind and perf: with `FLOODGATE_BENCH_PROFILE=<contender>` (an
//! algorithm, `governor`, `router_plain`, `router_layer`,
//! `router_noheaders`, `router_identity`, `router_governor` or
//! `router_governor_headers`) the binary makes
//! 200 000 decisions (requests; `FLOODGATE_BENCH_N` for another count) of
//! that contender on one thread (`FLOODGATE_BENCH_THREADS=2`: shared by two), prints the time each took and exits, e.g.
//! `FLOODGATE_BENCH_PROFILE=gcra valgrind --tool=callgrind target/release/deps/memory-<hash>`.
//! Run twice binaries of two trees in turn, it is the quickest before and
//! after.

mod support;

use axum::body::Body;
use axum::{routing::get, Router};
use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use floodgate::algorithm::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket, MAX_LOG,
};
use floodgate::key::Header;
use floodgate::store::MemoryStore;
use floodgate::Limiter;
use floodgate::RateLimitLayer;
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use http_body::Body as _;
use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::sync::Barrier;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use support::median;
use tower::Service;

/// Distinct clients in the pool.
const KEYS: usize = 10_000;
/// Per key and per second: far above what one key sees here (a few hundred
/// decisions per second each), so decisions admit.
const LIMIT: u32 = 1_000_000;

/// Runs a future that is ready on its first poll, as every `MemoryStore`
/// decision is (nothing in it waits: the shard lock is a plain mutex).
///
/// Polling once with a no-op waker measures the library, not an executor:
/// `block_on` or a tokio runtime would add its own bookkeeping (thread-local
/// context, park/unpark checks) to every call, and governor, whose API is
/// synchronous, pays nothing of the kind.
fn poll_once<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a MemoryStore decision never waits"),
    }
}

/// One contender: a keyed limiter deciding cost 1 for a key. `&String`
/// because governor's keyed `check_key` takes `&K`, here `&String`.
#[allow(clippy::ptr_arg)]
trait Decider: Sync {
    fn decide(&self, key: &String) -> bool;
}

struct Floodgate<A>(Limiter<A>);

impl<A: Algorithm> Decider for Floodgate<A> {
    #[inline]
    fn decide(&self, key: &String) -> bool {
        poll_once(self.0.check(key, 1))
            .expect("the memory store never fails")
            .allowed()
    }
}

struct Governor(DefaultKeyedRateLimiter<String>);

impl Decider for Governor {
    #[inline]
    fn decide(&self, key: &String) -> bool {
        self.0.check_key(key).is_ok()
    }
}

/// An axum app served in process: one request per decision, its body read
/// to the end. Each thread serves through a clone of its own (as each
/// connection of a server does), so its mutex is never contended and costs
/// the same with and without the layer; the clones share the layer's
/// state, as a server's connections do.
struct App([std::sync::Mutex<Router>; 2]);

impl App {
    fn new(router: Router) -> App {
        App([
            std::sync::Mutex::new(router.clone()),
            std::sync::Mutex::new(router),
        ])
    }

    /// The clone of the calling thread: threads take the two clones in
    /// turn, in the order of their first call, so two threads started
    /// together (the tables run at most two) get one each.
    fn mine(&self) -> &std::sync::Mutex<Router> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local!(static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed));
        &self.0[SLOT.with(|s| *s) % 2]
    }
}

impl Decider for App {
    #[inline]
    fn decide(&self, key: &String) -> bool {
        let req = http::Request::builder()
            .uri("/")
            .header("x-client", key.as_str())
            .body(Body::empty())
            .unwrap();
        let response = poll_once(self.mine().lock().unwrap().call(req)).unwrap();
        let ok = response.status().is_success();
        let mut body = pin!(response.into_body());
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            match body.as_mut().poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(_))) => {}
                Poll::Ready(None) => break,
                other => panic!(
                    "an in-memory body is ready at once: {:?}",
                    other.is_pending()
                ),
            }
        }
        ok
    }
}

fn router(layer: bool) -> App {
    let hello = Router::new().route("/", get(|| async { "hello" }));
    App::new(if layer {
        let limiter = Limiter::new(
            MemoryStore::new(),
            Gcra::new(u64::from(LIMIT), Duration::from_secs(1)),
        );
        hello.layer(RateLimitLayer::new(
            limiter,
            Header::try_new("x-client").unwrap(),
        ))
    } else {
        hello
    })
}

/// `tower_governor`'s key for `router_governor`: the `x-client` header, as
/// floodgate's `Header` takes it (an owned `String`).
#[derive(Clone)]
struct ClientHeader;

impl tower_governor::key_extractor::KeyExtractor for ClientHeader {
    type Key = String;

    fn extract<T>(&self, req: &http::Request<T>) -> Result<String, tower_governor::GovernorError> {
        req.headers()
            .get("x-client")
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .ok_or(tower_governor::GovernorError::UnableToExtractKey)
    }
}

/// The same app behind `tower_governor` 0.8's `GovernorLayer` at the same
/// quota (GCRA, `LIMIT` a second, a burst of `LIMIT`), its defaults
/// otherwise (no headers on admitted responses), as `http_load` sets it up.
fn router_governor() -> App {
    let hello = Router::new().route("/", get(|| async { "hello" }));
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .period(Duration::from_secs(1) / LIMIT)
        .burst_size(LIMIT)
        .key_extractor(ClientHeader)
        .finish()
        .expect("a valid quota");
    App::new(hello.layer(tower_governor::GovernorLayer::new(config)))
}

/// `router_governor` with `tower_governor`'s headers on (`use_headers`:
/// `x-ratelimit-limit` and `x-ratelimit-remaining` on admitted responses).
fn router_governor_headers() -> App {
    let hello = Router::new().route("/", get(|| async { "hello" }));
    let config = tower_governor::governor::GovernorConfigBuilder::default()
        .period(Duration::from_secs(1) / LIMIT)
        .burst_size(LIMIT)
        .key_extractor(ClientHeader)
        .use_headers()
        .finish()
        .expect("a valid quota");
    App::new(hello.layer(tower_governor::GovernorLayer::new(config)))
}

/// The same app behind a layer that does nothing (`MapRequestLayer` with
/// the identity): what axum's wrapping of any route layer costs, which
/// both floodgate's layer and `tower_governor`'s pay.
fn router_identity() -> App {
    let hello = Router::new().route("/", get(|| async { "hello" }));
    App::new(hello.layer(tower::util::MapRequestLayer::new(
        |r: http::Request<Body>| r,
    )))
}

/// The same layer with no rate-limit fields on responses
/// (`HeaderStyle::None`): what the fields cost, by difference.
fn router_noheaders() -> App {
    let hello = Router::new().route("/", get(|| async { "hello" }));
    let limiter = Limiter::new(
        MemoryStore::new(),
        Gcra::new(u64::from(LIMIT), Duration::from_secs(1)),
    );
    App::new(
        hello.layer(
            RateLimitLayer::new(limiter, Header::try_new("x-client").unwrap())
                .headers(floodgate::headers::HeaderStyle::None),
        ),
    )
}

fn floodgate<A: Algorithm>(alg: A) -> Floodgate<A> {
    Floodgate(Limiter::new(MemoryStore::new(), alg))
}

fn governor() -> Governor {
    let n = NonZeroU32::new(LIMIT).unwrap();
    Governor(RateLimiter::keyed(Quota::per_second(n)))
}

fn keys() -> Vec<String> {
    (0..KEYS).map(|i| format!("client-{i}")).collect()
}

/// `n` decisions on one thread, the `j`-th on key `(start + j) % KEYS`,
/// as a user writes it (`&keys[i % 10_000]`); returns how many admitted.
fn run<D: Decider + ?Sized>(d: &D, keys: &[String], start: usize, n: u64) -> u64 {
    assert_eq!(keys.len(), KEYS);
    let mut admitted = 0;
    for j in 0..n as usize {
        admitted += u64::from(d.decide(black_box(&keys[(start + j) % KEYS])));
    }
    admitted
}

/// Wall time of `threads` threads making `per_thread` decisions each, all
/// started together, on disjoint starting points of the same pool (threads
/// meet on the same keys, as requests of one client on two cores would).
/// Returns the time and the share of decisions admitted.
fn timed<D: Decider + ?Sized>(
    d: &D,
    keys: &[String],
    threads: usize,
    per_thread: u64,
) -> (Duration, f64) {
    let total = (threads as u64 * per_thread).max(1) as f64;
    if threads == 1 {
        let t = Instant::now();
        let admitted = black_box(run(d, keys, 0, per_thread));
        return (t.elapsed(), admitted as f64 / total);
    }
    // Each thread times itself: the main thread would compete with the
    // workers for the cores and could start a shared timer late.
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    let admitted = run(d, keys, t * keys.len() / threads, per_thread);
                    (start, Instant::now(), admitted)
                })
            })
            .collect();
        let ends: Vec<(Instant, Instant, u64)> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        let start = ends.iter().map(|e| e.0).min().unwrap();
        let end = ends.iter().map(|e| e.1).max().unwrap();
        let admitted: u64 = ends.iter().map(|e| e.2).sum();
        (end - start, admitted as f64 / total)
    })
}

/// Every contender, floodgate's six then governor.
fn contenders() -> Vec<(&'static str, Box<dyn DynDecider>)> {
    let s = Duration::from_secs(1);
    let l = u64::from(LIMIT);
    vec![
        (
            "fixed_window",
            Box::new(floodgate(FixedWindow::new(l, s))) as Box<dyn DynDecider>,
        ),
        // The log's bound (2^16 entries) is below `LIMIT`; still far above
        // what one key is charged in a second here, so everything admits.
        (
            "sliding_log",
            Box::new(floodgate(SlidingLog::new(MAX_LOG, s))),
        ),
        (
            "sliding_window",
            Box::new(floodgate(SlidingWindow::new(l, s))),
        ),
        (
            "token_bucket",
            Box::new(floodgate(TokenBucket::new(l, l as f64))),
        ),
        (
            "leaky_bucket",
            Box::new(floodgate(LeakyBucket::new(l, l as f64))),
        ),
        ("gcra", Box::new(floodgate(Gcra::new(l, s)))),
        ("governor", Box::new(governor())),
    ]
}

/// The layer's cost: the same app with and without it.
fn apps() -> Vec<(&'static str, Box<dyn DynDecider>)> {
    vec![
        (
            "router_plain",
            Box::new(router(false)) as Box<dyn DynDecider>,
        ),
        ("router_layer", Box::new(router(true))),
        ("router_governor", Box::new(router_governor())),
        ("router_noheaders", Box::new(router_noheaders())),
        ("router_identity", Box::new(router_identity())),
        (
            "router_governor_headers",
            Box::new(router_governor_headers()),
        ),
    ]
}

/// The generic loops behind one dynamic call per measurement (not per
/// decision), so the loops are monomorphized for each contender.
#[allow(clippy::ptr_arg)]
trait DynDecider: Sync {
    fn timed(&self, keys: &[String], threads: usize, per_thread: u64) -> (Duration, f64);
    fn one(&self, key: &String) -> bool;
}

impl<D: Decider> DynDecider for D {
    fn timed(&self, keys: &[String], threads: usize, per_thread: u64) -> (Duration, f64) {
        timed(self, keys, threads, per_thread)
    }
    fn one(&self, key: &String) -> bool {
        self.decide(key)
    }
}

fn criterion_benches(c: &mut Criterion) {
    let keys = keys();
    for threads in [1usize, 2] {
        let mut group = c.benchmark_group(format!("memory_{threads}thread"));
        group.throughput(Throughput::Elements(1));
        for (name, d) in contenders() {
            // Warm: every key present, as in a server that has seen its clients.
            d.timed(&keys, 1, KEYS as u64);
            group.bench_function(BenchmarkId::from_parameter(name), |b| {
                if threads == 1 {
                    let mut i = 0;
                    b.iter(|| {
                        let k = &keys[i];
                        i = if i + 1 == keys.len() { 0 } else { i + 1 };
                        d.one(black_box(k))
                    });
                } else {
                    // Time per decision at the combined rate of both threads.
                    b.iter_custom(|iters| {
                        let per = iters.div_ceil(threads as u64);
                        d.timed(&keys, threads, per).0
                    });
                }
            });
        }
        group.finish();
    }
    let mut group = c.benchmark_group("layer");
    group.throughput(Throughput::Elements(1));
    for (name, d) in apps() {
        d.timed(&keys, 1, KEYS as u64);
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            let mut i = 0;
            b.iter(|| {
                let k = &keys[i];
                i = if i + 1 == keys.len() { 0 } else { i + 1 };
                d.one(black_box(k))
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(800))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    targets = criterion_benches
}

/// The ratio table: interleaved rounds, medians, ratios to governor (kept
/// whatever the filter, last).
fn ratio_table(rounds: usize, per_thread: u64, filter: Option<&str>) {
    let keys = keys();
    // A comma-separated list of names, or a part of one.
    let wanted = |n: &str| filter.is_none_or(|f| f.split(',').any(|f| n.contains(f)));
    let all: Vec<_> = contenders()
        .into_iter()
        .filter(|(n, _)| *n == "governor" || wanted(n))
        .collect();
    for (_, d) in &all {
        d.timed(&keys, 1, KEYS as u64 * 2);
    }
    println!();
    println!(
        "## floodgate MemoryStore vs governor keyed, ns per decision \
         (median of {rounds} interleaved rounds, {per_thread} decisions per thread per round, \
         {KEYS} keys, nproc {}, load average {})",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split(' ').take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    );
    for threads in [1usize, 2] {
        let mut ns: Vec<Vec<f64>> = vec![Vec::new(); all.len()];
        let mut admitted = vec![0.0; all.len()];
        for _ in 0..rounds {
            for (i, (_, d)) in all.iter().enumerate() {
                let (t, a) = d.timed(&keys, threads, per_thread);
                ns[i].push(t.as_nanos() as f64 / (threads as u64 * per_thread) as f64);
                admitted[i] = a;
            }
        }
        let med: Vec<f64> = ns.iter().map(|v| median(v)).collect();
        let gov = med[all.len() - 1];
        println!();
        println!(
            "| {threads} thread(s) | ns/decision | × governor | admitted | spread (min–max ns) |"
        );
        println!("|---|---|---|---|---|");
        for (i, (name, _)) in all.iter().enumerate() {
            let (lo, hi) = ns[i]
                .iter()
                .fold((f64::MAX, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
            println!(
                "| {name} | {:.1} | {:.2} | {:.1}% | {lo:.1}–{hi:.1} |",
                med[i],
                med[i] / gov,
                admitted[i] * 100.0
            );
        }
    }
}

/// The layer's table: ns per request with and without it.
fn layer_table(rounds: usize, n: u64) {
    let keys = keys();
    let all = apps();
    for (_, d) in &all {
        d.timed(&keys, 1, KEYS as u64);
    }
    for threads in [1usize, 2] {
        let mut ns: Vec<Vec<f64>> = vec![Vec::new(); all.len()];
        for _ in 0..rounds {
            for (i, (_, d)) in all.iter().enumerate() {
                let per_thread = n / threads as u64;
                let (t, _) = d.timed(&keys, threads, per_thread);
                ns[i].push(t.as_nanos() as f64 / (per_thread * threads as u64) as f64);
            }
        }
        let med: Vec<f64> = ns.iter().map(|v| median(v)).collect();
        let at = |name: &str| all.iter().position(|(n, _)| *n == name).unwrap();
        let (plain, governor) = (med[at("router_plain")], med[at("router_governor")]);
        let governor_headers = med[at("router_governor_headers")];
        println!();
        println!(
            "| axum Router in process, {threads} thread(s) ({rounds} interleaved rounds, medians) \
             | ns/request | own ns/request (over the plain app) | × tower_governor's own \
             | × tower_governor's own with its headers |"
        );
        println!("|---|---|---|---|---|");
        for (i, (name, _)) in all.iter().enumerate() {
            let own = med[i] - plain;
            println!(
                "| {name} | {:.1} | {own:.1} | {:.2} | {:.2} |",
                med[i],
                own / (governor - plain),
                own / (governor_headers - plain),
            );
        }
    }
}

/// A fixed amount of work for one contender, for callgrind.
fn profile(which: &str) {
    let keys = keys();
    let (_, d) = contenders()
        .into_iter()
        .chain(apps())
        .find(|(n, _)| *n == which)
        .unwrap_or_else(|| panic!("no contender {which:?}"));
    let n: u64 = std::env::var("FLOODGATE_BENCH_N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
    let threads: usize = std::env::var("FLOODGATE_BENCH_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    d.timed(&keys, 1, KEYS as u64);
    let (t, a) = d.timed(&keys, threads, n / threads as u64);
    println!(
        "{which}: {n} decisions on {threads} thread(s) in {t:?} ({:.1} ns each), {:.1}% admitted",
        t.as_nanos() as f64 / n as f64,
        a * 100.0
    );
}

fn main() {
    // The layer hands refunds to tokio (never here: nothing is denied), so
    // give it a runtime context; the futures are still polled by hand.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    if let Ok(which) = std::env::var("FLOODGATE_BENCH_PROFILE") {
        return profile(&which);
    }
    // The ratio table alone, of the contenders named (and governor).
    if let Ok(names) = std::env::var("FLOODGATE_BENCH_TABLE") {
        let rounds = std::env::var("FLOODGATE_BENCH_ROUNDS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(9);
        let (apps, others): (Vec<&str>, Vec<&str>) =
            names.split(',').partition(|n| n.starts_with("router"));
        if !others.is_empty() {
            ratio_table(rounds, 400_000, Some(&others.join(",")));
        }
        if !apps.is_empty() {
            layer_table(rounds, 200_000);
        }
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--test");
    let listing = args.iter().any(|a| a == "--list");
    // Criterion's positional filter, if any, also narrows the tables.
    let filter = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(String::as_str);
    benches();
    Criterion::default().configure_from_args().final_summary();
    if listing {
        return;
    }
    if smoke {
        ratio_table(1, 20_000, filter);
        layer_table(1, 20_000);
    } else {
        ratio_table(9, 400_000, filter);
        if filter.is_none_or(|f| "router_layer".contains(f)) {
            layer_table(9, 200_000);
        }
    }
}
