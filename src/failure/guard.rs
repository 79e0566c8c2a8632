//! The guard around every store call that waits: the timeout, the circuit
//! breaker, the failure policy and its reporting.

use super::breaker::{Breaker, Transition};
use super::{CircuitBreaker, CircuitState, FailureEvent, FailureKind, FailurePolicy};
use crate::algorithm::Spec;
use crate::decision::Reason;
use crate::store::{Mode, Replies, Store, StoreError, StoreFuture};
use crate::{Decision, Error};
use smallvec::SmallVec;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Why a store that waits could not be called: a limiter over Redis needs a
/// Tokio runtime (with its time driver, as `#[tokio::main]` has).
const NO_RUNTIME: &str =
    "no Tokio runtime: a store that waits (Redis) is called from within a Tokio runtime";

/// At most one `warn` per limiter per this many ms.
const WARN_EVERY_MS: u64 = 1000;

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

/// One store call, as the failure policy sees it: what it must answer in
/// the store's place.
pub(crate) struct Call<'a> {
    pub(crate) limiter: &'a str,
    /// One per target decided together.
    pub(crate) specs: &'a [Spec],
    /// The user key, for a fallback limiter.
    pub(crate) key: &'a str,
    pub(crate) cost: u64,
    pub(crate) mode: Mode,
    pub(crate) lease: &'a str,
    /// The store called, named in a timeout's message.
    pub(crate) store: &'a Store,
}

impl Call<'_> {
    /// What the call was doing, for messages: `a check of key "user:42"
    /// for limiter "api"` (a long key shortened).
    fn doing(&self) -> String {
        let mut key: String = self.key.chars().take(64).collect();
        if key.len() < self.key.len() {
            key.push_str("...");
        }
        format!(
            "a {} of key {key:?} for limiter {:?}",
            self.mode.as_str(),
            self.limiter
        )
    }
}

/// One decision per target, in order.
pub(crate) type EachLimit = SmallVec<[Decision; 1]>;

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

    /// Run `store` under the timeout and the breaker; on failure, let the
    /// policy decide. One decision per target, in order.
    pub(crate) async fn call(
        &self,
        store: StoreFuture,
        call: &Call<'_>,
    ) -> Result<EachLimit, Error> {
        let Some(ticket) = self.breaker.try_acquire() else {
            return self.degrade(call, FailureKind::CircuitOpen, None).await;
        };
        // Timing the call needs a Tokio runtime: without one, a failure
        // the policy answers, not a panic.
        let answer = match tokio::runtime::Handle::try_current() {
            Ok(_) => tokio::time::timeout(self.timeout, store).await,
            Err(_) => Ok(Err(StoreError::unavailable(NO_RUNTIME))),
        };
        let error = match answer {
            Ok(Ok(replies)) => {
                if ticket.success() == Transition::Closed {
                    tracing::info!(
                        limiter = call.limiter,
                        "rate-limit store answers again: circuit closed, limiting resumed"
                    );
                }
                return Ok(each_limit(replies));
            }
            Ok(Err(e)) => e,
            Err(_) => StoreError::timeout(&call.store.place(), &call.doing(), self.timeout),
        };
        let kind = FailureKind::of(&error);
        if ticket.failure() == Transition::Opened {
            let b = self.breaker.config();
            tracing::warn!(
                limiter = call.limiter,
                kind = kind.as_str(),
                error = %error,
                policy = self.policy.name(),
                failures = b.failures(),
                cool_down_ms = crate::clock::millis(b.cool_down()),
                "rate-limit store keeps failing: circuit open, decisions made by the failure policy without calling it"
            );
        }
        self.degrade(call, kind, Some(error)).await
    }

    async fn degrade(
        &self,
        call: &Call<'_>,
        kind: FailureKind,
        error: Option<StoreError>,
    ) -> Result<EachLimit, Error> {
        // With the circuit open nothing below waits on Tokio: without this, a
        // task deciding in a loop would never yield, and could starve its
        // worker (timers included).
        tokio::task::coop::consume_budget().await;
        // `Err(None)`: return the store's error.
        let decided: Result<EachLimit, Option<Error>> = match &self.policy {
            FailurePolicy::FailOpen => Ok(call.specs.iter().map(fail_open).collect()),
            FailurePolicy::FailClosed => {
                let retry = self.breaker.retry_after();
                Ok(call.specs.iter().map(|s| fail_closed(s, retry)).collect())
            }
            // The fallback decides once for all the targets.
            FailurePolicy::Fallback(f) => f
                .decide(call.key, call.cost, call.mode, call.lease)
                .await
                .map(|d| call.specs.iter().map(|_| d).collect())
                .map_err(Some),
            FailurePolicy::ReturnError => Err(None),
        };
        let first = decided.as_ref().ok().and_then(|d| d.first());
        self.report(call, kind, error.as_ref(), first);
        match decided {
            Ok(d) => Ok(d),
            Err(Some(e)) => Err(e),
            Err(None) => Err(Error::Store(error.unwrap_or_else(|| {
                StoreError::unavailable("circuit breaker open: the store keeps failing")
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
        let allowed = decision.map(crate::Decision::allowed);
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

/// The store's replies as decisions.
fn each_limit(replies: Replies) -> EachLimit {
    replies
        .into_iter()
        .map(crate::algorithm::Reply::decision)
        .collect()
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("timeout", &self.timeout)
            .field("policy", &self.policy)
            .field("circuit_breaker", self.breaker.config())
            .field("circuit", &self.breaker.state())
            .finish_non_exhaustive()
    }
}

/// Admitted, with placeholders: the limit as remaining, nothing to wait.
fn fail_open(spec: &Spec) -> Decision {
    let limit = spec.max_cost();
    Decision::new(
        Reason::FailOpen,
        limit,
        limit,
        Duration::ZERO,
        None,
        Duration::ZERO,
    )
    .mark_degraded()
}

/// Denied until the breaker would let a call through again.
fn fail_closed(spec: &Spec, retry_after: Duration) -> Decision {
    let limit = spec.max_cost();
    Decision::new(
        Reason::FailClosed,
        limit,
        0,
        retry_after,
        Some(retry_after),
        Duration::ZERO,
    )
    .mark_degraded()
}

#[cfg(test)]
mod tests;
