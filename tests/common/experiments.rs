//! The two experiments, on any store: the boundary burst (a burst just
//! before and just after a window boundary) and the steady overload (200
//! requests at random over 10 s), at a limit of 10 per 1 s (token and leaky
//! bucket: capacity 10 at 10/s; GCRA: 10 per second, burst 10). The
//! expected tables of the first four algorithms are the textbook results;
//! the leaky bucket and GCRA admit like a token bucket of the same capacity
//! and rate, so their rows equal the token bucket's.

use super::{steady_overload_times, T0};
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::Store;
use floodgate::Limiter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const SEC: Duration = Duration::from_secs(1);

/// Which requests of `times` `alg` admits, for client `ana`. Each run has
/// its own namespace; a store failure fails the test instead of being
/// decided by a failure policy.
async fn admitted<A: Algorithm>(store: Store, alg: A, times: &[u64]) -> Vec<bool> {
    static RUN: AtomicU64 = AtomicU64::new(0);
    let clock = ManualClock::new(times[0]);
    let limiter = Limiter::builder(store, alg)
        .prefix(format!("experiment{}", RUN.fetch_add(1, Ordering::Relaxed)))
        .clock(clock.clone())
        .on_store_failure(FailurePolicy::ReturnError)
        .timeout(Duration::from_secs(5))
        .circuit_breaker(CircuitBreaker::disabled())
        .build()
        .unwrap();
    let mut out = Vec::with_capacity(times.len());
    for &t in times {
        clock.set(t);
        out.push(limiter.check("ana", 1).await.unwrap().allowed());
    }
    out
}

/// (name, admitted per request) for all six algorithms.
async fn all(store: &impl Fn() -> Store, times: &[u64]) -> Vec<(&'static str, Vec<bool>)> {
    vec![
        (
            "fixed window",
            admitted(store(), FixedWindow::new(10, SEC), times).await,
        ),
        (
            "sliding log",
            admitted(store(), SlidingLog::new(10, SEC), times).await,
        ),
        (
            "sliding counter",
            admitted(store(), SlidingWindow::new(10, SEC), times).await,
        ),
        (
            "token bucket",
            admitted(store(), TokenBucket::new(10, 10.0), times).await,
        ),
        (
            "leaky bucket",
            admitted(store(), LeakyBucket::new(10, 10.0), times).await,
        ),
        ("gcra", admitted(store(), Gcra::new(10, SEC), times).await),
    ]
}

/// The most admitted requests in any 1-s span, in 5 ms steps.
fn worst_1s(times: &[u64], admitted: &[bool]) -> usize {
    let acc: Vec<u64> = times
        .iter()
        .zip(admitted)
        .filter(|(_, a)| **a)
        .map(|(t, _)| *t)
        .collect();
    (T0..T0 + 9000)
        .step_by(5)
        .map(|s| acc.iter().filter(|&&t| s <= t && t < s + 1000).count())
        .max()
        .unwrap()
}

fn count(a: &[bool]) -> usize {
    a.iter().filter(|x| **x).count()
}

/// 15 requests at t = 0.990 s and 15 at t = 1.010 s.
pub async fn boundary_burst(store: impl Fn() -> Store) {
    let times: Vec<u64> = [T0 + 990; 15].into_iter().chain([T0 + 1010; 15]).collect();
    let got: Vec<(&str, usize, usize)> = all(&store, &times)
        .await
        .into_iter()
        .map(|(n, a)| (n, count(&a[..15]), count(&a[15..])))
        .collect();
    let want = vec![
        ("fixed window", 10, 10),
        ("sliding log", 10, 0),
        ("sliding counter", 10, 1),
        ("token bucket", 10, 0),
        ("leaky bucket", 10, 0),
        ("gcra", 10, 0),
    ];
    assert_eq!(got, want);
}

/// 200 requests at the random times of Python's `random.seed(4)`.
pub async fn steady_overload(store: impl Fn() -> Store) {
    let times = steady_overload_times();
    assert_eq!(times.len(), 200);
    let got: Vec<(&str, usize, usize)> = all(&store, &times)
        .await
        .into_iter()
        .map(|(n, a)| (n, count(&a), worst_1s(&times, &a)))
        .collect();
    let want = vec![
        ("fixed window", 100, 17),
        ("sliding log", 93, 10),
        ("sliding counter", 99, 12),
        ("token bucket", 108, 19),
        ("leaky bucket", 108, 19),
        ("gcra", 108, 19),
    ];
    assert_eq!(got, want);
}
