//! Many app servers, many tasks, one key, on a real Redis: the storms of
//! `tests/concurrency.rs` (see there for what "exact" means), shared with
//! `tests/redis6.rs`, which runs them on Redis 6.2.

use super::RedisServer;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::{RedisStore, Store};
use floodgate::{Decision, Error, Limiter};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The frozen instant (a window boundary).
pub const NOW: u64 = super::T0;
/// Simulated app servers, each with its own `RedisStore` (pool).
pub const SERVERS: usize = 8;
/// Tasks per app server.
pub const TASKS: usize = 32;
/// Requests per task (cost-1 runs).
pub const PER_TASK: usize = 2;
/// The limit (capacity, burst) of every algorithm.
pub const LIMIT: u64 = 100;

/// One algorithm, type-erased to a closure that builds its limiter over a
/// store with the shared frozen clock.
pub struct Case {
    pub name: &'static str,
    pub build: Build,
}

pub type Build = Box<dyn Fn(Store, &str, &ManualClock) -> Checker + Send + Sync>;

/// `check` of one limiter, boxed so that every algorithm has one type.
pub type Checker = Arc<dyn Fn(String, u64) -> DecisionFuture + Send + Sync>;

pub type DecisionFuture = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send>>;

pub fn case<A: Algorithm>(name: &'static str, alg: A) -> Case {
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
pub fn cases() -> Vec<Case> {
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
pub fn mixed_cost(s: usize, t: usize, i: usize) -> u64 {
    ((s * 7 + t * 3 + i * 5) % 7) as u64 + 1
}

/// What happened to the requests of one run: (cost, admitted).
pub type Outcome = Vec<(u64, bool)>;

/// Whether the outcome is exactly what the definition allows, and the key's
/// state says so too; `Err` says how it is not.
pub fn exact(name: &str, outcome: &Outcome, remaining_after: u64) -> Result<(), String> {
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
pub fn exact_unit(name: &str, outcome: &Outcome, remaining_after: u64) -> Result<(), String> {
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
pub fn all_exact(results: Vec<Result<(), String>>) {
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(failures.is_empty(), "not exact:\n{}", failures.join("\n"));
}

/// `SERVERS` stores × `TASKS` tasks × `per_task` requests on one key, all
/// released at once by a barrier.
pub async fn storm_redis(
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

pub fn redis_stores(server: &RedisServer) -> Vec<RedisStore> {
    (0..SERVERS)
        .map(|_| RedisStore::from_url(&server.url()).unwrap())
        .collect()
}

/// Cost 1 on every algorithm: exactly `LIMIT` admitted, on `server`.
pub async fn admit_exactly_the_limit(server: &RedisServer) {
    let stores = redis_stores(server);
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

/// Mixed costs on every algorithm: filled exactly, on `server`.
pub async fn mixed_costs_fill_exactly(server: &RedisServer) {
    let stores = redis_stores(server);
    let mut results = Vec::new();
    for case in cases() {
        let prefix = format!("mixed-{}", case.name);
        let (outcome, remaining) = storm_redis(&stores, &case, &prefix, 2, mixed_cost).await;
        results.push(exact(case.name, &outcome, remaining));
    }
    all_exact(results);
}
