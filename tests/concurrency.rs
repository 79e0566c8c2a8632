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

use common::storm::{
    all_exact, case, cases, exact, exact_unit, mixed_cost, Case, Outcome, LIMIT, NOW,
};
use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::Limiter;
use std::time::Duration;

/// OS threads on the memory store, and requests per thread.
const THREADS: usize = 16;
const PER_THREAD: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_many_servers_admit_exactly_the_limit() {
    common::storm::admit_exactly_the_limit(&RedisServer::start()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_many_servers_mixed_costs_fill_exactly() {
    common::storm::mixed_costs_fill_exactly(&RedisServer::start()).await;
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
