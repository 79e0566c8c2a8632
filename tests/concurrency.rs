//! Exact under concurrency: many app servers, many tasks, one key.
//!
//! Eight separate [`RedisStore`]s (one per simulated app server, each with
//! its own connection pool) × 32 tokio tasks each, on a multi-thread runtime,
//! hit one key at once; the in-memory store gets the same from 16 OS
//! threads. The clock is a [`ManualClock`] frozen at one instant, so nothing
//! refills during the storm and the definition of every algorithm gives one
//! exact number:
//!
//! * **cost 1**: exactly `limit` (capacity, burst) requests are admitted,
//!   never one more, never one less, whatever the interleaving.
//! * **mixed costs**: the admitted costs sum to at most `limit`, and no
//!   request that would have fit was refused. With a frozen clock the room
//!   left only shrinks, so the room at the end (`limit − admitted`) is at
//!   most the room any denied request saw: it must be *smaller than the
//!   smallest denied cost*. The store then reports exactly that room
//!   (`check(key, 0).remaining()`).
//!
//! Every run is bounded (a few thousand decisions per algorithm) and takes a
//! few seconds on 2 cores in debug.

mod common;

use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Decision, Error, Limiter};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The frozen instant (a window boundary).
const NOW: u64 = common::T0;
/// Simulated app servers, each with its own `RedisStore` (pool).
const SERVERS: usize = 8;
/// Tasks per app server.
const TASKS: usize = 32;
/// Requests per task (cost-1 runs).
const PER_TASK: usize = 2;
/// OS threads on the memory store, and requests per thread.
const THREADS: usize = 16;
const PER_THREAD: usize = 64;
/// The limit (capacity, burst) of every algorithm.
const LIMIT: u64 = 100;

/// One algorithm, type-erased to a closure that builds its limiter over a
/// store with the shared frozen clock.
struct Case {
    name: &'static str,
    build: Build,
}

type Build = Box<dyn Fn(Store, &str, &ManualClock) -> Checker + Send + Sync>;

/// `check` of one limiter, boxed so that every algorithm has one type.
type Checker = Arc<dyn Fn(String, u64) -> DecisionFuture + Send + Sync>;

type DecisionFuture = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send>>;

fn case<A: Algorithm>(name: &'static str, alg: A) -> Case {
    Case {
        name,
        build: Box::new(move |store, prefix, clock| {
            let limiter = Limiter::builder(store, alg.clone())
                .prefix(prefix)
                .clock(clock.clone())
                // Errors, not silent fail-open decisions, on a loaded machine.
                .on_store_failure(FailurePolicy::ReturnError)
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap();
            Arc::new(move |key: String, cost: u64| {
                let limiter = limiter.clone();
                Box::pin(async move { limiter.check(&key, cost).await })
            })
        }),
    }
}

/// All six algorithms at limit (capacity, burst) [`LIMIT`]. Windows and
/// rates are long enough that a frozen instant is the whole story.
fn cases() -> Vec<Case> {
    let minute = Duration::from_secs(60);
    vec![
        case("fixed_window", FixedWindow::new(LIMIT, minute)),
        case("sliding_log", SlidingLog::new(LIMIT, minute)),
        case("sliding_window", SlidingWindow::new(LIMIT, minute)),
        case("token_bucket", TokenBucket::new(LIMIT, 1.0)),
        case("leaky_bucket", LeakyBucket::new(LIMIT, 1.0)),
        case("gcra", Gcra::new(LIMIT, minute)),
        // An interval that is no whole number of ms (60 000 / 70): the TAT
        // accumulates float rounding over the burst.
        case(
            "gcra_odd_interval",
            Gcra::new(70, minute).try_burst(LIMIT).unwrap(),
        ),
        // A burst of a different size than the limit.
        case(
            "gcra_burst",
            Gcra::new(7, Duration::from_secs(1))
                .try_burst(LIMIT)
                .unwrap(),
        ),
    ]
}

/// The cost of request `i` of task `t` of server `s` in the mixed runs:
/// 1 to 7, spread so that every server sends every cost.
fn mixed_cost(s: usize, t: usize, i: usize) -> u64 {
    ((s * 7 + t * 3 + i * 5) % 7) as u64 + 1
}

/// What happened to the requests of one run: (cost, admitted).
type Outcome = Vec<(u64, bool)>;

