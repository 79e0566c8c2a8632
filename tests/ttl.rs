//! Nothing floodgate writes to Redis outlives its use.
//!
//! Random traffic (keys, costs, peeks, costs of 0 and over the limit, pauses)
//! runs through all six algorithms on a real Redis with short windows and
//! fast refills, so every state is useless within about half a second. Then:
//!
//! * every key in Redis has a TTL, checked all along the traffic (`PTTL` is
//!   never -1), and no TTL is longer than the algorithm needs plus the
//!   scripts' 1 s slack;
//! * once the TTLs have passed, Redis holds no key at all (`DBSIZE` polled
//!   down to 0 within 5 s).
//!
//! Once with Redis' own clock (`TIME`: no clock on the limiter, as in
//! production) and once with a [`ManualClock`] that jumps ahead randomly.
//! The seed of the traffic is printed on failure; set `FLOODGATE_SEED` to
//! replay one.

mod common;

use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::store::RedisStore;
use floodgate::{Decision, Error, Limiter};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The scripts' `SLACK`: keys outlive their use by this much.
const SLACK_MS: i64 = 1000;
/// The limit (capacity, burst) of every algorithm.
const LIMIT: u64 = 5;
/// How long the traffic runs, in real time.
const TRAFFIC: Duration = Duration::from_millis(1500);
/// How long Redis may take to drop every key once the traffic stopped: the
/// longest TTL (1.5 s) plus Redis' active expiry, with room for a loaded
/// machine.
const DRAIN: Duration = Duration::from_secs(5);

type Check = Arc<dyn Fn(String, u64, bool) -> DecisionFuture + Send + Sync>;

type DecisionFuture = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send>>;

/// One algorithm: its key tag, the longest TTL its state may need (without
/// the slack), and its limiter.
struct Alg {
    tag: &'static str,
    max_ttl_ms: i64,
    check: Check,
}

fn alg<A: Algorithm>(
    tag: &'static str,
    max_ttl_ms: i64,
    a: A,
    store: &RedisStore,
    clock: Option<&ManualClock>,
) -> Alg {
    let mut b = Limiter::builder(store.clone(), a).prefix("ttl");
    if let Some(c) = clock {
        b = b.clock(c.clone());
    }
    let limiter = b.build().unwrap();
    Alg {
        tag,
        max_ttl_ms,
        check: Arc::new(move |key: String, cost: u64, peek: bool| {
            let limiter = limiter.clone();
            Box::pin(async move {
                if peek {
                    limiter.peek(&key).await
                } else {
                    limiter.check(&key, cost).await
                }
            })
        }),
    }
}

/// All six, with windows of 200 ms and buckets that refill in 500 ms.
fn algorithms(store: &RedisStore, clock: Option<&ManualClock>) -> Vec<Alg> {
    let w = Duration::from_millis(200);
    vec![
        alg("fw", 200, FixedWindow::new(LIMIT, w), store, clock),
        alg("sl", 200, SlidingLog::new(LIMIT, w), store, clock),
        // The current window and the one after it.
        alg("sw", 400, SlidingWindow::new(LIMIT, w), store, clock),
        alg("tb", 500, TokenBucket::new(LIMIT, 10.0), store, clock),
        alg("lb", 500, LeakyBucket::new(LIMIT, 10.0), store, clock),
        alg("gcra", 200, Gcra::new(LIMIT, w), store, clock),
    ]
}

/// xorshift64*: small, seedable, good enough for traffic.
struct Rng(u64);

