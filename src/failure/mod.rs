//! What happens when the store is slow or gone: timeouts, failure policies,
//! and the circuit breaker.
//!
//! A rate limiter sits in front of every request, so its failure mode is part
//! of the service's: "the default will be discovered during the incident that
//! takes the limiter down". floodgate makes it explicit and bounded. With a
//! [`RedisStore`](crate::store::RedisStore):
//!
//! 1. **Every store call has a timeout**,
//!    [`LimiterBuilder::timeout`](crate::LimiterBuilder::timeout), default
//!    [`DEFAULT_TIMEOUT`] (100 ms). Redis answers a decision in well under a
//!    millisecond on the same network, so 100 ms is a hundred times the normal
//!    and still well under any request's latency budget. A dead Redis must
//!    never add seconds per request: that is what users of other limiters
//!    report (1 to 10 s per request with Redis down in envoyproxy/ratelimit#462;
//!    bucket4j#339 asks for millisecond timeouts). The timeout covers the whole
//!    call: waiting for a connection, `FCALL`, and loading the function library
//!    when Redis lacks it. Making a connection is bounded as well
//!    ([`RedisStore::connect_timeout`](crate::store::RedisStore::connect_timeout),
//!    1 s), and happens in the background: a caller waits for it at most its
//!    own timeout.
//! 2. **When the store fails** (an error, a timeout, or an open circuit), the
//!    limiter's [`FailurePolicy`] decides instead, chosen per limiter with
//!    [`LimiterBuilder::on_store_failure`](crate::LimiterBuilder::on_store_failure).
//! 3. **A circuit breaker** ([`CircuitBreaker`]) stops calling a store that
//!    keeps failing, so callers get the policy's answer at once instead of
//!    waiting for a timeout each, and lets one probe through after a
//!    cool-down, so limiting resumes by itself when the store is back.
//!
//! A [`MemoryStore`](crate::store::MemoryStore) cannot fail: limiters over it
//! skip all of this.
//!
//! A timeout ends the wait, not the command: a call that timed out may still
//! run on Redis when it catches up, and charge the key. So a slow Redis
//! errs on the strict side for the requests that were decided by the policy.
//!
//! # Choosing a policy
//!
//! Failing open loses protection for a while; failing closed loses
//! availability. Which is worse depends on what the limit protects:
//!
//! | limit | policy | why |
//! |---|---|---|
//! | ordinary API limits, abuse and scraping limits | [`FailOpen`](FailurePolicy::FailOpen) (default) | a few minutes without limits is an inconvenience; rejecting every request is an outage, and the limiter must not become the outage |
//! | limits that protect a fragile downstream | [`Fallback`](FailurePolicy::Fallback) | keep a limit, approximately: each app server enforces its share locally (the global quota divided by the number of servers) |
//! | per-tenant billing quotas, login and other security limits | [`FailClosed`](FailurePolicy::FailClosed) | granting unlimited paid usage or unlimited password guesses is worse than a short refusal (answered `503` with `Retry-After`, not `429`) |
//! | library users who want to decide | [`ReturnError`](FailurePolicy::ReturnError) | the store's error comes back as [`Error::Store`] |
//!
//! `FailOpen` is the default because it is what most limits want (ordinary
//! APIs usually fail open; security-sensitive limits may warrant failing
//! closed) and because it is what other limiters do by default (Envoy allows
//! by default, upstash/ratelimit allows after its timeout). Choose
//! deliberately for every limit that is not an ordinary one.
//!
//! # Seeing it
//!
//! Every decision made by a policy is visible three ways:
//!
//! - [`Decision::degraded`] is `true` (the layer then sends no rate-limit
//!   headers, whose numbers would not be the shared state);
//! - `tracing`: a `debug` event for each such decision, a `warn` at most
//!   once per second per limiter (with the number of degraded decisions it
//!   stands for), a `warn` when the circuit opens and an `info` when it
//!   closes; fields `limiter`, `kind` ([`FailureKind::as_str`]), `policy`
//!   and `error`;
//! - the hook set with
//!   [`LimiterBuilder::failure_hook`](crate::LimiterBuilder::failure_hook),
//!   called with a [`FailureEvent`] for each: the place for metrics.
//!
//! # Functions and the script cache
//!
//! A Redis may lack floodgate's function library (a new server,
//! `FUNCTION FLUSH`, a new floodgate version); `FCALL` then answers that the
//! function is not found. On Redis before 7 (no functions) decisions are
//! `EVALSHA`, and Redis forgets scripts on restart, failover and
//! `SCRIPT FLUSH` (`NOSCRIPT`). Either way the store loads the code and
//! repeats the call on the same connection, inside the same timeout: no
//! decision fails or degrades because of it.
//!
//! # Example
//!
//! A Redis that is not there (nothing listens on port 1): the decision comes
//! back at once, admitted and degraded. After five such failures the circuit
//! opens and the store is not even called.
//!
//! ```
//! # #[tokio::main] async fn main() -> Result<(), floodgate::Error> {
//! use floodgate::algorithm::SlidingWindow;
//! use floodgate::failure::{CircuitBreaker, CircuitState, FailurePolicy};
//! use floodgate::store::RedisStore;
//! use floodgate::Limiter;
//! use std::time::Duration;
//!
//! let store = RedisStore::from_url("redis://127.0.0.1:1").unwrap();
//! let limiter = Limiter::builder(store, SlidingWindow::new(100, Duration::from_secs(60)))
//!     .timeout(Duration::from_millis(50))
//!     .on_store_failure(FailurePolicy::FailOpen)
//!     .circuit_breaker(CircuitBreaker::new(5, Duration::from_secs(1)))
//!     .failure_hook(|e| eprintln!("{}: store failed ({}), decided by {}", e.limiter, e.kind, e.policy.name()))
//!     .build()?;
//!
//! let d = limiter.check("ana", 1).await?;
//! assert!(d.allowed && d.degraded);
//! for _ in 0..5 {
//!     limiter.check("ana", 1).await?;
//! }
//! assert_eq!(limiter.circuit_state(), CircuitState::Open);
//! # Ok(()) }
//! ```

