//! Every entry of both limiters, and both layers over HTTP, while a real
//! `redis-server` is paused (SIGSTOP: connections stay open, nothing is
//! answered) or killed: each call answers within the limiter's timeout plus
//! a margin, as its failure policy says; once Redis is back (SIGCONT, or a
//! restart on the same port) each decides from Redis again within a second.
//!
//! The entries: `check`, `check_all`, `check_with`, `peek`, `refund`,
//! `refund_with`; the concurrency limiter's `acquire`, `peek`, `in_flight`
//! and a lease's `release`; `RateLimitLayer` and `ConcurrencyLimitLayer`
//! behind a real axum server. Each under each failure policy (fail open,
//! fail closed, return the error, fall back to a memory limiter), each with
//! its own limiter, so that each meets the store's silence with a closed
//! circuit (its first calls wait for the timeout; later ones find the
//! circuit open).
//!
//! The bounds are correctness bounds of the failure path, not benchmarks: a
//! 100 ms timeout plus 250 ms for a loaded 2-core machine. And an acquire
//! given up on while Redis was paused, which Redis still runs when it
//! resumes, holds no slot afterwards.
//!
//! The hot-key allotment path has its outage test beside its other tests:
//! `tests/hot_keys.rs` (a held slice decides while Redis is paused or
//! killed, then the failure policy answers within the timeout, and the key
//! is decided from Redis again after a resume or a restart).

mod common;

use axum::{routing::get, Router};
use common::RedisServer;
use floodgate::algorithm::Gcra;
use floodgate::concurrency::{ConcurrencyLimiter, Lease};
use floodgate::failure::FailurePolicy;
use floodgate::key::{Global, Header};
use floodgate::layer::{ConcurrencyLimitLayer, RateLimitLayer};
use floodgate::store::{MemoryStore, RedisStore};
use floodgate::{Decision, Limiter, Reason};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The limiters' timeout (the default).
const TIMEOUT: Duration = Duration::from_millis(100);
/// What a loaded machine may add to it.
const MARGIN: Duration = Duration::from_millis(250);
/// The longest deciding from Redis may take to resume once it is back.
const RESUME: Duration = Duration::from_secs(1);
/// Calls per entry while Redis is down: more than the 5 failures that open
/// the circuit, so both the timeout and the open circuit are met.
const CALLS: usize = 7;
/// The concurrency limit.
const MAX: u64 = 2;

