//! The guard's own tests: timeouts, the breaker and the policies over
//! store futures that fail or hang.

use super::super::DEFAULT_COOL_DOWN;
use super::*;
use crate::algorithm::sealed::Sealed;
use crate::algorithm::TokenBucket;
use crate::store::MemoryStore;
use crate::store::StoreErrorKind;
use crate::Limiter;
use std::sync::Mutex;

const TIMEOUT: Duration = Duration::from_millis(100);

/// A store for messages only: the calls under test are futures of
/// their own.
static STORE: std::sync::LazyLock<Store> =
    std::sync::LazyLock::new(|| Store::from(MemoryStore::new()));

fn call(specs: &[Spec]) -> Call<'_> {
    Call {
        limiter: "test",
        specs,
        key: "ana",
        cost: 1,
        mode: Mode::Check,
        lease: "",
        store: &STORE,
    }
}

fn down() -> StoreFuture {
    Box::pin(async { Err(StoreError::unavailable("refused")) })
}

fn hangs() -> StoreFuture {
    Box::pin(std::future::pending())
}

fn spec() -> Spec {
    TokenBucket::new(10, 1.0).parts().remove(0).1
}

#[tokio::test]
async fn each_policy_answers_a_failure() {
    let specs = [spec()];
    let guard = |policy| Guard::new(TIMEOUT, policy, CircuitBreaker::default(), None);

    let d = guard(FailurePolicy::FailOpen)
        .call(down(), &call(&specs))
        .await
        .unwrap()[0];
    assert!(d.allowed() && d.is_degraded() && d.limit() == 10 && d.reason() == Reason::FailOpen);

    let d = guard(FailurePolicy::FailClosed)
        .call(down(), &call(&specs))
        .await
        .unwrap()[0];
    assert!(!d.allowed() && d.is_degraded() && d.reason() == Reason::FailClosed);
    assert_eq!(d.retry_after(), Some(DEFAULT_COOL_DOWN));

    let e = guard(FailurePolicy::ReturnError)
        .call(down(), &call(&specs))
        .await
        .unwrap_err();
    let Error::Store(s) = &e else { panic!("{e}") };
    assert_eq!(s.kind(), crate::store::StoreErrorKind::Unavailable, "{e}");

    let local = Limiter::new(MemoryStore::new(), TokenBucket::new(1, 0.001));
    let g = guard(FailurePolicy::fallback(local));
    let d = g.call(down(), &call(&specs)).await.unwrap()[0];
    assert!(d.allowed() && d.is_degraded() && d.limit() == 1 && d.reason() == Reason::WithinLimit);
    let d = g.call(down(), &call(&specs)).await.unwrap()[0];
    assert!(!d.allowed() && d.is_degraded() && d.retry_after().is_some());
    assert_eq!(d.reason(), Reason::OverLimit, "the fallback says why");
}

#[tokio::test(start_paused = true)]
async fn timeouts_open_the_circuit_and_then_the_store_is_not_called() {
    let specs = [spec()];
    let kinds = Arc::new(Mutex::new(Vec::new()));
    let seen = kinds.clone();
    let hook: FailureHook = Arc::new(move |e: &FailureEvent<'_>| {
        assert_eq!(e.limiter, "test");
        seen.lock().unwrap().push((e.kind, e.circuit));
    });
    let g = Guard::new(
        TIMEOUT,
        FailurePolicy::FailOpen,
        CircuitBreaker::new(2, Duration::from_secs(60)),
        Some(hook),
    );
    for _ in 0..2 {
        let start = tokio::time::Instant::now();
        let d = g.call(hangs(), &call(&specs)).await.unwrap()[0];
        assert!(d.is_degraded());
        assert_eq!(start.elapsed(), TIMEOUT);
    }
    assert_eq!(g.circuit_state(), CircuitState::Open);
    let never: StoreFuture = Box::pin(async { panic!("an open circuit does not call the store") });
    let d = g.call(never, &call(&specs)).await.unwrap()[0];
    assert!(d.is_degraded() && d.allowed());
    let timeout = FailureKind::Store(StoreErrorKind::Timeout);
    let seen = [
        (timeout, CircuitState::Closed),
        (timeout, CircuitState::Open),
        (FailureKind::CircuitOpen, CircuitState::Open),
    ];
    assert_eq!(*kinds.lock().unwrap(), seen);
}

#[test]
fn warnings_are_throttled() {
    let g = Guard::new(
        TIMEOUT,
        FailurePolicy::default(),
        CircuitBreaker::default(),
        None,
    );
    assert_eq!(g.throttle_at(1), Some(0));
    for t in 2..12 {
        assert_eq!(g.throttle_at(t), None);
    }
    assert_eq!(g.throttle_at(WARN_EVERY_MS), None);
    // A second after the last warning, the next one counts the rest.
    assert_eq!(g.throttle_at(WARN_EVERY_MS + 1), Some(11));
    assert_eq!(g.throttle_at(WARN_EVERY_MS + 2), None);
}