mod breaker;
mod policy;

pub use breaker::{CircuitBreaker, CircuitState, DEFAULT_COOL_DOWN, DEFAULT_FAILURES};
pub use policy::{FailurePolicy, Fallback};

use crate::algorithm::{Mode, Reply, Spec};
use crate::store::StoreError;
use crate::{Decision, Error};
use breaker::{Breaker, Transition};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Default timeout of every store call: 100 ms (see the
/// [module documentation](self)).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

/// At most one `warn` per limiter per this many ms.
const WARN_EVERY_MS: u64 = 1000;

/// Why a decision was made by the failure policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The store did not answer within the timeout.
    Timeout,
    /// No connection could be had (Redis down, refused, or reconnecting).
    Unavailable,
    /// The connection broke during the call (reset, closed, I/O error).
    Connection,
    /// Redis answered with an error (e.g. `OOM`, `BUSY`, `READONLY`).
    Server,
    /// Redis answered something the script never returns.
    Protocol,
    /// The store is misconfigured.
    Config,
    /// The circuit breaker is open: the store was not called.
    CircuitOpen,
    /// Another store error.
    Other,
}

impl FailureKind {
    /// The kind of a store error.
    pub fn of(error: &StoreError) -> Self {
        #[allow(unreachable_patterns)]
        match error {
            StoreError::Timeout => FailureKind::Timeout,
            StoreError::Unavailable(_) => FailureKind::Unavailable,
            StoreError::Redis(e) if e.is_io_error() || e.is_connection_dropped() => {
                if e.is_timeout() {
                    FailureKind::Timeout
                } else {
                    FailureKind::Connection
                }
            }
            StoreError::Redis(_) => FailureKind::Server,
            StoreError::Protocol(_) => FailureKind::Protocol,
            StoreError::Config(_) => FailureKind::Config,
            _ => FailureKind::Other,
        }
    }

