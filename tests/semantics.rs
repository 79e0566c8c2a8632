//! Hand-computed cases that pin each algorithm's semantics, on both stores.

mod common;

use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Decision, Limiter};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A limiter on each store, sharing one manual clock at 0.
struct Both<A> {
    clock: ManualClock,
    limiters: Vec<Limiter<A>>,
    _redis: RedisServer,
}

fn both<A: Algorithm>(alg: A) -> Both<A> {
    let redis = RedisServer::start();
    let clock = ManualClock::new(0);
    let stores: Vec<Store> = vec![
        MemoryStore::new().into(),
        RedisStore::from_url(&redis.url()).unwrap().into(),
    ];
    let limiters = stores
        .into_iter()
        .map(|s| {
            Limiter::builder(s, alg.clone())
                .clock(clock.clone())
                // Errors, not silent fail-open decisions, on a loaded machine.
                .on_store_failure(FailurePolicy::ReturnError)
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap()
        })
        .collect();
    Both {
        clock,
        limiters,
        _redis: redis,
    }
}

impl<A: Algorithm> Both<A> {
    fn at(&self, t: u64) -> &Self {
        self.clock.set(t);
        self
    }

    /// `check` on both stores; they must agree.
    async fn check(&self, cost: u64) -> Decision {
        let mut out = Vec::new();
        for l in &self.limiters {
            out.push(l.check("k", cost).await.unwrap());
        }
        assert_eq!(out[0], out[1], "memory vs redis");
        out[0]
    }
}

fn allowed(remaining: u64, reset: u64, delay: u64) -> (bool, u64, u64, Option<u64>, u64) {
    (true, remaining, reset, None, delay)
}

fn denied(remaining: u64, reset: u64, retry: Option<u64>) -> (bool, u64, u64, Option<u64>, u64) {
    (false, remaining, reset, retry, 0)
}

fn brief(d: Decision) -> (bool, u64, u64, Option<u64>, u64) {
    (
        d.allowed(),
        d.remaining(),
        d.reset_after().as_millis() as u64,
        d.retry_after().map(|r| r.as_millis() as u64),
        d.delay().as_millis() as u64,
    )
}

#[tokio::test]
async fn gcra_burst_then_steady_rate() {
    // 10 per second: one every 100 ms; burst 3.
    let g = both(Gcra::new(10, ms(1000)).try_burst(3).unwrap());
    assert_eq!(brief(g.at(0).check(1).await), allowed(2, 100, 0));
    assert_eq!(brief(g.at(0).check(1).await), allowed(1, 200, 0));
    assert_eq!(brief(g.at(0).check(1).await), allowed(0, 300, 0));
    // The 4th at once: wait one interval.
    assert_eq!(brief(g.at(0).check(1).await), denied(0, 300, Some(100)));
    assert_eq!(brief(g.at(60).check(1).await), denied(0, 240, Some(40)));
    // Steady: one per 100 ms.
    assert_eq!(brief(g.at(100).check(1).await), allowed(0, 300, 0));
    assert_eq!(brief(g.at(150).check(1).await), denied(0, 250, Some(50)));
    // Rested long enough for the whole burst again.
    assert_eq!(brief(g.at(1000).check(3).await), allowed(0, 300, 0));
}

#[tokio::test]
async fn gcra_cost_above_burst_never_fits_and_costs_nothing() {
    let g = both(Gcra::new(10, ms(1000)).try_burst(3).unwrap());
    assert_eq!(brief(g.at(0).check(4).await), denied(3, 0, None));
    assert_eq!(brief(g.at(0).check(2).await), allowed(1, 200, 0));
    // Cost 2 with 1 left: wait for one more interval.
    assert_eq!(brief(g.at(0).check(2).await), denied(1, 200, Some(100)));
    // u64::MAX is clamped, not overflowed.
    assert_eq!(brief(g.at(0).check(u64::MAX).await), denied(1, 200, None));
}

