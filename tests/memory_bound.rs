//! The in-memory store under a spray of distinct keys: bounded memory per
//! key, a hard bound on the number of keys, exact answers for the keys it
//! holds, and expired state swept by new traffic.
//!
//! Resident memory is measured in a child process (this test binary run
//! again on one ignored test), so that the other tests of this file, running
//! in parallel threads, do not blur the numbers. Each of N distinct keys
//! (`user0`, `user1`, …) is charged once at one frozen instant, so nothing
//! expires. Measured on Linux `x86_64`, glibc malloc (BENCHMARKS.md, "Memory
//! store under a key spray"):
//!
//! | state per key | 200 000 keys (debug) | 1 000 000 keys (release) | asserted |
//! |---|---|---|---|
//! | token bucket | 126 B | 167 B | < 400 B per key |
//! | sliding log (limit 10), one entry | 174 B | 215 B | < 400 B per key |
//! | sliding log (limit 10), full: 10 entries | 272 B | 312 B | < 400 B per key |
//!
//! `FLOODGATE_SPRAY_KEYS` sets N (default 200 000, which keeps this file
//! well under 30 s in debug on 2 cores). The full size:
//! `FLOODGATE_SPRAY_KEYS=1000000 cargo test --release --test memory_bound -- --nocapture`.

mod common;

use common::child::{rss_bytes, run_child};
use floodgate::algorithm::{Algorithm, FixedWindow, SlidingLog, TokenBucket};
use floodgate::clock::ManualClock;
use floodgate::store::MemoryStore;
use floodgate::Limiter;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

/// Bytes of resident memory per key held, at most.
const MAX_BYTES_PER_KEY: u64 = 400;
/// The child's environment variable naming what to measure.
const CHILD: &str = "FLOODGATE_RSS_CHILD";
const NOW: u64 = 1_791_860_000_000;

