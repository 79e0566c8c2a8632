//! `RedisClusterStore` against a real Redis Cluster (3 primaries, one
//! replica each, started by `common::cluster`): the same decisions as on one
//! Redis and in memory, keys spread over all shards, functions reloaded after
//! `FUNCTION FLUSH`, and the limit held through a failover and a resharding.
//!
//! `PROPTEST_CASES` sets the property cases per algorithm and for the
//! concurrency limit (default 100).

mod common;

use common::cluster::{key_slot, RedisCluster};
use common::load::Load;
use common::twins;
use common::T0;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::RedisClusterStore;
use floodgate::{Limiter, LimiterBuilder};
use proptest::prelude::*;
use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

const SEC: Duration = Duration::from_secs(1);

fn store(cluster: &RedisCluster) -> RedisClusterStore {
    RedisClusterStore::from_nodes(cluster.urls()).unwrap()
}

/// Store errors reach the caller, after a timeout long enough for a loaded
/// 2-core machine: these tests are about the store's decisions, not about
/// failure policies.
fn strict<A: Algorithm>(builder: LimiterBuilder<A>) -> LimiterBuilder<A> {
    builder
        .on_store_failure(FailurePolicy::ReturnError)
        .timeout(Duration::from_secs(5))
        .circuit_breaker(CircuitBreaker::disabled())
}

/// A fresh namespace for every limiter on a shared cluster.
fn prefix(what: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{what}{}", N.fetch_add(1, Ordering::Relaxed))
}

// ---------------------------------------------------------------------------
// The two experiments (tests/common/experiments.rs), on the cluster.

#[tokio::test]
async fn boundary_burst_on_cluster() {
    let cluster = RedisCluster::shared();
    common::experiments::boundary_burst(|| store(&cluster).into()).await;
}

#[tokio::test]
async fn steady_overload_on_cluster() {
    let cluster = RedisCluster::shared();
    common::experiments::steady_overload(|| store(&cluster).into()).await;
}

// ---------------------------------------------------------------------------
// Twins: the script on the cluster and the Rust twin agree on every field,
// with the traffic of tests/twins.rs (tests/common/twins.rs) over 8 keys,
// the concurrency limit's leases included.

/// Every case of `strategy` through `case`, all on one runtime and one store
/// (the store's connection lives on the runtime that made it).
fn run_cases<T: Debug>(
    strategy: impl Strategy<Value = T>,
    case: impl Fn(&Runtime, RedisClusterStore, T) -> Result<(), TestCaseError>,
) {
    let cluster = RedisCluster::shared();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = store(&cluster);
    twins::runner(100)
        .run(&strategy, |value| case(&rt, store.clone(), value))
        .unwrap();
}

/// Keys per case: enough for a case to span shards.
const KEYS: u8 = 8;

twins::twins_tests!(twins_on_cluster: run_cases, KEYS);

// ---------------------------------------------------------------------------
// Spread and scripts.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_clients_spread_over_all_primaries() {
    let cluster = RedisCluster::shared();
    let prefix = prefix("spread");
    // Keys that outlive the test (a token bucket's would expire once full).
    let limiter = strict(Limiter::builder(store(&cluster), frozen()))
        .prefix(&prefix)
        .clock(ManualClock::new(T0))
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                for i in (t..10_000).step_by(16) {
                    assert!(limiter
                        .check(&format!("user-{i}"), 1)
                        .await
                        .unwrap()
                        .allowed());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let per_node = cluster.keys_per_primary(&format!("{prefix}:*"));
    eprintln!("keys per primary: {per_node:?}");
    assert_eq!(per_node.len(), 3, "{per_node:?}");
    assert_eq!(per_node.iter().map(|(_, n)| n).sum::<u64>(), 10_000);
    let min = per_node.iter().map(|(_, n)| *n).min().unwrap();
    let max = per_node.iter().map(|(_, n)| *n).max().unwrap();
    assert!(max <= 2 * min, "uneven spread: {per_node:?}");
}