#[tokio::test]
async fn gcra_default_burst_is_the_limit() {
    let g = both(Gcra::new(5, ms(1000)));
    for left in (0..5).rev() {
        assert_eq!(g.at(0).check(1).await.remaining(), left);
    }
    assert_eq!(brief(g.at(0).check(1).await), denied(0, 1000, Some(200)));
}

#[tokio::test]
async fn leaky_bucket_delays_queue_and_rejects_when_full() {
    // Queue of 3, drains 10/s: 100 ms per request.
    let b = both(LeakyBucket::new(3, 10.0));
    assert_eq!(brief(b.at(0).check(1).await), allowed(2, 100, 0));
    assert_eq!(brief(b.at(0).check(1).await), allowed(1, 200, 100));
    assert_eq!(brief(b.at(0).check(1).await), allowed(0, 300, 200));
    // Full: rejected; room for one more after 100 ms of draining.
    assert_eq!(brief(b.at(0).check(1).await), denied(0, 300, Some(100)));
    assert_eq!(brief(b.at(50).check(1).await), denied(0, 250, Some(50)));
    // At 100 ms, two are still queued: wait 200 ms.
    assert_eq!(brief(b.at(100).check(1).await), allowed(0, 300, 200));
    // A cost above the capacity never fits.
    assert_eq!(brief(b.at(100).check(4).await), denied(0, 300, None));
    // Drained: a cost of 2 goes at once, the next waits for both.
    assert_eq!(brief(b.at(5000).check(2).await), allowed(1, 200, 0));
    assert_eq!(brief(b.at(5000).check(1).await), allowed(0, 300, 200));
}

#[tokio::test]
async fn token_bucket_spends_budget_on_expensive_calls() {
    // An expensive endpoint costs 5 tokens.
    let b = both(TokenBucket::new(10, 10.0));
    assert_eq!(brief(b.at(0).check(5).await), allowed(5, 500, 0));
    assert_eq!(brief(b.at(0).check(5).await), allowed(0, 1000, 0));
    assert_eq!(brief(b.at(0).check(5).await), denied(0, 1000, Some(500)));
    assert_eq!(brief(b.at(250).check(5).await), denied(2, 750, Some(250)));
    assert_eq!(brief(b.at(500).check(5).await), allowed(0, 1000, 0));
    assert_eq!(brief(b.at(500).check(11).await), denied(0, 1000, None));
}

#[tokio::test]
async fn sliding_log_retry_is_when_enough_entries_leave() {
    let l = both(SlidingLog::new(3, ms(1000)));
    assert_eq!(brief(l.at(0).check(1).await), allowed(2, 1000, 0));
    assert_eq!(brief(l.at(100).check(1).await), allowed(1, 1000, 0));
    assert_eq!(brief(l.at(200).check(1).await), allowed(0, 1000, 0));
    // The oldest (t=0) leaves at 1000; the newest at 1200.
    assert_eq!(brief(l.at(300).check(1).await), denied(0, 900, Some(700)));
    // Cost 2 needs the two oldest gone: t=100 leaves at 1100.
    assert_eq!(brief(l.at(300).check(2).await), denied(0, 900, Some(800)));
    // An entry at exactly now - window no longer counts.
    assert_eq!(brief(l.at(1000).check(1).await), allowed(0, 1000, 0));
    // Rejected requests were never recorded.
    assert_eq!(brief(l.at(1100).check(1).await), allowed(0, 1000, 0));
}