fn spray_keys() -> usize {
    std::env::var("FLOODGATE_SPRAY_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// What the child measured.
#[derive(Debug)]
struct Measured {
    held: u64,
    grown: u64,
    secs: f64,
}

impl Measured {
    fn per_key(&self) -> u64 {
        self.grown / self.held.max(1)
    }
}

/// Run the ignored `rss_child` test of this binary in a new process to
/// measure `what`.
fn measure_in_child(what: &str) -> Measured {
    let v = run_child("rss_child", CHILD, what, "MEASURED ");
    Measured {
        held: v[0] as u64,
        grown: v[1] as u64,
        secs: v[2],
    }
}

/// The child: spray `spray_keys()` distinct keys at one instant through one
/// algorithm on a fresh store and print the keys held and the memory grown.
#[test]
#[ignore = "runs only as the child of the memory tests"]
fn rss_child() {
    let Ok(what) = std::env::var(CHILD) else {
        return;
    };
    let n = spray_keys();
    let rt = rt();
    let clock = ManualClock::new(NOW);
    let store = MemoryStore::new();
    let before = rss_bytes();
    let start = Instant::now();
    let log = SlidingLog::new(10, Duration::from_secs(60));
    rt.block_on(async {
        match what.as_str() {
            "token_bucket" => spray(&store, TokenBucket::new(10, 1.0), &clock, n, 1).await,
            // One request per key, or a full log of 10 entries per key.
            "sliding_log" => spray(&store, log, &clock, n, 1).await,
            "sliding_log_full" => spray(&store, log, &clock, n, 10).await,
            other => panic!("unknown measurement {other}"),
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let grown = rss_bytes().saturating_sub(before);
    println!("MEASURED {} {grown} {secs}", store.len());
}

/// `n` distinct keys, each charged `cost` once, all admitted.
async fn spray<A: Algorithm>(
    store: &MemoryStore,
    alg: A,
    clock: &ManualClock,
    n: usize,
    cost: u64,
) {
    let l = Limiter::builder(store.clone(), alg)
        .clock(clock.clone())
        .build()
        .unwrap();
    for i in 0..n {
        assert!(l.check(&format!("user{i}"), cost).await.unwrap().allowed());
    }
}

fn assert_bounded(what: &str) {
    let n = spray_keys();
    let m = measure_in_child(what);
    println!(
        "{what}: {} keys held of {n}, RSS +{} MB, {} B per key, {:.1} s",
        m.held,
        m.grown / 1_000_000,
        m.per_key(),
        m.secs
    );
    // The default store holds up to 1 000 000 keys; shards fill unevenly,
    // so a few are evicted when the spray is that large.
    assert!(
        m.held as f64 >= n.min(1_000_000) as f64 * 0.99,
        "{what}: only {} of {n} keys held",
        m.held
    );
    assert!(
        m.per_key() < MAX_BYTES_PER_KEY,
        "{what}: {} B per key, bound {MAX_BYTES_PER_KEY} ({m:?})",
        m.per_key()
    );
}

#[test]
fn token_bucket_memory_per_key_is_bounded() {
    assert_bounded("token_bucket");
}

#[test]
fn sliding_log_memory_per_key_is_bounded() {
    assert_bounded("sliding_log");
}

#[test]
fn full_sliding_logs_memory_per_key_is_bounded() {
    assert_bounded("sliding_log_full");
}

/// `with_max_keys(100_000)` never holds more than 100 000 keys while the
/// whole spray passes, and a hot key that is still held keeps its exact
/// count throughout.
#[test]
fn max_keys_holds_while_a_spray_passes_and_hot_keys_stay_exact() {
    const MAX: usize = 100_000;
    let n = spray_keys();
    let store = MemoryStore::with_max_keys(NonZeroUsize::new(MAX).unwrap());
    let clock = ManualClock::new(NOW);
    let spray = Limiter::builder(store.clone(), FixedWindow::new(10, Duration::from_secs(60)))
        .name("spray")
        .clock(clock.clone())
        .build()
        .unwrap();
    // The hot key has used over half its quota, the sprayed keys a tenth of
    // theirs: eviction (the least quota used first) never picks it.
    const HOT_LIMIT: u64 = 1_000;
    const HOT_FIRST: u64 = HOT_LIMIT / 2;
    let hot = Limiter::builder(
        store.clone(),
        FixedWindow::new(HOT_LIMIT, Duration::from_secs(86_400)),
    )
    .name("hot")
    .clock(clock.clone())
    .build()
    .unwrap();
    let checkpoints = (HOT_LIMIT as usize - 1).min(100);
    let every = (n / checkpoints).max(1);
    let mut hot_used = HOT_FIRST;
    let mut most = 0;
    rt().block_on(async {
        let d = hot.check("hot", HOT_FIRST).await.unwrap();
        assert!(
            d.allowed() && d.remaining() == HOT_LIMIT - HOT_FIRST,
            "{d:?}"
        );
        for i in 0..n {
            // A fresh key always fits: nothing is denied for lack of room.
            assert!(spray.check(&format!("user{i}"), 1).await.unwrap().allowed());
            if i % every == 0 {
                let len = store.len();
                most = most.max(len);
                assert!(len <= MAX, "{len} keys held after {i}, bound {MAX}");
                let d = hot.check("hot", 1).await.unwrap();
                hot_used += 1;
                assert!(d.allowed(), "hot key denied after {hot_used}");
                assert_eq!(
                    d.remaining(),
                    HOT_LIMIT - hot_used,
                    "hot key lost count after {i} sprayed keys"
                );
            }
        }
    });
    let len = store.len();
    assert!(len <= MAX, "{len} keys held at the end, bound {MAX}");
    assert!(
        most >= MAX * 9 / 10 || n < MAX,
        "the store never came near its bound: at most {most}"
    );
    println!("with_max_keys({MAX}): {len} held after {n} keys, at most {most}");
}

/// The bound is the number asked for, whatever the number of shards (which
/// depends on the machine's cores): `with_max_keys(1_001)` holds at most
/// 1 001 keys, not 1 001 rounded up to a multiple of the shard count.
#[test]
fn max_keys_is_exact_when_not_a_multiple_of_the_shards() {
    let clock = ManualClock::new(NOW);
    for max in [1_001, 4_097, 10_007] {
        let store = MemoryStore::with_max_keys(NonZeroUsize::new(max).unwrap());
        let l = Limiter::builder(store.clone(), FixedWindow::new(10, Duration::from_secs(60)))
            .clock(clock.clone())
            .build()
            .unwrap();
        rt().block_on(async {
            for i in 0..max * 8 {
                l.check(&format!("user{i}"), 1).await.unwrap();
            }
        });
        let len = store.len();
        assert!(
            len <= max,
            "with_max_keys({max}) holds {len} keys ({store:?})"
        );
    }
}

/// A new key costs about the same whether the store is half full or full:
/// making room must not scan the whole shard on every insert (with the
/// default bound of 1 000 000 keys a shard holds over 30 000 entries, and
/// a spray of fresh keys would make every decision scan all of them under
/// the shard's lock).
#[test]
fn new_keys_cost_the_same_when_the_store_is_full() {
    // 2 000 keys per shard on a 2-core machine (32 shards).
    const MAX: usize = 64_000;
    // Enough new keys that every shard goes through a few sweeps.
    const NEW: u64 = 64_000;
    let store = MemoryStore::with_max_keys(NonZeroUsize::new(MAX).unwrap());
    let limiter = Limiter::builder(store.clone(), FixedWindow::new(10, Duration::from_secs(60)))
        .clock(ManualClock::new(NOW))
        .build()
        .unwrap();
    let rt = rt();
    let mut next = 0;
    let mut spray = |n: u64| {
        rt.block_on(async {
            for _ in 0..n {
                next += 1;
                assert!(limiter
                    .check(&format!("user{next}"), 1)
                    .await
                    .unwrap()
                    .allowed());
            }
        });
    };
    // Past the bound: every shard is full and must evict for each new key.
    spray(MAX as u64 * 3 / 2);
    assert!(store.len() >= MAX * 99 / 100, "{} held", store.len());
    // Making room is counted in entries visited, not timed: a sweep of a
    // full shard on every new key would visit a shard (about 2 000 entries)
    // per key; amortized sweeps visit about 2 per key.
    let before = store.stats().swept;
    spray(NEW);
    let per_key = (store.stats().swept - before) as f64 / NEW as f64;
    assert!(
        per_key <= 4.0,
        "sweeps visited {per_key:.1} entries per new key"
    );
    assert!(store.len() <= MAX, "{} held", store.len());
}

/// A store entirely full of keys at their limit (limit 1: one request each)
/// still admits every new key, at a bounded cost: making room looks at 16
/// entries, and searches on for one with quota left within 16 entries per
/// new key, so about 32 per new key even when no entry has any left. It
/// then evicts keys at their limit, the least recently decided first: a
/// key at its limit that keeps being tried is not evicted, and is never
/// admitted again.
#[test]
fn a_store_full_of_keys_at_their_limit_evicts_the_least_recent_at_bounded_cost() {
    const MAX: usize = 64_000;
    const NEW: u64 = 64_000;
    let store = MemoryStore::with_max_keys(NonZeroUsize::new(MAX).unwrap());
    let clock = ManualClock::new(NOW);
    // A day from `NOW` to the next window: the spray (1 ms per key) stays
    // in one window.
    let limiter = Limiter::builder(
        store.clone(),
        FixedWindow::new(1, Duration::from_secs(86_400)),
    )
    .clock(clock.clone())
    .build()
    .unwrap();
    let rt = rt();
    let mut next = 0;
    let mut victim_admitted = 0;
    let mut spray = |n: u64| {
        rt.block_on(async {
            for _ in 0..n {
                next += 1;
                clock.advance(Duration::from_millis(1));
                let d = limiter.check(&format!("user{next}"), 1).await.unwrap();
                assert!(d.allowed(), "new key {next} denied");
                if next % 100 == 0 && limiter.check("victim", 1).await.unwrap().allowed() {
                    victim_admitted += 1;
                }
            }
        });
    };
    spray(MAX as u64 * 3 / 2);
    let before = store.stats();
    assert!(before.evicted_at_limit > 0, "{before:?}");
    spray(NEW);
    let after = store.stats();
    let per_key = (after.searched - before.searched) as f64 / NEW as f64;
    assert!(
        per_key <= 34.0,
        "evictions looked at {per_key:.1} entries per new key"
    );
    // Every new key evicted one at its limit: none had quota left.
    assert_eq!(after.evicted_at_limit - before.evicted_at_limit, NEW);
    assert_eq!(victim_admitted, 1, "the victim key was evicted");
    assert!(store.len() <= MAX, "{} held", store.len());
    println!("full of keys at their limit: {per_key:.1} entries looked at per new key");
}