#[tokio::test]
async fn functions_come_back_after_a_flush_on_every_node() {
    // Its own cluster, without replicas: every test runs the same library, so
    // on the shared one another test could reload it right after the flush.
    let cluster = RedisCluster::start_with(3, 0);
    let prefix = prefix("noscript");
    let limiter = strict(Limiter::builder(store(&cluster), Gcra::new(5, SEC)))
        .prefix(&prefix)
        .clock(ManualClock::new(T0))
        .build()
        .unwrap();
    // Keys on every primary.
    let keys: Vec<String> = (0..60).map(|i| format!("c{i}")).collect();
    for k in &keys {
        assert_eq!(limiter.check(k, 2).await.unwrap().remaining(), 3);
    }
    let library = common::library_name();
    assert!(cluster
        .library_on_primaries(&library)
        .iter()
        .all(|(_, e)| *e));
    // The script cache is not what decisions use.
    cluster.flush_scripts();
    for k in &keys {
        assert_eq!(limiter.check(k, 1).await.unwrap().remaining(), 2);
    }
    cluster.flush_functions();
    assert!(cluster
        .library_on_primaries(&library)
        .iter()
        .all(|(_, e)| !e));
    // The state survived, only the functions are gone: every decision is
    // still right, on every shard.
    for k in &keys {
        assert_eq!(limiter.check(k, 1).await.unwrap().remaining(), 1);
    }
    // Loaded again on every primary, in the background meanwhile.
    let mut loaded = cluster.library_on_primaries(&library);
    for _ in 0..100 {
        if loaded.iter().all(|(_, e)| *e) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        loaded = cluster.library_on_primaries(&library);
    }
    assert!(
        loaded.iter().all(|(_, e)| *e),
        "not loaded everywhere: {loaded:?}"
    );
}

#[tokio::test]
async fn an_unreachable_cluster_is_an_error_at_once() {
    let port = common::free_port();
    let store = RedisClusterStore::from_url(&format!("redis://127.0.0.1:{port}")).unwrap();
    let limiter = strict(Limiter::builder(store, frozen())).build().unwrap();
    let t = Instant::now();
    let e = limiter.check("ana", 1).await.unwrap_err();
    assert!(e.to_string().contains("cannot connect"), "{e}");
    // Within 100 ms of a failed attempt, calls fail without a new one.
    let again = Instant::now();
    limiter.check("ana", 1).await.unwrap_err();
    assert!(again.elapsed() < Duration::from_millis(50));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}

// ---------------------------------------------------------------------------
// Failover and resharding under load.

/// Every key admitted at most `LIMIT`, and the store charged at least
/// what the callers saw admitted; how many keys are full and how many were
/// charged more than admitted.
async fn check_against(load: &Load, store: RedisClusterStore, prefix: &str) -> (usize, usize) {
    let truth = strict(Limiter::builder(store, frozen()))
        .prefix(prefix)
        .clock(ManualClock::new(T0))
        .build()
        .unwrap();
    let audit = load.check_against(&truth, LIMIT).await;
    assert!(
        audit.most_admitted <= LIMIT,
        "a key admitted more than {LIMIT}: {audit:?}"
    );
    assert_eq!(audit.forgotten, 0, "admissions forgotten: {audit:?}");
    (audit.full, audit.charged_more)
}

/// A limit that refills cannot reach during a test: a fixed window of an
/// hour on a stopped clock.
const LIMIT: u64 = 30;

