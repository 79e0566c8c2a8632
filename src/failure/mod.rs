//! What happens when the store is slow or gone: timeouts, failure policies,
//! and the circuit breaker.
//!
//! A rate limiter sits in front of every request, so its failure mode is part
//! of the service's: "the default will be discovered during the incident that
//! takes the limiter down". floodgate makes it explicit and bounded. With a
//! [`RedisStore`](crate::store::RedisStore):
//!
//! Every entry of every limiter goes through the same guard: `check`,
//! `check_all`, `check_with`, `peek`, `refund`, `refund_with`, the layers,
//! and the [`ConcurrencyLimiter`](crate::concurrency::ConcurrencyLimiter)'s
//! `acquire`, `peek` and the release of its leases.
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
//! A [`MemoryStore`](crate::store::MemoryStore) decides at once and cannot
//! fail: its decisions never wait for a timeout or a breaker.
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
//! | per-tenant billing quotas, login and other security limits | [`FailClosed`](FailurePolicy::FailClosed) | granting unlimited paid usage or unlimited password guesses is worse than a short refusal (answered `503` with `Retry-After`, not `429`: the client is not known to be over its limit) |
//! | library users who want to decide | [`ReturnError`](FailurePolicy::ReturnError) | the store's error comes back as [`Error::Store`](crate::Error::Store) |
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
//! - [`Decision::is_degraded`] is `true` (the layer then sends no rate-limit
//!   fields, whose numbers would not be the shared state), and
//!   [`Decision::reason`] is [`FailOpen`](crate::Reason::FailOpen),
//!   [`FailClosed`](crate::Reason::FailClosed), or the fallback's own reason
//!   (a client over the fallback's limit gets a 429 like any other);
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
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::algorithm::SlidingWindow;
//! use floodgate::failure::{CircuitBreaker, CircuitState, FailurePolicy};
//! use floodgate::store::RedisStore;
//! use floodgate::Limiter;
//! use std::time::Duration;
//!
//! let store = RedisStore::from_url("redis://127.0.0.1:1")?;
//! let limiter = Limiter::builder(store, SlidingWindow::new(100, Duration::from_secs(60)))
//!     .timeout(Duration::from_millis(50))
//!     .on_store_failure(FailurePolicy::FailOpen)
//!     .circuit_breaker(CircuitBreaker::new(5, Duration::from_secs(1)))
//!     .failure_hook(|e| eprintln!("{}: store failed ({}), decided by {}", e.limiter, e.kind, e.policy.name()))
//!     .build()?;
//!
//! let d = limiter.check("ana", 1).await?;
//! assert!(d.allowed() && d.is_degraded() && d.reason() == floodgate::Reason::FailOpen);
//! for _ in 0..5 {
//!     limiter.check("ana", 1).await?;
//! }
//! assert_eq!(limiter.circuit_state(), CircuitState::Open);
//! # Ok(()) }
//! ```

mod breaker;
mod guard;
mod policy;

pub use breaker::{CircuitBreaker, CircuitState, DEFAULT_COOL_DOWN, DEFAULT_FAILURES};
pub(crate) use guard::{Call, FailureHook, Guard};
pub use policy::{FailurePolicy, FallbackLimiter};
pub(crate) use policy::{FallbackDecider, FallbackKind};

use crate::store::{StoreError, StoreErrorKind};
use crate::Decision;
use std::fmt;
use std::time::Duration;

/// Default timeout of every store call: 100 ms (see the
/// [module documentation](self)).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(100);

/// Why a decision was made by the failure policy: the store failed (and
/// how), or the circuit breaker did not let the call through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The store failed: timeout, no connection, TLS, permission, ... (see
    /// [`StoreErrorKind`]).
    Store(StoreErrorKind),
    /// The circuit breaker is open: the store was not called.
    CircuitOpen,
}

impl FailureKind {
    /// The kind of a store error.
    pub fn of(error: &StoreError) -> Self {
        FailureKind::Store(error.kind())
    }

    /// A short name for logs and metric labels: the
    /// [store error kind's](StoreErrorKind::as_str) (`timeout`,
    /// `unavailable`, `connection`, `tls`, `permission`, `server`,
    /// `scripting`, `foreign_data`, `protocol`), or `circuit_open`.
    pub fn as_str(&self) -> &'static str {
        match self {
            FailureKind::Store(kind) => kind.as_str(),
            FailureKind::CircuitOpen => "circuit_open",
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
    /// The failure policy that decided.
    pub policy: &'a FailurePolicy,
    /// What the policy decided; `None` when an error is returned instead
    /// ([`FailurePolicy::ReturnError`], or a failing fallback).
    pub decision: Option<&'a Decision>,
    /// The circuit breaker's state after this failure.
    pub circuit: CircuitState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_store_errors() {
        assert_eq!(
            FailureKind::of(&StoreError::timeout(
                "redis",
                "a check",
                Duration::from_millis(5)
            )),
            FailureKind::Store(StoreErrorKind::Timeout)
        );
        let reset =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(
            FailureKind::of(&reset.into()),
            FailureKind::Store(StoreErrorKind::Connection)
        );
        let timed_out = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(
            FailureKind::of(&timed_out.into()),
            FailureKind::Store(StoreErrorKind::Timeout)
        );
        let oom = redis::RedisError::from((redis::ErrorKind::Client, "OOM"));
        assert_eq!(
            FailureKind::of(&oom.into()),
            FailureKind::Store(StoreErrorKind::Server)
        );
        let noperm = redis::RedisError::from((redis::ErrorKind::Client, "x"));
        assert_eq!(
            FailureKind::of(&noperm.into()),
            FailureKind::Store(StoreErrorKind::Server)
        );
        assert_eq!(
            FailureKind::of(&StoreError::unavailable("down")),
            FailureKind::Store(StoreErrorKind::Unavailable)
        );
    }
}