/// A limit no test reaches: every decision Redis makes admits.
fn big() -> Gcra {
    Gcra::new(1_000_000, Duration::from_secs(1))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Policy {
    Open,
    Closed,
    ReturnError,
    Fallback,
}

const POLICIES: [Policy; 4] = [
    Policy::Open,
    Policy::Closed,
    Policy::ReturnError,
    Policy::Fallback,
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Entry {
    Check,
    CheckAll,
    CheckWith,
    Peek,
    Refund,
    RefundWith,
    Acquire,
    LeasePeek,
    InFlight,
    Release,
    HttpRate,
    HttpLease,
}

const ENTRIES: [Entry; 12] = [
    Entry::Check,
    Entry::CheckAll,
    Entry::CheckWith,
    Entry::Peek,
    Entry::Refund,
    Entry::RefundWith,
    Entry::Acquire,
    Entry::LeasePeek,
    Entry::InFlight,
    Entry::Release,
    Entry::HttpRate,
    Entry::HttpLease,
];

/// What one call answered.
#[derive(Debug)]
enum Seen {
    Decided(Decision),
    InFlight(u64),
    Released,
    Http {
        status: u16,
        fields: bool,
        body: String,
    },
    Failed(String),
}

/// One entry under one policy: its own limiters (and app), over its own
/// store.
struct Fixture {
    entry: Entry,
    policy: Policy,
    rate: Limiter<Gcra>,
    leases: ConcurrencyLimiter,
    /// The app's address, for the HTTP entries.
    base: String,
    /// Leases acquired from Redis for `release` to release.
    held: Mutex<Vec<Lease>>,
    http: reqwest::Client,
    /// HTTP calls so far: each has a key of its own.
    calls: AtomicU64,
}

fn failure_policy(policy: Policy, concurrency: bool) -> FailurePolicy {
    match policy {
        Policy::Open => FailurePolicy::FailOpen,
        Policy::Closed => FailurePolicy::FailClosed,
        Policy::ReturnError => FailurePolicy::ReturnError,
        Policy::Fallback if concurrency => FailurePolicy::fallback(
            ConcurrencyLimiter::builder(MemoryStore::new(), MAX)
                .name("local-leases")
                .build()
                .unwrap(),
        ),
        Policy::Fallback => FailurePolicy::fallback(Limiter::new(MemoryStore::new(), big())),
    }
}

impl Fixture {
    async fn new(server: &RedisServer, entry: Entry, policy: Policy) -> Self {
        let store = RedisStore::from_url(&server.url()).unwrap();
        let name = format!("{entry:?}-{policy:?}");
        let rate = Limiter::builder(store.clone(), big())
            .name(format!("rate-{name}"))
            .timeout(TIMEOUT)
            .on_store_failure(failure_policy(policy, false))
            .build()
            .unwrap();
        let leases = ConcurrencyLimiter::builder(store.clone(), MAX)
            .name(format!("leases-{name}"))
            .timeout(TIMEOUT)
            .on_store_failure(failure_policy(policy, true))
            .build()
            .unwrap();
        // The concurrency layer's handler says how many leases Redis holds
        // for its key while it runs: 1 when the layer's own lease is there.
        // Every call has a key of its own.
        // A limiter of its own (same store and name, so the same leases) with
        // a short timeout, so that while Redis is down the handler adds
        // little to the layer's own wait.
        let counted = ConcurrencyLimiter::builder(store.clone(), MAX)
            .name(format!("leases-{name}"))
            .timeout(Duration::from_millis(20))
            .build()
            .unwrap();
        let app = Router::new()
            .route(
                "/rate",
                get(|| async { "ok" }).layer(RateLimitLayer::new(rate.clone(), Global::new())),
            )
            .route(
                "/lease",
                get(move |headers: http::HeaderMap| {
                    let counted = counted.clone();
                    async move {
                        let key = headers["x-key"].to_str().unwrap_or_default().to_owned();
                        match counted.peek(&key).await {
                            Ok(d) if !d.is_degraded() => (MAX - d.remaining()).to_string(),
                            _ => "unknown".to_owned(),
                        }
                    }
                })
                .layer(ConcurrencyLimitLayer::new(
                    leases.clone(),
                    Header::try_new("x-key").unwrap(),
                )),
            );
        let base = common::http::serve(app).await;
        Self {
            entry,
            policy,
            rate,
            leases,
            base,
            held: Mutex::new(Vec::new()),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            calls: AtomicU64::new(0),
        }
    }

    /// One call of the entry.
    async fn call(&self) -> Seen {
        let decided = |r: Result<Decision, floodgate::Error>| match r {
            Ok(d) => Seen::Decided(d),
            Err(e) => Seen::Failed(e.to_string()),
        };
        let (rate, other) = (&self.rate, Gcra::new(2_000_000, Duration::from_secs(1)));
        match self.entry {
            Entry::Check => decided(rate.check("k", 1).await),
            Entry::CheckAll => decided(rate.check_all("k", 1).await.map(|d| *d.overall())),
            Entry::CheckWith => {
                decided(rate.check_with("k", 1, &other).await.map(|d| *d.overall()))
            }
            Entry::Peek => decided(rate.peek("k").await),
            Entry::Refund => decided(rate.refund("k", 1).await),
            Entry::RefundWith => decided(rate.refund_with("k", 1, &other).await),
            Entry::Acquire => match self.leases.acquire("k").await {
                Ok(Ok(lease)) => Seen::Decided(*lease.decision()),
                Ok(Err(denied)) => Seen::Decided(denied),
                Err(e) => Seen::Failed(e.to_string()),
            },
            Entry::LeasePeek => decided(self.leases.peek("k").await),
            Entry::InFlight => match self.leases.in_flight("k").await {
                Ok(n) => Seen::InFlight(n),
                Err(e) => Seen::Failed(e.to_string()),
            },
            Entry::Release => {
                let lease = self.held.lock().unwrap().pop();
                if let Some(lease) = lease {
                    lease.release().await;
                }
                Seen::Released
            }
            Entry::HttpRate | Entry::HttpLease => {
                let path = if self.entry == Entry::HttpRate {
                    "rate"
                } else {
                    "lease"
                };
                let key = format!("call-{}", self.calls.fetch_add(1, Ordering::Relaxed));
                let request = self.http.get(format!("{}/{path}", self.base));
                match request.header("x-key", key).send().await {
                    Ok(res) => Seen::Http {
                        status: res.status().as_u16(),
                        fields: res.headers().contains_key("ratelimit"),
                        body: res.text().await.unwrap_or_default(),
                    },
                    Err(e) => Seen::Failed(e.to_string()),
                }
            }
        }
    }

    /// Before the fault: a decision from Redis, and leases for `release`.
    async fn warm_up(&self) {
        // Each on a key of its own: the limit is 2 per key.
        let held = if self.entry == Entry::Release {
            CALLS + 1
        } else {
            0
        };
        for i in 0..held {
            let key = format!("held-{i}");
            let lease = self
                .leases
                .acquire(&key)
                .await
                .unwrap()
                .expect("a free slot");
            assert!(!lease.decision().is_degraded());
            self.held.lock().unwrap().push(lease);
        }
        let first = self.call().await;
        assert!(
            self.decides_from_redis().await,
            "{self:?} decides from redis first ({first:?})"
        );
    }

    /// Whether the entry, called now, decided from Redis.
    async fn decides_from_redis(&self) -> bool {
        match self.call().await {
            Seen::Decided(d) => !d.is_degraded(),
            Seen::InFlight(_) => matches!(self.leases.peek("k").await, Ok(d) if !d.is_degraded()),
            // A lease taken and given back through Redis.
            Seen::Released => {
                let Ok(Ok(lease)) = self.leases.acquire("cycle").await else {
                    return false;
                };
                let taken = !lease.decision().is_degraded();
                lease.release().await;
                let back = self.leases.peek("cycle").await;
                taken && matches!(back, Ok(d) if !d.is_degraded() && d.remaining() == MAX)
            }
            Seen::Http {
                status,
                fields,
                body,
            } => match self.entry {
                Entry::HttpRate => status == 200 && fields,
                _ => status == 200 && body == "1",
            },
            Seen::Failed(_) => false,
        }
    }

    /// What the failure policy must have answered while Redis was down.
    fn by_policy(&self, seen: &Seen) -> Result<(), String> {
        let policy = self.policy;
        let ok = match seen {
            Seen::Decided(d) => match policy {
                Policy::Open => d.allowed() && d.is_degraded() && d.reason() == Reason::FailOpen,
                Policy::Closed => {
                    !d.allowed() && d.is_degraded() && d.reason() == Reason::FailClosed
                }
                // The fallback's own decision: its limit is far away.
                Policy::Fallback => {
                    d.allowed() && d.is_degraded() && d.reason() == Reason::WithinLimit
                }
                Policy::ReturnError => false,
            },
            Seen::InFlight(n) => match policy {
                Policy::Open | Policy::Fallback => *n == 0,
                Policy::Closed => *n == MAX,
                Policy::ReturnError => false,
            },
            Seen::Released => true,
            Seen::Http { status, fields, .. } => match policy {
                Policy::Open | Policy::Fallback => *status == 200 && !*fields,
                Policy::Closed | Policy::ReturnError => *status == 503,
            },
            Seen::Failed(e) => {
                if policy != Policy::ReturnError || self.entry == Entry::Release {
                    return Err(format!("{self:?} failed: {e}"));
                }
                true
            }
        };
        if ok {
            Ok(())
        } else {
            Err(format!("{self:?} answered {seen:?}"))
        }
    }
}

impl std::fmt::Debug for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} under {:?}", self.entry, self.policy)
    }
}