#[tokio::test]
async fn sliding_window_weights_the_previous_window() {
    let s = both(SlidingWindow::new(10, ms(1000)));
    for _ in 0..10 {
        s.at(500).check(1).await;
    }
    // Current window full: only in the next window, once the weight of
    // these 10 drops below 10: 1 ms into it (10 × 0.999 = 9.99).
    assert_eq!(brief(s.at(600).check(1).await), denied(0, 1400, Some(401)));
    assert_eq!(brief(s.at(1001).check(1).await), allowed(0, 1999, 0));
    // 250 ms into the next window: 10 × 0.75 + 1 = 8.5, so 8 used: room for 2.
    assert_eq!(brief(s.at(1250).check(2).await), allowed(0, 1750, 0));
    // 7.5 + 3 = 10.5 → 10 used; room for 1 once the estimate drops below 10:
    // 10 × (1000 − e)/1000 + 3 < 10 ⇔ e > 300.
    assert_eq!(brief(s.at(1250).check(1).await), denied(0, 1750, Some(51)));
}

#[tokio::test]
async fn fixed_window_counts_per_aligned_window() {
    let f = both(FixedWindow::new(2, ms(1000)));
    assert_eq!(brief(f.at(900).check(1).await), allowed(1, 100, 0));
    assert_eq!(brief(f.at(950).check(1).await), allowed(0, 50, 0));
    assert_eq!(brief(f.at(990).check(1).await), denied(0, 10, Some(10)));
    assert_eq!(brief(f.at(1000).check(2).await), allowed(0, 1000, 0));
    assert_eq!(brief(f.at(1000).check(3).await), denied(0, 1000, None));
}

#[tokio::test]
async fn cost_zero_and_peek_consume_nothing() {
    let t = both(TokenBucket::new(3, 1.0));
    assert_eq!(brief(t.at(0).check(0).await), allowed(3, 0, 0));
    t.at(0).check(2).await;
    // A peek reports the key as it is: 1 left, full again in 2 s.
    for l in &t.limiters {
        let p = l.peek("k").await.unwrap();
        assert_eq!(brief(p), allowed(1, 2000, 0));
        let p = l.peek("k").await.unwrap();
        assert_eq!(brief(p), allowed(1, 2000, 0));
    }
    assert_eq!(brief(t.at(0).check(1).await), allowed(0, 3000, 0));
    assert_eq!(brief(t.at(0).check(1).await), denied(0, 3000, Some(1000)));
}

/// Limiters share a key's state exactly when their prefix, name and
/// algorithm are the same, on the memory store as on Redis.
#[tokio::test]
async fn limiters_share_state_exactly_when_prefix_name_and_algorithm_match() {
    let redis = RedisServer::start();
    let stores: Vec<Store> = vec![
        MemoryStore::new().into(),
        RedisStore::from_url(&redis.url()).unwrap().into(),
    ];
    for store in stores {
        let clock = ManualClock::new(1_000_000);
        fn make<A: Algorithm>(
            store: &Store,
            clock: &ManualClock,
            at: (&str, &str),
            alg: A,
        ) -> Limiter<A> {
            Limiter::builder(store.clone(), alg)
                .prefix(at.0)
                .name(at.1)
                .clock(clock.clone())
                .on_store_failure(FailurePolicy::ReturnError)
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap()
        }
        let tb = || TokenBucket::new(2, 1.0);
        let first = make(&store, &clock, ("p", "n"), tb());
        assert!(first.check("ana", 2).await.unwrap().allowed());
        // The same prefix, name and algorithm: the same bucket, now empty.
        let same = make(&store, &clock, ("p", "n"), tb());
        assert!(same.check("ana", 1).await.unwrap().denied(), "{store:?}");
        // Any of the three different: a bucket of its own.
        for at in [("q", "n"), ("p", "m")] {
            let other = make(&store, &clock, at, tb());
            assert!(
                other.check("ana", 2).await.unwrap().allowed(),
                "{at:?} {store:?}"
            );
        }
        let gcra = make(
            &store,
            &clock,
            ("p", "n"),
            Gcra::new(2, Duration::from_secs(2)),
        );
        assert!(gcra.check("ana", 2).await.unwrap().allowed(), "{store:?}");
        // And another user key is another bucket.
        assert!(first.check("bob", 2).await.unwrap().allowed(), "{store:?}");
    }
}
