//! The local deny cache never denies a request the store would admit, and
//! spares the store the calls of a client hammering while denied.

mod common;

use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::Limiter;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sha2::{Digest, Sha256};
use std::fmt::Write;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// Decisions Redis made: `FCALL`s of floodgate's library.
fn fcall_calls(redis: &RedisServer) -> u64 {
    let info: String = redis.cmd(&["INFO", "commandstats"]);
    info.lines()
        .find(|l| l.starts_with("cmdstat_fcall:"))
        .and_then(|l| l.split("calls=").nth(1))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A limiter of `alg` named `name` on `store` at `clock`, failing with an
/// error, with a deny cache of `cache` keys or none.
fn limiter<A: Algorithm>(
    store: &Store,
    alg: A,
    name: &str,
    clock: &ManualClock,
    cache: Option<usize>,
) -> Limiter<A> {
    let b = Limiter::builder(store.clone(), alg)
        .name(name)
        .clock(clock.clone())
        .on_store_failure(FailurePolicy::ReturnError)
        .timeout(Duration::from_secs(10));
    match cache {
        Some(max) => b.deny_cache(NonZeroUsize::new(max).unwrap()),
        None => b,
    }
    .build()
    .unwrap()
}

/// Same traffic through a cached and an uncached limiter (separate
/// namespaces, one Redis, one clock): the same decision and the same wait
/// (give or take the last ms of rounding, never shorter) every time (denied calls change no state, so skipping them keeps both
/// stores equal). A cached denial keeps the numbers of the original one, so
/// `remaining` of a denial may lag; admissions agree in full.
fn same_answers<A: Algorithm>(
    redis: &RedisServer,
    alg: A,
    ops: &[(u64, u64)],
) -> Result<(), TestCaseError> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    let case = CASE.fetch_add(1, Ordering::Relaxed);
    let clock = ManualClock::new(1_700_000_000_000);
    let store: Store = RedisStore::from_url(&redis.url()).unwrap().into();
    let build = |name: String, cache| limiter(&store, alg.clone(), &name, &clock, cache);
    let (cached, plain) = (
        build(format!("c{case}"), Some(1000)),
        build(format!("p{case}"), None),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        for (i, &(step, cost)) in ops.iter().enumerate() {
            clock.advance(Duration::from_millis(step));
            let (c, p) = (
                cached.check("k", cost).await.unwrap(),
                plain.check("k", cost).await.unwrap(),
            );
            prop_assert_eq!(c.allowed(), p.allowed(), "op {} of {:?}", i, ops);
            // The same wait, or up to 2 ms longer: the store's float
            // arithmetic rounds a fresh wait 1 ms either way, and an aged
            // cached wait keeps a 1 ms margin for it. Never shorter.
            let (cw, pw) = (
                c.retry_after().map(|d| d.as_millis()),
                p.retry_after().map(|d| d.as_millis()),
            );
            prop_assert!(
                cw == pw || matches!((cw, pw), (Some(c), Some(p)) if c > p && c <= p + 2),
                "op {} of {:?}: {:?} vs {:?}",
                i,
                ops,
                cw,
                pw
            );
            if p.allowed() {
                prop_assert_eq!(c, p, "op {} of {:?}", i, ops);
            }
        }
        Ok(())
    })
}

fn ops(max_cost: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    let step = prop_oneof![4 => Just(0u64), 3 => 1..40u64, 1 => 40..2000u64];
    prop::collection::vec((step, 1..=max_cost + 1), 1..50)
}

fn run<A: Algorithm>(strategy: impl Strategy<Value = (A, Vec<(u64, u64)>)>) {
    let redis = RedisServer::start();
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |(alg, ops)| same_answers(&redis, alg, &ops))
        .unwrap();
}