async fn fixtures(server: &RedisServer) -> Vec<Arc<Fixture>> {
    let mut all = Vec::new();
    for policy in POLICIES {
        for entry in ENTRIES {
            all.push(Arc::new(Fixture::new(server, entry, policy).await));
        }
    }
    for f in &all {
        f.warm_up().await;
    }
    all
}

/// While the store is down: every call of every fixture within the bound,
/// answered by its policy.
async fn while_down(all: &[Arc<Fixture>]) {
    let runs: Vec<_> = all
        .iter()
        .map(|f| {
            let f = f.clone();
            tokio::spawn(async move {
                let mut worst = Duration::ZERO;
                for _ in 0..CALLS {
                    let start = Instant::now();
                    let seen = f.call().await;
                    worst = worst.max(start.elapsed());
                    f.by_policy(&seen)?;
                }
                Ok::<_, String>((format!("{f:?}"), worst))
            })
        })
        .collect();
    all_within(
        runs,
        TIMEOUT + MARGIN,
        "the slowest call while redis was down",
    )
    .await;
}

/// Once the store is back (at `back`): every fixture decides from Redis
/// again within [`RESUME`].
async fn after(all: &[Arc<Fixture>], back: Instant) {
    let runs: Vec<_> = all
        .iter()
        .map(|f| {
            let f = f.clone();
            tokio::spawn(async move {
                while !f.decides_from_redis().await {
                    if back.elapsed() > RESUME + MARGIN {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Ok((format!("{f:?}"), back.elapsed()))
            })
        })
        .collect();
    all_within(runs, RESUME, "deciding from redis again after it is back").await;
}

/// Awaits each fixture's run, which says how long it took (or why it
/// failed); each must have taken at most `bound`. `what` names the time
/// measured, in the failure and in the slowest run, which is printed.
async fn all_within(
    runs: Vec<tokio::task::JoinHandle<Result<(String, Duration), String>>>,
    bound: Duration,
    what: &str,
) {
    let mut slowest = (String::new(), Duration::ZERO);
    for run in runs {
        let (name, took) = run.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            took <= bound,
            "{name}: {what} took {took:?}, more than {bound:?}"
        );
        if took > slowest.1 {
            slowest = (name, took);
        }
    }
    eprintln!("{what}: {} at {:?}", slowest.0, slowest.1);
}

/// Acquires given up on while Redis was down may still run once it is back,
/// but each is undone right after it: no slot stays taken by a request that
/// was never admitted from Redis.
async fn no_phantom_leases(all: &[Arc<Fixture>]) {
    for f in all.iter().filter(|f| f.entry == Entry::Acquire) {
        let start = Instant::now();
        loop {
            let d = f.leases.peek("k").await.unwrap();
            if !d.is_degraded() && d.remaining() == MAX {
                break;
            }
            assert!(
                start.elapsed() < RESUME,
                "{f:?}: slots still taken after the outage: {d:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Only one of these tests at a time: both load the machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn a_paused_redis_is_answered_by_policy_within_the_timeout_and_resumes() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let server = RedisServer::start();
    let rt = common::runtime();
    let all = rt.block_on(fixtures(&server));
    server.pause();
    rt.block_on(while_down(&all));
    server.resume();
    let back = Instant::now();
    rt.block_on(after(&all, back));
    rt.block_on(no_phantom_leases(&all));
}

#[test]
fn a_killed_redis_is_answered_by_policy_within_the_timeout_and_resumes_after_a_restart() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut server = RedisServer::start();
    let rt = common::runtime();
    let all = rt.block_on(fixtures(&server));
    server.kill();
    rt.block_on(while_down(&all));
    server.restart();
    let back = Instant::now();
    rt.block_on(after(&all, back));
}
