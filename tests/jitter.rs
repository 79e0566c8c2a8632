//! Jittered windows (`FixedWindow::jittered`, `SlidingWindow::jittered`):
//! the keys of one limit reset at instants spread over the window, on Redis
//! and in memory alike, so that clients denied until their reset come back
//! spread out instead of as one herd. Manual clock throughout; every
//! decision is made on both stores and must be the same.

mod common;

use common::RedisServer;
use floodgate::algorithm::{Algorithm, FixedWindow, Gcra, Limits, SlidingWindow};
use floodgate::clock::{Clock, ManualClock};
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Decision, Limiter};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

const WINDOW_MS: u64 = 60_000;
const WINDOW: Duration = Duration::from_millis(WINDOW_MS);
const LIMIT: u64 = 10;
const CLIENTS: usize = 1_000;
/// Where the clients start: the middle of an aligned window.
const START: u64 = 28_333_334 * WINDOW_MS + WINDOW_MS / 2;

fn client(i: usize) -> String {
    format!("client-{i}")
}

/// `alg` on Redis and in memory, sharing one manual clock.
struct Both<A> {
    clock: ManualClock,
    redis: Limiter<A>,
    memory: Limiter<A>,
}

fn both<A: Algorithm>(server: &RedisServer, alg: A, name: &str) -> Both<A> {
    let clock = ManualClock::new(START);
    let build = |store: Store| {
        Limiter::builder(store, alg.clone())
            .name(name.replace(' ', "-"))
            .clock(clock.clone())
            // Errors, not silent fail-open decisions, on a loaded machine.
            .on_store_failure(FailurePolicy::ReturnError)
            .timeout(Duration::from_secs(10))
            .circuit_breaker(CircuitBreaker::disabled())
            .build()
            .unwrap()
    };
    Both {
        redis: build(RedisStore::from_url(&server.url()).unwrap().into()),
        memory: build(MemoryStore::new().into()),
        clock,
    }
}

impl<A: Algorithm> Both<A> {
    /// One request of `key` on both stores, which must decide the same.
    async fn check(&self, key: &str) -> Decision {
        let r = self.redis.check(key, 1).await.unwrap();
        let m = self.memory.check(key, 1).await.unwrap();
        assert_eq!(r, m, "{key} at {}", self.clock.now_ms());
        r
    }
}

/// How many of `instants` fall in each tenth of the window (by their phase:
/// the instant modulo the window).
fn tenths(instants: &[u64]) -> [usize; 10] {
    let mut out = [0; 10];
    for t in instants {
        out[((t % WINDOW_MS) * 10 / WINDOW_MS) as usize] += 1;
    }
    out
}

/// The reset instant of each of [`CLIENTS`] keys after one request each,
/// on both stores; on Redis all at once (on the test's one thread, each
/// task queues its decision when first polled, before the store's task
/// sends them: calls of many decisions, each with its own key's offset).
async fn resets<A: Algorithm>(server: &RedisServer, b: &Both<A>) -> Vec<u64> {
    let calls = server.command_calls("fcall").unwrap_or(0);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CLIENTS {
        let redis = b.redis.clone();
        tasks.spawn(async move { (i, redis.check(&client(i), 1).await.unwrap()) });
    }
    let mut on_redis = vec![None; CLIENTS];
    while let Some(done) = tasks.join_next().await {
        let (i, d) = done.unwrap();
        on_redis[i] = Some(d);
    }
    let calls = server.command_calls("fcall").unwrap_or(0) - calls;
    assert!(calls <= CLIENTS as u64 / 10, "{calls} calls: not joined");
    let mut out = Vec::with_capacity(CLIENTS);
    for (i, r) in on_redis.into_iter().enumerate() {
        let r = r.unwrap();
        let m = b.memory.check(&client(i), 1).await.unwrap();
        assert_eq!(r, m, "{}", client(i));
        assert!(r.allowed());
        assert!(r.reset_after() > Duration::ZERO && r.reset_after() <= 2 * WINDOW);
        out.push(START + r.reset_after().as_millis() as u64);
    }
    out
}

