//! What a limiter answers when its store cannot.

use crate::algorithm::{Algorithm, Mode};
use crate::{Decision, Error, Limiter};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a limiter decides when its store fails (an error, a timeout, or an
/// open circuit breaker). Set with
/// [`LimiterBuilder::on_store_failure`](crate::LimiterBuilder::on_store_failure);
/// the default is [`FailOpen`](Self::FailOpen).
///
/// Every decision made this way has [`Decision::degraded`] set, and is
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
    /// Admit the request. The decision is `allowed`, its numbers are
    /// placeholders (`limit` and `remaining` are the limit, no reset, no
    /// delay), and it is `degraded`. The default: the limiter must not become
    /// the outage.
    #[default]
    FailOpen,
    /// Deny the request: `allowed` is false, `degraded` is true, and
    /// `retry_after` is the rest of the circuit breaker's cool-down (the
    /// whole cool-down when the circuit is not open). The layer answers
    /// `503 Service Unavailable` with `Retry-After`, not 429: the client is
    /// not over its limit, the limiter cannot tell.
    FailClosed,
    /// Decide with another limiter, normally over a
    /// [`MemoryStore`](crate::store::MemoryStore) with its own, smaller quota
    /// (e.g. the global quota divided by the number of app servers). Its
    /// decisions are returned marked `degraded`. Build with
    /// [`FailurePolicy::fallback`].
    Fallback(Fallback),
    /// Return the store's error to the caller
    /// ([`Error::Store`]): for library users who decide themselves.
    /// While the circuit is open the error is
    /// [`StoreError::Unavailable`](crate::store::StoreError::Unavailable).
    ReturnError,
}

impl FailurePolicy {
    /// Decide with `limiter` when the store fails (see
    /// [`Fallback`](Self::Fallback)).
    pub fn fallback<B: Algorithm>(limiter: Limiter<B>) -> Self {
        FailurePolicy::Fallback(Fallback::new(limiter))
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

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The limiter of a [`FailurePolicy::Fallback`], of any algorithm.
///
/// Cheap to clone. The fallback keeps its own state: while it decides, the
/// shared state in the store is neither read nor charged.
#[derive(Clone)]
pub struct Fallback {
    limiter: Arc<dyn LocalLimiter>,
}

impl Fallback {
    /// Wrap `limiter`. Give it its own name (e.g. `api-local`) if it could
    /// share a store with the primary limiter.
    pub fn new<B: Algorithm>(limiter: Limiter<B>) -> Self {
        Self {
            limiter: Arc::new(limiter),
        }
    }

    /// The fallback's decision, marked `degraded`: a check, a peek (cost 1,
    /// nothing consumed) or a refund, as `mode` says.
    pub(crate) async fn decide(&self, key: &str, cost: u64, mode: Mode) -> Result<Decision, Error> {
        let mut d = self.limiter.decide(key, cost, mode).await?;
        d.degraded = true;
        Ok(d)
    }
}

impl fmt::Debug for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Fallback").field(&self.limiter).finish()
    }
}

/// A limiter with its algorithm erased.
trait LocalLimiter: Send + Sync + fmt::Debug {
    fn decide<'a>(
        &'a self,
        key: &'a str,
        cost: u64,
        mode: Mode,
    ) -> BoxFuture<'a, Result<Decision, Error>>;
}

impl<B: Algorithm> LocalLimiter for Limiter<B> {
    fn decide<'a>(
        &'a self,
        key: &'a str,
        cost: u64,
        mode: Mode,
    ) -> BoxFuture<'a, Result<Decision, Error>> {
        match mode {
            Mode::Peek => Box::pin(self.peek(key)),
            Mode::Check => Box::pin(self.check(key, cost)),
            Mode::Refund => Box::pin(self.refund(key, cost)),
        }
    }
}