/// Whether the outcome is exactly what the definition allows, and the key's
/// state says so too; `Err` says how it is not.
fn exact(name: &str, outcome: &Outcome, remaining_after: u64) -> Result<(), String> {
    let admitted: u64 = outcome.iter().filter(|o| o.1).map(|o| o.0).sum();
    let denied_min = outcome.iter().filter(|o| !o.1).map(|o| o.0).min();
    if denied_min.is_none() {
        return Err(format!("{name}: nothing denied, too little demand"));
    }
    if admitted > LIMIT {
        return Err(format!(
            "{name}: admitted cost {admitted} over the limit {LIMIT}"
        ));
    }
    let room = LIMIT - admitted;
    if let Some(smallest) = denied_min.filter(|&c| room >= c) {
        return Err(format!(
            "{name}: {room} left at the end, yet a request of cost {smallest} was denied \
             (admitted {admitted} of {LIMIT})"
        ));
    }
    if remaining_after != room {
        return Err(format!(
            "{name}: the store reports {remaining_after} remaining, {room} are left"
        ));
    }
    Ok(())
}

/// Like [`exact`], for cost 1: exactly `LIMIT` admitted.
fn exact_unit(name: &str, outcome: &Outcome, remaining_after: u64) -> Result<(), String> {
    assert!(outcome.iter().all(|o| o.0 == 1));
    assert!(
        outcome.len() as u64 > 2 * LIMIT,
        "{name}: too little demand"
    );
    let admitted = outcome.iter().filter(|o| o.1).count() as u64;
    if admitted != LIMIT {
        return Err(format!(
            "{name}: {admitted} of {} requests admitted, the limit is {LIMIT}",
            outcome.len()
        ));
    }
    if remaining_after != 0 {
        return Err(format!(
            "{name}: {remaining_after} remaining after the storm"
        ));
    }
    Ok(())
}

/// Fails with every algorithm's failure at once, so that one algorithm's
/// bug does not hide another's.
fn all_exact(results: Vec<Result<(), String>>) {
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(failures.is_empty(), "not exact:\n{}", failures.join("\n"));
}

/// `SERVERS` stores × `TASKS` tasks × `per_task` requests on one key, all
/// released at once by a barrier.
async fn storm_redis(
    stores: &[RedisStore],
    case: &Case,
    prefix: &str,
    per_task: usize,
    cost: fn(usize, usize, usize) -> u64,
) -> (Outcome, u64) {
    let clock = ManualClock::new(NOW);
    let checkers: Vec<Checker> = stores
        .iter()
        .map(|s| (case.build)(s.clone().into(), prefix, &clock))
        .collect();
    let barrier = Arc::new(tokio::sync::Barrier::new(SERVERS * TASKS));
    let mut handles = Vec::new();
    for (s, check) in checkers.iter().enumerate() {
        for t in 0..TASKS {
            let (check, barrier) = (check.clone(), barrier.clone());
            handles.push(tokio::spawn(async move {
                barrier.wait().await;
                let mut out = Vec::with_capacity(per_task);
                for i in 0..per_task {
                    let c = cost(s, t, i);
                    let d = check("hot".into(), c).await.expect("redis decision");
                    assert!(!d.is_degraded());
                    out.push((c, d.allowed()));
                }
                out
            }));
        }
    }
    let mut outcome = Vec::new();
    for h in handles {
        outcome.extend(h.await.expect("task"));
    }
    // Ask a different app server than most: all must see the same state.
    let after = (checkers[SERVERS - 1])("hot".into(), 0).await.unwrap();
    assert!(after.allowed(), "{}: cost 0 is always admitted", case.name);
    (outcome, after.remaining())
}