/// The reset instants of jittered keys spread over the window (no tenth
/// holds more than twice its share); without jitter they are one instant.
async fn resets_spread<A: Algorithm>(server: &RedisServer, what: &str, plain: A, jittered: A) {
    let aligned = tenths(&resets(server, &both(server, plain, &format!("{what}-plain"))).await);
    let spread =
        tenths(&resets(server, &both(server, jittered, &format!("{what}-jittered"))).await);
    println!("{what}: reset instants of {CLIENTS} keys per tenth of the window");
    println!("  aligned:  {aligned:?}");
    println!("  jittered: {spread:?}");
    assert_eq!(aligned.iter().max(), Some(&CLIENTS), "{aligned:?}");
    let share = CLIENTS / 10;
    assert!(spread.iter().all(|&n| n <= 2 * share), "{what}: {spread:?}");
}

#[tokio::test]
async fn reset_instants_spread_over_the_window() {
    let server = RedisServer::start();
    let fw = FixedWindow::new(LIMIT, WINDOW);
    resets_spread(&server, "fixed window", fw, fw.jittered()).await;
    let sw = SlidingWindow::new(LIMIT, WINDOW);
    resets_spread(&server, "sliding window", sw, sw.jittered()).await;
}

/// [`CLIENTS`] clients, each sending as fast as it is admitted and, once
/// denied, waiting exactly its `Retry-After`; from [`START`], for two
/// windows. Returns the admissions after the start (the start itself is
/// one herd whatever the windows) in the busiest 100 ms, and in all.
async fn herd<A: Algorithm>(server: &RedisServer, alg: A, name: &str) -> (usize, usize) {
    let b = both(server, alg, name);
    let end = START + 2 * WINDOW_MS;
    let mut due: BinaryHeap<Reverse<(u64, usize)>> =
        (0..CLIENTS).map(|c| Reverse((START, c))).collect();
    let mut bins = vec![0usize; (2 * WINDOW_MS / 100) as usize];
    let mut admitted = 0;
    while let Some(Reverse((t, c))) = due.pop() {
        b.clock.set(t);
        // Never more than the limit in a row: a guard, the limit denies first.
        for _ in 0..=LIMIT {
            let d = b.check(&client(c)).await;
            if d.allowed() {
                if t > START {
                    bins[((t - START) / 100) as usize] += 1;
                    admitted += 1;
                }
                continue;
            }
            let retry = d.retry_after().expect("a cost of 1 always fits later");
            assert!(retry > Duration::ZERO, "{name}: {d:?}");
            let next = t + retry.as_millis() as u64;
            if next < end {
                due.push(Reverse((next, c)));
            }
            break;
        }
    }
    (bins.into_iter().max().unwrap_or(0), admitted)
}

/// With jitter, the busiest 100 ms after the clients' resets admits at most
/// a fifth of what it admits without.
async fn herd_cured<A: Algorithm>(server: &RedisServer, what: &str, plain: A, jittered: A) {
    let (herd_peak, herd_all) = herd(server, plain, &format!("{what}-herd")).await;
    let (peak, all) = herd(server, jittered, &format!("{what}-cured")).await;
    println!(
        "{what}: {CLIENTS} clients over two windows after the start: busiest 100 ms \
         admits {herd_peak} of {herd_all} aligned, {peak} of {all} jittered ({:.3}x)",
        peak as f64 / herd_peak as f64
    );
    // Both admit about the same in all: the limit holds either way.
    assert!(herd_all.abs_diff(all) <= herd_all / 5, "{herd_all} {all}");
    assert!(herd_peak >= CLIENTS, "no herd to cure: {herd_peak}");
    assert!(5 * peak <= herd_peak, "{what}: {peak} of {herd_peak}");
}

#[tokio::test]
async fn jitter_cures_the_herd_at_reset() {
    let server = RedisServer::start();
    let fw = FixedWindow::new(LIMIT, WINDOW);
    herd_cured(&server, "fixed window", fw, fw.jittered()).await;
    let sw = SlidingWindow::new(LIMIT, WINDOW);
    herd_cured(&server, "sliding window", sw, sw.jittered()).await;
}

/// Every key floodgate wrote on `server` under limiter `name`, with its
/// TTL in ms.
fn keys_of(server: &RedisServer, name: &str) -> Vec<(String, i64)> {
    let keys: Vec<String> = server.cmd(&["KEYS", &format!("floodgate:{name}:*")]);
    keys.into_iter()
        .map(|k| {
            let ttl = server.cmd(&["PTTL", &k]);
            (k, ttl)
        })
        .collect()
}