impl Rng {
    fn seeded() -> (Self, u64) {
        let seed = std::env::var("FLOODGATE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        (Self(seed | 1), seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Every key of ours has a TTL, and none longer than its algorithm needs.
/// Returns how many keys were looked at.
fn assert_all_keys_expire(server: &RedisServer, algs: &[Alg], seed: u64) -> usize {
    let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
    for key in &keys {
        let pttl: i64 = server.cmd(&["PTTL", key]);
        // -2: expired between KEYS and PTTL, which is fine.
        assert_ne!(pttl, -1, "{key} has no TTL (seed {seed})");
        let tag = key.split(':').nth(2).unwrap_or_default();
        let alg = algs
            .iter()
            .find(|a| a.tag == tag)
            .unwrap_or_else(|| panic!("{key}: a key that is not ours (seed {seed})"));
        assert!(
            pttl <= alg.max_ttl_ms + SLACK_MS,
            "{key}: TTL {pttl} ms, more than {} + {SLACK_MS} (seed {seed})",
            alg.max_ttl_ms
        );
    }
    keys.len()
}

/// Random traffic until `TRAFFIC` has passed, checking TTLs every 50 decisions;
/// `tick` moves a manual clock, if any. Returns the decisions made and the
/// most keys seen at once.
async fn traffic(
    server: &RedisServer,
    algs: &[Alg],
    rng: &mut Rng,
    seed: u64,
    mut tick: impl FnMut(&mut Rng),
) -> (usize, usize) {
    let start = Instant::now();
    let (mut decisions, mut most_keys) = (0, 0);
    while start.elapsed() < TRAFFIC {
        tick(rng);
        let alg = &algs[rng.below(algs.len() as u64) as usize];
        let key = format!("k{}", rng.below(20));
        let cost = match rng.below(20) {
            0 => 0,
            1 => u64::MAX,
            2 => LIMIT + 1,
            _ => 1 + rng.below(LIMIT),
        };
        let peek = rng.below(10) == 0;
        let d = (alg.check)(key, cost, peek).await.unwrap();
        assert!(!d.is_degraded());
        decisions += 1;
        if rng.below(40) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.below(60))).await;
        }
        if decisions % 50 == 0 {
            most_keys = most_keys.max(assert_all_keys_expire(server, algs, seed));
        }
    }
    most_keys = most_keys.max(assert_all_keys_expire(server, algs, seed));
    (decisions, most_keys)
}

/// Polls `DBSIZE` until Redis is empty; fails after `DRAIN`.
async fn assert_drains(server: &RedisServer, seed: u64) -> Duration {
    let start = Instant::now();
    loop {
        let n: u64 = server.cmd(&["DBSIZE"]);
        if n == 0 {
            return start.elapsed();
        }
        let keys: Vec<String> = server.cmd(&["KEYS", "*"]);
        assert!(
            start.elapsed() < DRAIN,
            "{n} keys still there {DRAIN:?} after the traffic (seed {seed}): {keys:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_clock_every_key_has_a_ttl_and_all_expire() {
    let server = RedisServer::start();
    let store = RedisStore::from_url(&server.url()).unwrap();
    let algs = algorithms(&store, None);
    let (mut rng, seed) = Rng::seeded();
    let (decisions, most_keys) = traffic(&server, &algs, &mut rng, seed, |_| {}).await;
    assert!(decisions > 100, "only {decisions} decisions");
    assert!(most_keys > 0, "the traffic never wrote a key");
    let drained = assert_drains(&server, seed).await;
    println!("seed {seed}: {decisions} decisions, up to {most_keys} keys, empty {drained:?} after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_clock_every_key_has_a_ttl_and_all_expire() {
    let server = RedisServer::start();
    let store = RedisStore::from_url(&server.url()).unwrap();
    let clock = ManualClock::new(common::T0);
    let algs = algorithms(&store, Some(&clock));
    let (mut rng, seed) = Rng::seeded();
    let c = clock.clone();
    let (decisions, most_keys) = traffic(&server, &algs, &mut rng, seed, move |rng| {
        // Mostly small steps, sometimes a jump past every window.
        let step = match rng.below(10) {
            0 => 1000 + rng.below(5000),
            1..=4 => 0,
            _ => rng.below(100),
        };
        c.advance(Duration::from_millis(step));
    })
    .await;
    assert!(decisions > 100, "only {decisions} decisions");
    assert!(most_keys > 0, "the traffic never wrote a key");
    let drained = assert_drains(&server, seed).await;
    println!("seed {seed}: {decisions} decisions, up to {most_keys} keys, empty {drained:?} after");
}

/// A state with the most a key can hold (a full sliding log, an empty
/// bucket, a GCRA pushed a whole burst ahead) still has a bounded TTL, and
/// a key that is only peeked at, or charged 0 or more than the limit, is
/// never written.
#[tokio::test]
async fn reads_and_refusals_write_nothing_and_full_states_expire() {
    let server = RedisServer::start();
    let store = RedisStore::from_url(&server.url()).unwrap();
    let clock = ManualClock::new(common::T0);
    let algs = algorithms(&store, Some(&clock));
    for a in &algs {
        for cost in [0, LIMIT + 1, u64::MAX] {
            (a.check)("untouched".into(), cost, false).await.unwrap();
        }
        (a.check)("untouched".into(), 1, true).await.unwrap();
    }
    let n: u64 = server.cmd(&["DBSIZE"]);
    assert_eq!(n, 0, "reads and refusals wrote keys");
    for a in &algs {
        assert!((a.check)("full".into(), LIMIT, false)
            .await
            .unwrap()
            .allowed());
        assert!(!(a.check)("full".into(), 1, false).await.unwrap().allowed());
    }
    assert_eq!(assert_all_keys_expire(&server, &algs, 0), algs.len());
    assert_drains(&server, 0).await;
}