fn redis_stores(server: &RedisServer) -> Vec<RedisStore> {
    (0..SERVERS)
        .map(|_| RedisStore::from_url(&server.url()).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_many_servers_admit_exactly_the_limit() {
    let server = RedisServer::start();
    let stores = redis_stores(&server);
    let mut results = Vec::new();
    for case in cases() {
        let prefix = format!("unit-{}", case.name);
        let (outcome, remaining) =
            storm_redis(&stores, &case, &prefix, PER_TASK, |_, _, _| 1).await;
        results.push(exact_unit(case.name, &outcome, remaining));
        if case.name == "sliding_log" {
            // One log entry per admitted request, no more.
            let key = format!("{prefix}:default:sl:{{hot}}");
            let n: u64 = server.cmd(&["ZCARD", &key]);
            assert_eq!(n, LIMIT, "sliding log entries");
        }
    }
    // Every key of the run is one key per algorithm: nothing else was written.
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    assert_eq!(keys.len(), cases().len(), "{keys:?}");
    all_exact(results);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_many_servers_mixed_costs_fill_exactly() {
    let server = RedisServer::start();
    let stores = redis_stores(&server);
    let mut results = Vec::new();
    for case in cases() {
        let prefix = format!("mixed-{}", case.name);
        let (outcome, remaining) = storm_redis(&stores, &case, &prefix, 2, mixed_cost).await;
        results.push(exact(case.name, &outcome, remaining));
    }
    all_exact(results);
}

/// `THREADS` OS threads × `per_thread` requests on one key of one memory
/// store, released at once by a barrier.
fn storm_memory(case: &Case, per_thread: usize, cost: fn(usize, usize) -> u64) -> (Outcome, u64) {
    let clock = ManualClock::new(NOW);
    let check = (case.build)(MemoryStore::new().into(), "mem", &clock);
    let barrier = std::sync::Barrier::new(THREADS);
    let outcome = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (check, barrier) = (check.clone(), &barrier);
                scope.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    barrier.wait();
                    (0..per_thread)
                        .map(|i| {
                            let c = cost(t, i);
                            let d = rt.block_on(check("hot".into(), c)).unwrap();
                            (c, d.allowed())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("thread"))
            .collect::<Vec<_>>()
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let after = rt.block_on(check("hot".into(), 0)).unwrap();
    (outcome, after.remaining())
}

#[test]
fn memory_many_threads_admit_exactly_the_limit() {
    let mut results = Vec::new();
    for case in cases() {
        let (outcome, remaining) = storm_memory(&case, PER_THREAD, |_, _| 1);
        assert_eq!(outcome.len(), THREADS * PER_THREAD);
        results.push(exact_unit(case.name, &outcome, remaining));
    }
    all_exact(results);
}

#[test]
fn memory_many_threads_mixed_costs_fill_exactly() {
    let mut results = Vec::new();
    for case in cases() {
        let (outcome, remaining) = storm_memory(&case, PER_THREAD, |t, i| mixed_cost(0, t, i));
        results.push(exact(case.name, &outcome, remaining));
    }
    all_exact(results);
}

/// Many keys at once on one memory store: each key's count is its own, so a
/// storm on some keys never leaks into the others.
#[test]
fn memory_many_threads_many_keys_stay_separate() {
    let clock = ManualClock::new(NOW);
    let check =
        (case("tb", TokenBucket::new(LIMIT, 1.0)).build)(MemoryStore::new().into(), "keys", &clock);
    const KEYS: usize = 8;
    let admitted: Vec<Vec<u64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let check = check.clone();
                scope.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    let mut per_key = vec![0u64; KEYS];
                    for i in 0..PER_THREAD * 2 {
                        let k = (t + i) % KEYS;
                        if rt.block_on(check(format!("k{k}"), 1)).unwrap().allowed() {
                            per_key[k] += 1;
                        }
                    }
                    per_key
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for k in 0..KEYS {
        let total: u64 = admitted.iter().map(|v| v[k]).sum();
        assert_eq!(total, LIMIT, "key k{k}");
    }
}

/// The same definition without any concurrency, so that a failure of the
/// storms above can be told apart from a race: a rested GCRA admits exactly
/// `burst` requests of cost 1 at one instant, for every limit, on both
/// stores (a float TAT accumulated over the burst must not lose the last one,
/// nor round its way to more).
#[tokio::test]
async fn gcra_admits_its_whole_burst_at_one_instant() {
    let server = RedisServer::start();
    let mut short = Vec::new();
    for limit in 1..=30u64 {
        let alg = Gcra::new(limit, Duration::from_secs(1));
        let stores: [Store; 2] = [
            MemoryStore::new().into(),
            RedisStore::from_url(&server.url()).unwrap().into(),
        ];
        for (store_name, store) in ["memory", "redis"].into_iter().zip(stores) {
            let limiter = Limiter::builder(store, alg)
                .prefix(format!("seq{limit}"))
                .clock(ManualClock::new(NOW))
                // Errors, not silent fail-open decisions, on a loaded machine.
                .on_store_failure(FailurePolicy::ReturnError)
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap();
            let mut admitted = 0;
            for _ in 0..limit + 2 {
                admitted += u64::from(limiter.check("k", 1).await.unwrap().allowed());
            }
            if admitted != limit {
                short.push(format!(
                    "{store_name}: Gcra::new({limit}, 1 s) admitted {admitted}"
                ));
            }
        }
    }
    // High rates at a realistic clock: an interval of 0.01 or 0.001 ms is
    // close to or below the resolution of a double near 1.8e12 ms (2^-12 ms).
    // Memory only: the script computes the same doubles (tests/twins.rs).
    for limit in [10_000u64, 100_000] {
        let limiter = Limiter::builder(
            MemoryStore::new(),
            Gcra::new(limit, Duration::from_millis(100)),
        )
        .clock(ManualClock::new(NOW))
        .build()
        .unwrap();
        let mut admitted = 0;
        for _ in 0..limit * 11 / 10 {
            admitted += u64::from(limiter.check("k", 1).await.unwrap().allowed());
        }
        if admitted != limit {
            short.push(format!(
                "memory: Gcra::new({limit}, 100 ms) admitted {admitted}"
            ));
        }
    }
    assert!(short.is_empty(), "burst not admitted exactly: {short:#?}");
}