/// A jittered key lives until its shifted window's reset and the scripts'
/// one second of slack (no immortal key, none gone before its reset), and
/// its state is apart from the unjittered limit's of the same name.
#[tokio::test]
async fn jittered_keys_expire_with_their_window_and_keep_apart() {
    let server = RedisServer::start();
    let fw = FixedWindow::new(LIMIT, WINDOW);
    let sw = SlidingWindow::new(LIMIT, WINDOW);
    for (name, tag, d) in [
        (
            "fw",
            "fwj",
            both(&server, fw.jittered(), "fw").check("ana").await,
        ),
        (
            "sw",
            "swj",
            both(&server, sw.jittered(), "sw").check("ana").await,
        ),
    ] {
        let keys = keys_of(&server, name);
        assert_eq!(keys.len(), 1, "{keys:?}");
        let (key, ttl) = &keys[0];
        assert_eq!(key, &format!("floodgate:{name}:{tag}:{{ana}}"));
        // PX is relative: the TTL is the reset plus 1000 ms, less the few
        // ms since the write.
        let want = d.reset_after().as_millis() as i64 + 1_000;
        assert!(
            *ttl <= want && *ttl > want - 2_000,
            "{key}: {ttl} for {d:?}"
        );
    }
    // The unjittered limit of the same name: a quota of its own, on
    // Redis (which keeps the jittered request above).
    let plain = both(&server, fw, "fw").redis;
    for _ in 0..LIMIT {
        assert!(plain.check("ana", 1).await.unwrap().allowed());
    }
    assert!(plain.check("ana", 1).await.unwrap().denied());
    let jittered = both(&server, fw.jittered(), "fw").redis;
    let d = jittered.check("ana", 1).await.unwrap();
    assert_eq!(d.remaining(), LIMIT - 2, "{d:?}");
    assert_eq!(keys_of(&server, "fw").len(), 2);
}

/// The windows of a key start at `k × window + offset`: a jittered key
/// admitted up to the limit resets at an instant of its own, the same on
/// both stores, and `Retry-After` is exact (one ms earlier is still
/// denied; at it, a full window starts).
#[tokio::test]
async fn retry_after_is_exact_for_the_shifted_window() {
    let server = RedisServer::start();
    let b = both(&server, FixedWindow::new(LIMIT, WINDOW).jittered(), "exact");
    // (when, client, admitted?), in time order once all are full.
    let mut probes = Vec::new();
    for c in 0..20 {
        let key = client(c);
        for _ in 0..LIMIT {
            assert!(b.check(&key).await.allowed());
        }
        let denied = b.check(&key).await;
        let retry = denied.retry_after().unwrap();
        assert_eq!(retry, denied.reset_after(), "{key}");
        assert!(
            retry > Duration::ZERO && retry <= WINDOW,
            "{key}: {retry:?}"
        );
        let at = START + retry.as_millis() as u64;
        probes.extend([(at - 1, c, false), (at, c, true)]);
    }
    probes.sort_unstable();
    let resets: std::collections::HashSet<u64> =
        probes.iter().map(|(t, ..)| t % WINDOW_MS).collect();
    assert!(resets.len() > 20, "20 keys, resets at {resets:?}");
    for (t, c, admitted) in probes {
        b.clock.set(t);
        let d = b.check(&client(c)).await;
        assert_eq!(d.allowed(), admitted, "{} at {t}: {d:?}", client(c));
        if admitted {
            // A full window from the key's shifted boundary.
            assert_eq!(d.reset_after(), WINDOW, "{}", client(c));
        }
    }
}

/// Several limits on one key, jittered and not, decided many to a call on
/// Redis: each request's parameters are read at their place (a jittered
/// window has one more), and every decision is the memory twin's.
#[tokio::test]
async fn jittered_and_aligned_limits_together_many_to_a_call() {
    let server = RedisServer::start();
    let limits = Limits::new("fw", FixedWindow::new(3, WINDOW).jittered())
        .try_with("gcra", Gcra::new(5, WINDOW))
        .unwrap()
        .try_with("sw", SlidingWindow::new(4, WINDOW).jittered())
        .unwrap()
        .try_with("aligned", SlidingWindow::new(4, WINDOW))
        .unwrap();
    let b = both(&server, limits, "together");
    for step in 0..6 {
        b.clock.set(START + step * 7_919);
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..100 {
            let redis = b.redis.clone();
            tasks.spawn(async move { (i, redis.check_all(&client(i), 1).await.unwrap()) });
        }
        while let Some(done) = tasks.join_next().await {
            let (i, r) = done.unwrap();
            let m = b.memory.check_all(&client(i), 1).await.unwrap();
            assert_eq!(r.each(), m.each(), "{} at step {step}", client(i));
        }
    }
}