#[test]
fn never_denies_what_the_store_would_admit() {
    let ms = Duration::from_millis;
    run((1..10u64, 50..1500u64).prop_flat_map(|(l, w)| (Just(FixedWindow::new(l, ms(w))), ops(l))));
    run((1..10u64, 50..1500u64).prop_flat_map(|(l, w)| (Just(SlidingLog::new(l, ms(w))), ops(l))));
    run((1..10u64, 50..1500u64)
        .prop_flat_map(|(l, w)| (Just(SlidingWindow::new(l, ms(w))), ops(l))));
    run((1..10u64, 1..40u32)
        .prop_flat_map(|(c, r)| (Just(TokenBucket::new(c, f64::from(r) / 3.0)), ops(c))));
    run((1..10u64, 1..40u32)
        .prop_flat_map(|(c, r)| (Just(LeakyBucket::new(c, f64::from(r))), ops(c))));
    run((1..10u64, 50..1500u64, 1..10u64)
        .prop_flat_map(|(l, p, b)| (Just(Gcra::new(l, ms(p)).try_burst(b).unwrap()), ops(b))));
    run((1..6u64, 2..10u64).prop_flat_map(|(a, b)| {
        let limits = Limits::new("short", FixedWindow::new(a, ms(300)))
            .try_with("long", SlidingLog::new(b, ms(2000)))
            .unwrap();
        (Just(limits), ops(a))
    }));
}

#[tokio::test]
async fn a_client_hammering_while_denied_costs_no_redis_call() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000);
    let store: Store = RedisStore::from_url(&redis.url()).unwrap().into();
    let gcra = Gcra::new(10, Duration::from_secs(1));
    let mut calls = Vec::new();
    for (name, cache) in [("plain", None), ("cached", Some(10_000))] {
        let limiter = limiter(&store, gcra, name, &clock, cache);
        for _ in 0..10 {
            assert!(limiter.check("abuser", 1).await.unwrap().allowed());
        }
        let before = fcall_calls(&redis);
        for i in 0..1000 {
            let d = limiter.check("abuser", 1).await.unwrap();
            assert!(!d.allowed(), "{name}: call {i}");
            assert_eq!(
                d.retry_after(),
                Some(Duration::from_millis(100)),
                "{name}: call {i}"
            );
        }
        calls.push(fcall_calls(&redis) - before);
        // Once the wait is over, the store is asked again, and admits.
        clock.advance(Duration::from_millis(100));
        assert!(
            limiter.check("abuser", 1).await.unwrap().allowed(),
            "{name}"
        );
        clock.advance(Duration::from_secs(5));
    }
    assert_eq!(calls[0], 1000, "without the cache every denial asks Redis");
    assert_eq!(calls[1], 1, "with it only the first does");
}

#[tokio::test]
async fn a_refund_clears_the_cached_denial() {
    let redis = RedisServer::start();
    let store: Store = RedisStore::from_url(&redis.url()).unwrap().into();
    let two = FixedWindow::new(2, Duration::from_secs(60));
    let limiter = limiter(&store, two, "rl", &ManualClock::new(0), Some(100));
    limiter.check("ana", 2).await.unwrap();
    assert!(!limiter.check("ana", 1).await.unwrap().allowed());
    limiter.refund("ana", 1).await.unwrap();
    assert!(
        limiter.check("ana", 1).await.unwrap().allowed(),
        "the refund made room"
    );
    // A cheaper request than the cached denial still asks the store.
    assert!(!limiter.check("ana", 2).await.unwrap().allowed());
    assert!(!limiter.check("ana", 1).await.unwrap().allowed());
}

/// A key longer than 128 bytes is stored as its hash, `#` and the first 16
/// bytes of its SHA-256 in lowercase hex (`hashed_user_key` in
/// `src/store/key.rs`): this long key, and a short key spelled like that.
fn long_key_and_its_spelling() -> (String, String) {
    let long = "long-".repeat(30);
    let mut hash = String::from("#");
    for b in &Sha256::digest(long.as_bytes())[..16] {
        write!(hash, "{b:02x}").unwrap();
    }
    (long, hash)
}