fn frozen() -> FixedWindow {
    FixedWindow::new(LIMIT, Duration::from_secs(3600))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_failover_keeps_the_limit_and_resumes_by_itself() {
    let t0 = Instant::now();
    let mut cluster = RedisCluster::start();
    // What production would run: the default timeout (100 ms) and circuit
    // breaker; fail closed, so that even degraded decisions admit nothing.
    let limiter = Limiter::builder(store(&cluster), frozen())
        .prefix("failover")
        .clock(ManualClock::new(T0))
        .on_store_failure(FailurePolicy::FailClosed)
        .build()
        .unwrap();
    let victim = cluster.primaries()[0];
    let keys: Vec<String> = (0..300).map(|i| format!("client-{i}")).collect();
    let owners = cluster.owners();
    let on_victim = keys
        .iter()
        .filter(|k| owners[key_slot(k) as usize] == victim)
        .count();
    assert!(on_victim > 50, "{on_victim} keys on the victim");

    let load = Load::new(keys);
    let tasks = load.spawn(&limiter, 16);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let before = load.counts();

    let killed_at = Instant::now();
    // Writes the replica had not received would be lost by Redis itself
    // (asynchronous replication): kill once it has them.
    let acked = tokio::task::block_in_place(|| cluster.kill_in_sync(victim));
    assert_eq!(acked, 1, "the victim's replica caught up before the kill");
    let promoted = tokio::task::block_in_place(|| cluster.wait_for_failover(victim));
    let failover = killed_at.elapsed();
    let promoted_at = load.counts();
    // Limiting resumes by itself: give the circuit breaker its cool-down,
    // then watch one more second.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let resumed = load.counts();
    tokio::time::sleep(Duration::from_secs(1)).await;
    load.stop(tasks).await;
    let end = load.counts();
    let late = (end.calls - resumed.calls, end.degraded - resumed.degraded);
    eprintln!(
        "failover {victim} -> {promoted} in {failover:?}; before the kill {before:?}, \
         when promoted {promoted_at:?}, at the end {end:?}; last second: {} degraded of {}",
        late.1, late.0
    );
    assert_eq!(end.errors, 0, "errors: {:?}", load.seen.lock().unwrap());
    assert_eq!(before.degraded, 0, "degraded before the kill");
    assert!(
        promoted_at.degraded > 0,
        "the outage was not seen: nothing degraded"
    );
    assert!(late.0 > 100, "too little traffic after the failover");
    assert_eq!(late.1, 0, "still degraded a second after the failover");

    let (full, charged_more) = check_against(&load, store(&cluster), "failover").await;
    eprintln!(
        "failover test: {full} of {} keys full, {charged_more} charged more than admitted, {:?}",
        load.keys.len(),
        t0.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_resharding_loses_nothing() {
    let t0 = Instant::now();
    let cluster = RedisCluster::start();
    // Errors reach the caller: the store must never produce one.
    let limiter = strict(Limiter::builder(store(&cluster), frozen()))
        .prefix("reshard")
        .clock(ManualClock::new(T0))
        .build()
        .unwrap();
    let primaries = cluster.primaries();
    let (from, to) = (primaries[0], primaries[1]);
    // Clients on the first 40 slots of `from` that hold one, so that every
    // moved slot has keys to migrate while they are charged.
    let owners = cluster.owners();
    let mut keys = Vec::new();
    let mut slots = Vec::new();
    for i in 0.. {
        let k = format!("user-{i}");
        let slot = key_slot(&k);
        if owners[slot as usize] != from {
            continue;
        }
        if !slots.contains(&slot) {
            if slots.len() == 40 {
                continue;
            }
            slots.push(slot);
        }
        keys.push(k);
        if keys.len() >= 200 && slots.len() == 40 {
            break;
        }
    }
    let (moved_before, ask_before) = (cluster.errors("MOVED"), cluster.errors("ASK"));

    let load = Load::new(keys);
    let tasks = load.spawn(&limiter, 16);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // There and back again, then 50 more slots by redis-cli, with traffic
    // throughout.
    tokio::task::block_in_place(|| {
        cluster.migrate_slots(slots.iter().copied(), to, Duration::from_millis(20));
        cluster.migrate_slots(slots.iter().copied(), from, Duration::from_millis(20));
        cluster.reshard(from, to, 50);
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    load.stop(tasks).await;
    let end = load.counts();
    let (moved, ask) = (
        cluster.errors("MOVED") - moved_before,
        cluster.errors("ASK") - ask_before,
    );
    eprintln!("resharding: {end:?}, {moved} MOVED, {ask} ASK");
    assert!(
        moved > 0 && ask > 0,
        "the resharding was not seen by the client"
    );
    assert_eq!(
        (end.errors, end.degraded),
        (0, 0),
        "errors reached the caller: {:?}",
        load.seen.lock().unwrap()
    );
    let (full, charged_more) = check_against(&load, store(&cluster), "reshard").await;
    eprintln!(
        "resharding test: {full} of {} keys full, {charged_more} charged more than admitted, {:?}",
        load.keys.len(),
        t0.elapsed()
    );
}

/// Several keys, one decision, on the cluster: keys on different slots are
/// decided one call per slot, and a denial gives back the others' charge;
/// the decisions, limit by limit, are the twin's (which decides them all
/// at once).
#[test]
fn several_keys_in_one_decision_on_the_cluster_equal_the_twin() {
    let strategy = (1..8u64, 1..8u64, 1..8u64, twins_window()).prop_flat_map(|(a, b, c, w)| {
        let window = Duration::from_millis(w);
        let limits = Limits::new("p0", Gcra::new(a, window))
            .try_with("p1", FixedWindow::new(b, window))
            .unwrap()
            .try_with("p2", SlidingLog::new(c, window))
            .unwrap();
        (Just(limits), twins::keys_ops(3, KEYS, 2 * w))
    });
    run_cases(strategy, twins::keys_case);
}

fn twins_window() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1000u64), 50..5000u64]
}

/// The case that found the rounding: a check refused by one slot used to
/// charge the others and give it back, which left a GCRA backlog a
/// rounding away from untouched (a reset 1 ms off the twin's, later).
#[test]
fn a_check_refused_by_one_slot_leaves_the_others_untouched_to_the_bit() {
    let cluster = RedisCluster::shared();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let window = Duration::from_millis(1603);
    let limits = Limits::new("p0", Gcra::new(5, window))
        .try_with("p1", FixedWindow::new(4, window))
        .unwrap()
        .try_with("p2", SlidingLog::new(6, window))
        .unwrap();
    let op = |keys: [u8; 3], step_ms, cost| twins::KeysOp {
        keys: keys.to_vec(),
        step_ms,
        cost,
    };
    let ops = vec![
        op([5, 2, 7], 0, 1),
        op([5, 5, 3], 33, 2),
        op([2, 6, 5], 6, 2),
        op([3, 6, 6], 2, 1),
        op([5, 6, 5], 1, 2),
        op([5, 7, 2], 686, 2),
    ];
    twins::keys_case(&rt, store(&cluster), (limits, ops)).unwrap();
}
