//! The answer of one rate-limit decision.

use std::time::Duration;

/// What a limiter decided for one request.
///
/// All durations are at millisecond precision, rounded **up**, so a client
/// that waits `retry_after` is never early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Whether the request was admitted (and its cost charged).
    pub allowed: bool,
    /// The most a key can hold at once: the limit, capacity or burst.
    pub limit: u64,
    /// How many more requests of cost 1 would be admitted right now, after
    /// this decision.
    pub remaining: u64,
    /// Time until the key is back to its full quota if nothing more arrives
    /// (zero when nothing is used).
    pub reset_after: Duration,
    /// When denied: how long to wait before the same request can be admitted.
    /// `None` when allowed, and when denied because the cost can never fit
    /// (it exceeds the limit): waiting would not help.
    pub retry_after: Option<Duration>,
    /// For the leaky bucket: how long the admitted request must wait for its
    /// place in the queue. Zero for the other algorithms.
    pub delay: Duration,
    /// `true` when the store could not be asked and a failure policy (fail
    /// open, fail closed, fallback) made this decision. The numbers above are
    /// then not the shared state: the layer sends no rate-limit headers.
    pub degraded: bool,
}

impl Decision {
    /// Whether the request was denied.
    pub fn denied(&self) -> bool {
        !self.allowed
    }
}

/// The decisions of every policy of a limiter for one request, and what
/// they add up to.
#[derive(Debug, Clone, PartialEq)]
pub struct Decisions {
    /// What the policies add up to: denied if any denies (and then nothing
    /// was charged); the numbers are the most restrictive policy's.
    pub combined: Decision,
    /// Each policy's own decision, in the order they were configured.
    pub each: Vec<PolicyDecision>,
}

/// One policy's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDecision {
    /// The policy's name (the limiter's name for a single algorithm).
    pub name: std::sync::Arc<str>,
    /// Its quota as it reads on the wire.
    pub policy: crate::algorithm::Policy,
    /// What it decided.
    pub decision: Decision,
}

impl Decision {
    /// The most restrictive of several decisions: a denial that can never
    /// be admitted, else the denial with the longest wait, else the
    /// admission with the fewest remaining (then the longest reset). The
    /// result is allowed only if all are; its delay is the longest.
    pub(crate) fn combine(all: impl IntoIterator<Item = Decision>) -> Option<Decision> {
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
        let mut delay = Duration::ZERO;
        let mut degraded = false;
        let mut worst: Option<Decision> = None;
        for d in all {
            delay = delay.max(d.delay);
            degraded |= d.degraded;
            if worst.as_ref().is_none_or(|w| rank(&d) > rank(w)) {
                worst = Some(d);
            }
        }
        worst.map(|w| Decision {
            delay,
            degraded,
            ..w
        })
    }
}