/// A limiter of one request per minute at a standing time on `store`,
/// named `name`, with the deny cache or without.
fn one_per_minute(store: &Store, name: &str, cache: bool) -> Limiter<FixedWindow> {
    let minute = FixedWindow::new(1, Duration::from_secs(60));
    let clock = ManualClock::new(1_700_000_000_000);
    limiter(store, minute, name, &clock, cache.then_some(100))
}

/// The deny cache keeps a long key's hash apart from a short key spelled
/// like it, as the stores do (it used to file both under the same string).
///
/// A denial of one, cached, does not deny the other: each is decided from
/// its own state, whichever comes first. And a refund of one does not clear
/// the other's cached denial. What the cache holds is seen where the store
/// alone would answer otherwise: another limiter of the same name without
/// the cache (another app server) gives room back in the store, which only
/// this limiter's cache does not know of (why the cache is off by default).
async fn keeps_a_hash_apart_from_its_spelling(store: Store) {
    let (long, short) = long_key_and_its_spelling();
    let (long, short) = (("the long key", &*long), ("the short key", &*short));
    let pairs = [(short, long), (long, short)];
    // Denied first, then the other one: admitted, from its own state.
    for (i, ((first_is, first), (then_is, then))) in pairs.into_iter().enumerate() {
        let cached = one_per_minute(&store, &format!("order{i}"), true);
        assert!(cached.check(first, 1).await.unwrap().allowed());
        assert!(!cached.check(first, 1).await.unwrap().allowed());
        let d = cached.check(then, 1).await.unwrap();
        assert!(d.allowed(), "{then_is} after {first_is} was denied: {d:?}");
        assert!(!cached.check(then, 1).await.unwrap().allowed());
        assert!(!cached.check(first, 1).await.unwrap().allowed());
    }
    // Both denied and cached; one refunded here, the other elsewhere.
    for (i, ((refunded_is, refunded), (kept_is, kept))) in pairs.into_iter().enumerate() {
        let name = format!("refund{i}");
        let (cached, elsewhere) = (
            one_per_minute(&store, &name, true),
            one_per_minute(&store, &name, false),
        );
        for (is, key) in [(refunded_is, refunded), (kept_is, kept)] {
            assert!(elsewhere.check(key, 1).await.unwrap().allowed(), "{is}");
            assert!(!cached.check(key, 1).await.unwrap().allowed(), "{is}");
        }
        cached.refund(refunded, 1).await.unwrap();
        elsewhere.refund(kept, 1).await.unwrap();
        let d = elsewhere.peek(kept).await.unwrap();
        assert!(d.allowed(), "the store would admit {kept_is}: {d:?}");
        let d = cached.check(kept, 1).await.unwrap();
        assert!(
            !d.allowed(),
            "refunding {refunded_is} cleared the cached denial of {kept_is}: {d:?}"
        );
        let d = cached.check(refunded, 1).await.unwrap();
        assert!(d.allowed(), "the refund of {refunded_is} made room: {d:?}");
    }
}

#[tokio::test]
async fn a_long_key_s_hash_and_a_short_key_spelled_like_it_are_apart_in_memory() {
    keeps_a_hash_apart_from_its_spelling(MemoryStore::new().into()).await;
}

#[tokio::test]
async fn a_long_key_s_hash_and_a_short_key_spelled_like_it_are_apart_on_redis() {
    let redis = RedisServer::start();
    keeps_a_hash_apart_from_its_spelling(RedisStore::from_url(&redis.url()).unwrap().into()).await;
    // The short key is spelled like what Redis holds for the long one.
    let (_, short) = long_key_and_its_spelling();
    let keys: Vec<String> = redis.cmd(&["KEYS", "*"]);
    let hashed = format!("{{{short}}}");
    assert!(
        keys.iter().any(|k| k.ends_with(&hashed)),
        "{hashed} in {keys:?}"
    );
}
