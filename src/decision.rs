//! The answer of one rate-limit decision, and why it came out so.

use crate::Quota;
use std::sync::Arc;
use std::time::Duration;

/// What a limiter decided for one request.
///
/// All durations are at millisecond precision, rounded **up**, so a client
/// that waits `retry_after` is never early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Whether the request was admitted (and its cost charged).
    pub allowed: bool,
    /// The most a key can hold at once: the limit, capacity or burst (for a
    /// concurrency limit, the most requests in flight).
    pub limit: u64,
    /// How many more requests of cost 1 would be admitted right now, after
    /// this decision.
    pub remaining: u64,
    /// Time until the key is back to its full quota if nothing more arrives
    /// (zero when nothing is used).
    pub reset_after: Duration,
    /// When denied over the limit: how long to wait before the same request
    /// can be admitted. `None` when allowed, and when denied for a cost that
    /// can never fit, or by a failure policy that cannot tell.
    pub retry_after: Option<Duration>,
    /// For the leaky bucket: how long the admitted request must wait for its
    /// place in the queue. Zero for the other algorithms.
    pub delay: Duration,
    /// Why the decision came out as it did.
    pub reason: Reason,
    /// `true` when the store could not be asked and the failure policy made
    /// this decision (fail open, fail closed, or a fallback limiter, whose
    /// `reason` is its own). The numbers are then not the shared state: the
    /// layer sends no rate-limit fields.
    pub degraded: bool,
}

/// Why a [`Decision`] came out as it did: what the layer answers, and what
/// the `reason` label of `floodgate_decisions_total` counts.
///
/// | reason | allowed | the layer answers |
/// |---|---|---|
/// | [`WithinLimit`](Self::WithinLimit) | yes | the service's response, with rate-limit fields |
/// | [`OverLimit`](Self::OverLimit) | no | 429 with `Retry-After` (gRPC `RESOURCE_EXHAUSTED`) |
/// | [`CostTooHigh`](Self::CostTooHigh) | no | 429 without `Retry-After`: waiting cannot help |
/// | [`FailOpen`](Self::FailOpen) | yes | the service's response, without rate-limit fields |
/// | [`FailClosed`](Self::FailClosed) | no | 503 with `Retry-After` (gRPC `UNAVAILABLE`) |
///
/// A fallback limiter's decision keeps its own reason (and is
/// [`degraded`](Decision::degraded)): a client over the fallback's limit
/// gets a 429, as it is over a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// Within every limit: admitted (for a peek: would be; a refund or a
    /// release always is).
    WithinLimit,
    /// Over a limit: denied until `retry_after`.
    OverLimit,
    /// The cost exceeds the most the limit can ever hold: denied, and no
    /// wait would help.
    CostTooHigh,
    /// The store could not decide; the failure policy admits.
    FailOpen,
    /// The store could not decide; the failure policy denies.
    FailClosed,
}

impl Reason {
    /// A short name for logs and metric labels: `within_limit`,
    /// `over_limit`, `cost_too_high`, `fail_open`, `fail_closed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::WithinLimit => "within_limit",
            Reason::OverLimit => "over_limit",
            Reason::CostTooHigh => "cost_too_high",
            Reason::FailOpen => "fail_open",
            Reason::FailClosed => "fail_closed",
        }
    }

    /// Where the reason is in [`ALL`](Self::ALL).
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// Every reason, in the order of its declaration.
    pub(crate) const ALL: [Reason; 5] = [
        Reason::WithinLimit,
        Reason::OverLimit,
        Reason::CostTooHigh,
        Reason::FailOpen,
        Reason::FailClosed,
    ];
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Decision {
    /// Whether the request was denied.
    pub fn denied(&self) -> bool {
        !self.allowed
    }

    /// The most restrictive of `first` and `rest`: a denial that can never
    /// be admitted, else the denial with the longest wait, else the
    /// admission with the fewest remaining (then the longest reset). The
    /// result is allowed only if all are; its delay is the longest, and it
    /// is degraded if any is.
    pub(crate) fn combine(first: Decision, rest: &[Decision]) -> Decision {
        if rest.is_empty() {
            return first;
        }
        let rank = |d: &Decision| {
            let wait = match d.retry_after {
                None if !d.allowed => Duration::MAX,
                r => r.unwrap_or_default(),
            };
            (
                !d.allowed,
                wait,
                std::cmp::Reverse(d.remaining),
                d.reset_after,
            )
        };
        let mut worst = first;
        let (mut delay, mut degraded) = (first.delay, first.degraded);
        for d in rest {
            delay = delay.max(d.delay);
            degraded |= d.degraded;
            if rank(d) > rank(&worst) {
                worst = *d;
            }
        }
        Decision {
            delay,
            degraded,
            ..worst
        }
    }
}

/// The decisions of every limit of a limiter for one request, and what they
/// add up to.
#[derive(Debug, Clone, PartialEq)]
pub struct Decisions {
    /// What the limits add up to: denied if any denies (and then nothing
    /// was charged); the numbers are the most restrictive limit's.
    pub combined: Decision,
    /// Each limit's own decision, in the order they were configured.
    pub each: Vec<LimitDecision>,
}

/// One limit's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitDecision {
    /// The limit's name (the limiter's name for a single algorithm).
    pub name: Arc<str>,
    /// Its quota as it reads on the wire.
    pub quota: Quota,
    /// What it decided.
    pub decision: Decision,
}
