//! ns per in-memory decision: floodgate's `Limiter::check` on `MemoryStore`
//! (GCRA and token bucket) against governor's `DefaultKeyedRateLimiter`,
//! from a crate of its own, as a user calls them.
//!
//! Each decision's whole result is used, as a service uses it: whether it
//! was admitted, and its numbers (limit, remaining, reset, retry), which a
//! service writes into headers; for governor, its `check_key` result (its
//! keyed limiter as `RateLimiter::keyed` makes it, which reports nothing
//! more on admission).
//! floodgate's `check` is polled from two functions (one per algorithm
//! type here, and a third generic caller), so the compiler cannot fit the
//! call to one shape of its result.
//!
//! 10 000 keys (`client-0` ..), visited in turn, a quota no key reaches (the
//! full read-decide-write path every time); 400 000 decisions a round, 9
//! rounds with the contenders interleaved, medians.
//!
//! ```text
//! cargo run --release                  # the table
//! cargo run --release -- profile gcra  # 2 000 000 decisions of one, for callgrind
//! ```

use floodgate::algorithm::{Algorithm, Gcra, TokenBucket};
use floodgate::store::MemoryStore;
use floodgate::{Decision, Limiter};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

const KEYS: usize = 10_000;
const LIMIT: u32 = 1_000_000;
const PER_ROUND: usize = 400_000;
const ROUNDS: usize = 9;

/// A memory-store decision is ready on its first poll: no executor's
/// bookkeeping is measured (governor's API is synchronous).
fn poll_once<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a MemoryStore decision never waits"),
    }
}

/// What a service takes from a decision: all of it.
#[inline(never)]
fn use_decision(d: &Decision) -> u64 {
    let retry = d.retry_after().map_or(0, |r| r.as_millis() as u64);
    black_box((d.allowed(), d.limit(), d.remaining(), d.reset_after(), retry, d.reason()));
    u64::from(d.allowed())
}

/// The generic caller a service's middleware would be.
fn decide<A: Algorithm>(limiter: &Limiter<A>, key: &str) -> u64 {
    match poll_once(limiter.check(key, 1)) {
        Ok(d) => use_decision(&d),
        Err(e) => panic!("the memory store never fails: {e}"),
    }
}

fn run_gcra(limiter: &Limiter<Gcra>, keys: &[String], n: usize) -> u64 {
    let mut admitted = 0;
    for i in 0..n {
        if let Ok(d) = poll_once(limiter.check(black_box(&keys[i % KEYS]), 1)) {
            admitted += use_decision(&d);
        }
    }
    admitted
}

fn run_token_bucket(limiter: &Limiter<TokenBucket>, keys: &[String], n: usize) -> u64 {
    let mut admitted = 0;
    for i in 0..n {
        admitted += decide(limiter, black_box(&keys[i % KEYS]));
    }
    admitted
}

fn run_governor(limiter: &DefaultKeyedRateLimiter<String>, keys: &[String], n: usize) -> u64 {
    let mut admitted = 0;
    for i in 0..n {
        match limiter.check_key(black_box(&keys[i % KEYS])) {
            Ok(()) => admitted += 1,
            Err(not_until) => {
                black_box(not_until);
            }
        }
    }
    admitted
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let keys: Vec<String> = (0..KEYS).map(|i| format!("client-{i}")).collect();
    let gcra = Limiter::new(
        MemoryStore::new(),
        Gcra::new(u64::from(LIMIT), Duration::from_secs(1)),
    );
    let bucket = Limiter::new(
        MemoryStore::new(),
        TokenBucket::new(u64::from(LIMIT), f64::from(LIMIT)),
    );
    let governor: DefaultKeyedRateLimiter<String> =
        RateLimiter::keyed(Quota::per_second(NonZeroU32::new(LIMIT).unwrap()));

    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("profile") {
        let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
        let t = Instant::now();
        let admitted = match args.get(2).map(String::as_str) {
            Some("gcra") => run_gcra(&gcra, &keys, n),
            Some("token_bucket") => run_token_bucket(&bucket, &keys, n),
            Some("governor") => run_governor(&governor, &keys, n),
            other => panic!("profile gcra | token_bucket | governor, not {other:?}"),
        };
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        println!("{admitted} admitted, {ns:.1} ns a decision");
        return;
    }

    let (mut g, mut b, mut gov) = (Vec::new(), Vec::new(), Vec::new());
    let ns = |t: Instant| t.elapsed().as_nanos() as f64 / PER_ROUND as f64;
    // Warm: every key in every limiter.
    run_gcra(&gcra, &keys, KEYS);
    run_token_bucket(&bucket, &keys, KEYS);
    run_governor(&governor, &keys, KEYS);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        assert_eq!(run_governor(&governor, &keys, PER_ROUND), PER_ROUND as u64);
        gov.push(ns(t));
        let t = Instant::now();
        assert_eq!(run_gcra(&gcra, &keys, PER_ROUND), PER_ROUND as u64);
        g.push(ns(t));
        let t = Instant::now();
        assert_eq!(run_token_bucket(&bucket, &keys, PER_ROUND), PER_ROUND as u64);
        b.push(ns(t));
    }
    let (g, b, gov) = (median(g), median(b), median(gov));
    println!("one thread, {KEYS} keys, medians of {ROUNDS} rounds of {PER_ROUND}:");
    println!("  governor keyed     {gov:6.1} ns a decision");
    println!("  floodgate GCRA     {g:6.1} ns  {:.2}x governor", g / gov);
    println!("  floodgate bucket   {b:6.1} ns  {:.2}x governor", b / gov);
}