    /// A short name for logs and metric labels: `timeout`, `unavailable`,
    /// `connection`, `server`, `protocol`, `config`, `circuit_open`, `other`.
    pub fn as_str(&self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Unavailable => "unavailable",
            FailureKind::Connection => "connection",
            FailureKind::Server => "server",
            FailureKind::Protocol => "protocol",
            FailureKind::Config => "config",
            FailureKind::CircuitOpen => "circuit_open",
            FailureKind::Other => "other",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One decision the store could not make, as given to the failure hook.
#[derive(Debug)]
#[non_exhaustive]
pub struct FailureEvent<'a> {
    /// The limiter's name.
    pub limiter: &'a str,
    /// Why the store could not decide.
    pub kind: FailureKind,
    /// The store's error; `None` when the circuit was open.
    pub error: Option<&'a StoreError>,
    /// The policy that decided.
    pub policy: &'a FailurePolicy,
    /// What the policy decided; `None` when an error is returned instead
    /// ([`FailurePolicy::ReturnError`], or a failing fallback).
    pub decision: Option<&'a Decision>,
    /// The circuit breaker's state after this failure.
    pub circuit: CircuitState,
}

/// The failure hook: called for every decision the store could not make.
pub(crate) type FailureHook = Arc<dyn Fn(&FailureEvent<'_>) + Send + Sync>;

/// Everything a limiter needs to survive its store: the timeout, the policy,
/// the breaker and the reporting.
pub(crate) struct Guard {
    timeout: Duration,
    policy: FailurePolicy,
    breaker: Breaker,
    hook: Option<FailureHook>,
    /// When the last `warn` was emitted, in the breaker's ms; 0 for never.
    warned_at: AtomicU64,
    /// Degraded decisions since the last `warn`.
    suppressed: AtomicU64,
}

/// One decision to make: what the policies need to know.
pub(crate) struct Call<'a> {
    pub limiter: &'a str,
    /// One per policy decided together.
    pub specs: &'a [&'a Spec],
    /// The user's key, for a fallback limiter.
    pub key: &'a str,
    pub cost: u64,
    pub mode: Mode,
}

