//! What a limiter answers when its store cannot.

use crate::pending::Pending;
use crate::store::Mode;
use crate::Decision;
use std::fmt;
use std::sync::Arc;

/// What a limiter decides when its store fails (an error, a timeout, or an
/// open circuit breaker). Set with
/// [`LimiterBuilder::on_store_failure`](crate::LimiterBuilder::on_store_failure)
/// or
/// [`ConcurrencyLimiterBuilder::on_store_failure`](crate::concurrency::ConcurrencyLimiterBuilder::on_store_failure);
/// the default is [`FailOpen`](Self::FailOpen).
///
/// Every decision made this way has [`Decision::is_degraded`] set, and is
/// reported by a `tracing` event and the failure hook; see the
/// [module documentation](crate::failure) for how to choose.
///
/// ```
/// use floodgate::algorithm::{SlidingLog, TokenBucket};
/// use floodgate::failure::FailurePolicy;
/// use floodgate::store::MemoryStore;
/// use floodgate::Limiter;
/// use std::time::Duration;
///
/// // Logins: an attacker must not get unlimited attempts while Redis is down.
/// let login = FailurePolicy::FailClosed;
/// // An API limited to 1000/s over 4 app servers: each keeps 250/s locally.
/// let local = Limiter::builder(MemoryStore::new(), TokenBucket::new(250, 250.0))
///     .name("api-local")
///     .build()
///     .unwrap();
/// let api = FailurePolicy::fallback(local);
/// assert!(matches!(api, FailurePolicy::Fallback(_)));
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Admit the request. The decision is `allowed` for the reason
    /// [`FailOpen`](crate::Reason::FailOpen), its numbers are placeholders
    /// (`limit` and `remaining` are the limit, no reset, no delay), and it is
    /// `degraded`. A concurrency limiter admits without a lease. The
    /// default: the limiter must not become the outage.
    #[default]
    FailOpen,
    /// Deny the request for the reason
    /// [`FailClosed`](crate::Reason::FailClosed): `retry_after` is the rest
    /// of the circuit breaker's cool-down (the whole cool-down when the
    /// circuit is not open). The layers answer `503 Service Unavailable`
    /// with `Retry-After`, not 429: the client is not known to be over its
    /// limit.
    FailClosed,
    /// Decide with another limiter of the same kind, normally over a
    /// [`MemoryStore`](crate::store::MemoryStore) with its own, smaller
    /// limit (e.g. the global limit divided by the number of app servers).
    /// Its decisions are returned marked `degraded`, with their own reason:
    /// a client over the fallback's limit is answered 429. Build with
    /// [`FailurePolicy::fallback`].
    Fallback(FallbackLimiter),
    /// Return the store's error to the caller ([`Error::Store`](crate::Error::Store)): for
    /// library users who decide themselves. While the circuit is open the
    /// error is of kind [`StoreErrorKind::Unavailable`](crate::store::StoreErrorKind::Unavailable).
    /// The layers answer 503.
    ReturnError,
}

impl FailurePolicy {
    /// Decide with `limiter` when the store fails: a
    /// [`Limiter`](crate::Limiter) for a rate limiter, a
    /// [`ConcurrencyLimiter`](crate::concurrency::ConcurrencyLimiter) for a
    /// concurrency limiter (building a limiter with the other kind is an
    /// error naming `on_store_failure`).
    pub fn fallback(limiter: impl Into<FallbackLimiter>) -> Self {
        FailurePolicy::Fallback(limiter.into())
    }

    /// A short name for logs and metrics: `fail_open`, `fail_closed`,
    /// `fallback` or `return_error`.
    pub fn name(&self) -> &'static str {
        match self {
            FailurePolicy::FailOpen => "fail_open",
            FailurePolicy::FailClosed => "fail_closed",
            FailurePolicy::Fallback(_) => "fallback",
            FailurePolicy::ReturnError => "return_error",
        }
    }
}

/// The limiter of a [`FailurePolicy::Fallback`], of any algorithm: made from
/// a [`Limiter`](crate::Limiter) or a
/// [`ConcurrencyLimiter`](crate::concurrency::ConcurrencyLimiter) with
/// `.into()`.
///
/// Cheap to clone. The fallback keeps its own state: while it decides, the
/// shared state in the store is neither read nor charged.
#[derive(Clone)]
pub struct FallbackLimiter {
    limiter: Arc<dyn FallbackDecider>,
}

/// Which limiters a fallback can stand in for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FallbackKind {
    /// A rate limiter (`Limiter`).
    Rate,
    /// A concurrency limiter.
    Concurrency,
}

/// A limiter with its type erased: what a fallback needs of it.
pub(crate) trait FallbackDecider: Send + Sync + fmt::Debug {
    fn kind(&self) -> FallbackKind;
    /// Its decision for the call the store could not make: a check, a peek
    /// or a refund as `mode` says; `lease` the lease of a concurrency call.
    /// Ready at once for a limiter over a memory store.
    fn decide(&self, key: &str, cost: u64, mode: Mode, lease: &str) -> Pending<Decision>;
}

impl FallbackLimiter {
    pub(crate) fn new(limiter: Arc<dyn FallbackDecider>) -> Self {
        Self { limiter }
    }

    pub(crate) fn kind(&self) -> FallbackKind {
        self.limiter.kind()
    }

    /// The fallback's decision, marked `degraded`.
    pub(crate) fn decide(
        &self,
        key: &str,
        cost: u64,
        mode: Mode,
        lease: &str,
    ) -> Pending<Decision> {
        self.limiter
            .decide(key, cost, mode, lease)
            .map(Decision::mark_degraded)
    }
}

impl fmt::Debug for FallbackLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FallbackLimiter")
            .field(&self.limiter)
            .finish()
    }
}