impl Guard {
    pub(crate) fn new(
        timeout: Duration,
        policy: FailurePolicy,
        breaker: CircuitBreaker,
        hook: Option<FailureHook>,
    ) -> Self {
        Self {
            timeout,
            policy,
            breaker: Breaker::new(breaker),
            hook,
            warned_at: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    pub(crate) fn policy(&self) -> &FailurePolicy {
        &self.policy
    }

    pub(crate) fn circuit_state(&self) -> CircuitState {
        self.breaker.state()
    }

    /// Run `store` (the store's decision) under the timeout and the breaker;
    /// on failure, let the policy decide.
    /// One decision per policy, in order.
    pub(crate) async fn decide<F>(&self, call: Call<'_>, store: F) -> Result<Vec<Decision>, Error>
    where
        F: Future<Output = Result<Vec<Reply>, StoreError>>,
    {
        let Some(permit) = self.breaker.try_acquire() else {
            return self.degrade(&call, FailureKind::CircuitOpen, None).await;
        };
        let error = match tokio::time::timeout(self.timeout, store).await {
            Ok(Ok(reply)) => {
                if permit.success() == Transition::Closed {
                    tracing::info!(
                        limiter = call.limiter,
                        "rate-limit store answers again: circuit closed, limiting resumed"
                    );
                }
                return Ok(reply.into_iter().map(Reply::decision).collect());
            }
            Ok(Err(e)) => e,
            Err(_) => StoreError::Timeout,
        };
        let kind = FailureKind::of(&error);
        if permit.failure() == Transition::Opened {
            let b = self.breaker.config();
            tracing::warn!(
                limiter = call.limiter,
                kind = kind.as_str(),
                error = %error,
                policy = self.policy.name(),
                failures = b.failures(),
                cool_down_ms = b.cool_down().as_millis() as u64,
                "rate-limit store keeps failing: circuit open, decisions made by the failure policy without calling it"
            );
        }
        self.degrade(&call, kind, Some(error)).await
    }

    async fn degrade(
        &self,
        call: &Call<'_>,
        kind: FailureKind,
        error: Option<StoreError>,
    ) -> Result<Vec<Decision>, Error> {
        // With the circuit open nothing below waits on Tokio: without this, a
        // task deciding in a loop would never yield, and could starve its
        // worker (timers included).
        tokio::task::coop::consume_budget().await;
        // `Err(None)`: return the store's error.
        let decision: Result<Vec<Decision>, Option<Error>> = match &self.policy {
            FailurePolicy::FailOpen => Ok(call.specs.iter().map(|s| fail_open(s)).collect()),
            FailurePolicy::FailClosed => {
                let retry = self.breaker.retry_after();
                Ok(call.specs.iter().map(|s| fail_closed(s, retry)).collect())
            }
            // The fallback decides once for all the policies.
            FailurePolicy::Fallback(f) => f
                .decide(call.key, call.cost, call.mode)
                .await
                .map(|d| vec![d; call.specs.len()])
                .map_err(Some),
            FailurePolicy::ReturnError => Err(None),
        };
        let first = decision.as_ref().ok().and_then(|d| d.first());
        self.report(call, kind, error.as_ref(), first);
        match decision {
            Ok(d) => Ok(d),
            Err(Some(e)) => Err(e),
            Err(None) => Err(Error::Store(error.unwrap_or_else(|| {
                StoreError::Unavailable("circuit breaker open: the store keeps failing".into())
            }))),
        }
    }

    fn report(
        &self,
        call: &Call<'_>,
        kind: FailureKind,
        error: Option<&StoreError>,
        decision: Option<&Decision>,
    ) {
        let policy = self.policy.name();
        let allowed = decision.map(|d| d.allowed);
        tracing::debug!(
            limiter = call.limiter,
            kind = kind.as_str(),
            policy,
            allowed,
            "rate-limit store failed: decided by the failure policy"
        );
        if let Some(more) = self.throttle() {
            let error = match error {
                Some(e) => e.to_string(),
                None => "circuit open".to_owned(),
            };
            tracing::warn!(
                limiter = call.limiter,
                kind = kind.as_str(),
                error = %error,
                policy,
                degraded_since_last_warning = more,
                "rate-limit store failed: decisions are made by the failure policy"
            );
        }
        if let Some(hook) = &self.hook {
            hook(&FailureEvent {
                limiter: call.limiter,
                kind,
                error,
                policy: &self.policy,
                decision,
                circuit: self.breaker.state(),
            });
        }
    }

    /// `Some(n)` when a `warn` may be emitted now, `n` the decisions not
    /// warned about since the last one.
    fn throttle(&self) -> Option<u64> {
        self.throttle_at(self.breaker.now_ms())
    }

    fn throttle_at(&self, now: u64) -> Option<u64> {
        let last = self.warned_at.load(Ordering::Relaxed);
        if (last == 0 || now >= last + WARN_EVERY_MS)
            && self
                .warned_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("timeout", &self.timeout)
            .field("policy", &self.policy)
            .field("circuit_breaker", self.breaker.config())
            .field("circuit", &self.breaker.state())
            .finish()
    }
}

/// Placeholders: the limit as remaining, nothing to wait.
fn fail_open(spec: &Spec) -> Decision {
    let limit = spec.max_cost();
    Decision {
        allowed: true,
        limit,
        remaining: limit,
        reset_after: Duration::ZERO,
        retry_after: None,
        delay: Duration::ZERO,
        degraded: true,
    }
}

fn fail_closed(spec: &Spec, retry_after: Duration) -> Decision {
    Decision {
        allowed: false,
        limit: spec.max_cost(),
        remaining: 0,
        reset_after: retry_after,
        retry_after: Some(retry_after),
        delay: Duration::ZERO,
        degraded: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_store_errors() {
        assert_eq!(FailureKind::of(&StoreError::Timeout), FailureKind::Timeout);
        let reset =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(
            FailureKind::of(&StoreError::Redis(reset)),
            FailureKind::Connection
        );
        let timed_out = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(
            FailureKind::of(&StoreError::Redis(timed_out)),
            FailureKind::Timeout
        );
        let oom = redis::RedisError::from((redis::ErrorKind::Client, "OOM"));
        assert_eq!(
            FailureKind::of(&StoreError::Redis(oom)),
            FailureKind::Server
        );
        assert_eq!(
            FailureKind::of(&StoreError::Unavailable("down".into())),
            FailureKind::Unavailable
        );
    }

    use crate::algorithm::sealed::Sealed;
    use crate::algorithm::TokenBucket;
    use crate::store::MemoryStore;
    use crate::Limiter;
    use std::sync::Mutex;

    fn call<'a>(specs: &'a [&'a Spec]) -> Call<'a> {
        Call {
            limiter: "test",
            specs,
            key: "ana",
            cost: 1,
            mode: Mode::Check,
        }
    }

    async fn down() -> Result<Vec<Reply>, StoreError> {
        Err(StoreError::Unavailable("refused".into()))
    }

    #[tokio::test]
    async fn each_policy_answers_a_failure() {
        let spec = TokenBucket::new(10, 1.0).parts().remove(0).1;
        let guard = |policy| Guard::new(DEFAULT_TIMEOUT, policy, CircuitBreaker::default(), None);

        let d = guard(FailurePolicy::FailOpen)
            .decide(call(&[&spec]), down())
            .await
            .unwrap()
            .remove(0);
        assert!(d.allowed && d.degraded && d.limit == 10);

        let d = guard(FailurePolicy::FailClosed)
            .decide(call(&[&spec]), down())
            .await
            .unwrap()
            .remove(0);
        assert!(!d.allowed && d.degraded);
        assert_eq!(d.retry_after, Some(DEFAULT_COOL_DOWN));

        let e = guard(FailurePolicy::ReturnError)
            .decide(call(&[&spec]), down())
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Store(StoreError::Unavailable(_))), "{e}");

        let local = Limiter::builder(MemoryStore::new(), TokenBucket::new(1, 0.001))
            .build()
            .unwrap();
        let g = guard(FailurePolicy::fallback(local));
        let d = g.decide(call(&[&spec]), down()).await.unwrap().remove(0);
        assert!(d.allowed && d.degraded && d.limit == 1);
        let d = g.decide(call(&[&spec]), down()).await.unwrap().remove(0);
        assert!(!d.allowed && d.degraded && d.retry_after.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn timeouts_open_the_circuit_and_then_the_store_is_not_called() {
        let spec = TokenBucket::new(10, 1.0).parts().remove(0).1;
        let kinds = Arc::new(Mutex::new(Vec::new()));
        let seen = kinds.clone();
        let hook: FailureHook = Arc::new(move |e: &FailureEvent<'_>| {
            assert_eq!(e.limiter, "test");
            seen.lock().unwrap().push((e.kind, e.circuit));
        });
        let g = Guard::new(
            Duration::from_millis(100),
            FailurePolicy::FailOpen,
            CircuitBreaker::new(2, Duration::from_secs(60)),
            Some(hook),
        );
        let hangs = std::future::pending::<Result<Vec<Reply>, StoreError>>;
        for _ in 0..2 {
            let start = tokio::time::Instant::now();
            let d = g.decide(call(&[&spec]), hangs()).await.unwrap().remove(0);
            assert!(d.degraded);
            assert_eq!(start.elapsed(), Duration::from_millis(100));
        }
        assert_eq!(g.circuit_state(), CircuitState::Open);
        let never = async { panic!("an open circuit does not call the store") };
        let d = g.decide(call(&[&spec]), never).await.unwrap().remove(0);
        assert!(d.degraded && d.allowed);
        assert_eq!(
            *kinds.lock().unwrap(),
            [
                (FailureKind::Timeout, CircuitState::Closed),
                (FailureKind::Timeout, CircuitState::Open),
                (FailureKind::CircuitOpen, CircuitState::Open),
            ]
        );
    }

    #[test]
    fn warnings_are_throttled() {
        let g = Guard::new(
            DEFAULT_TIMEOUT,
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
}
