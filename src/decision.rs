//! The answer of one rate-limit decision, and why it came out so.

use std::cmp::{Ordering, Reverse};
use std::time::Duration;

use packed::PackedReason;

/// What a limiter decided for one request.
///
/// All durations are at millisecond precision, rounded **up**, so a client
/// that waits [`retry_after`](Self::retry_after) is never early.
///
/// A decision cannot contradict itself: whether it admits follows from its
/// [`Reason`], and its fields are read through methods. Outside floodgate it
/// is made only as [`within_limit`](Self::within_limit) or
/// [`over_limit`](Self::over_limit) or [`cost_too_high`](Self::cost_too_high)
/// (to write rate-limit fields with
/// [`headers`](crate::headers) in your own middleware):
///
/// ```compile_fail
/// use floodgate::{Decision, Reason};
/// // A denial that says it is within the limit cannot be written.
/// let d = Decision { allowed: false, reason: Reason::WithinLimit, ..todo!() };
/// ```
// Times kept as whole ms, read as `Duration`s: a `Duration` is 16 bytes, and
// `Result<Decision, Error>` kept its tag in the nanoseconds of one: 651 ->
// 615 instructions a memory-store GCRA decision read whole from a crate of
// its own, token bucket 617 -> 596 (benches/outside, callgrind).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    limit: u64,
    remaining: u64,
    reset_ms: u64,
    retry_ms: Option<u64>,
    delay_ms: u64,
    verdict: PackedReason,
}

// Every field is shown: the times through their getters, as `Duration`s (the
// output a derived `Debug` gave before the times were kept in ms).
#[allow(clippy::missing_fields_in_debug)]
impl std::fmt::Debug for Decision {
    /// As the getters read it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decision")
            .field("limit", &self.limit)
            .field("remaining", &self.remaining)
            .field("reset_after", &self.reset_after())
            .field("retry_after", &self.retry_after())
            .field("delay", &self.delay())
            .field("reason", &self.reason())
            .field("degraded", &self.is_degraded())
            .finish()
    }
}

/// Why a [`Decision`] came out as it did: what the layer answers, and what
/// the `reason` label of `floodgate_decisions_total` counts.
///
/// | reason | admits | the layer answers |
/// |---|---|---|
/// | [`WithinLimit`](Self::WithinLimit) | yes | the service's response, with rate-limit fields |
/// | [`OverLimit`](Self::OverLimit) | no | 429 with `Retry-After` (gRPC `RESOURCE_EXHAUSTED`) |
/// | [`CostTooHigh`](Self::CostTooHigh) | no | 429 without `Retry-After`: waiting cannot help |
/// | [`FailOpen`](Self::FailOpen) | yes | the service's response, without rate-limit fields |
/// | [`FailClosed`](Self::FailClosed) | no | 503 with `Retry-After` (gRPC `UNAVAILABLE`) |
/// | [`Exempt`](Self::Exempt) | yes | the service's response, without rate-limit fields |
/// | [`Blocked`](Self::Blocked) | no | 403 (gRPC `PERMISSION_DENIED`) |
///
/// A fallback limiter's decision keeps its own reason (and is
/// [`degraded`](Decision::is_degraded)): a client over the fallback's limit
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
    /// On the allow list ([`Exemptions`](crate::Exemptions)): admitted
    /// without a limit, nothing charged, the store not asked.
    Exempt,
    /// On the deny list ([`Exemptions`](crate::Exemptions)): refused, no
    /// wait would help, the store not asked.
    Blocked,
}

impl Reason {
    /// A short name for logs and metric labels: `within_limit`,
    /// `over_limit`, `cost_too_high`, `fail_open`, `fail_closed`, `exempt`,
    /// `blocked`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Reason::WithinLimit => "within_limit",
            Reason::OverLimit => "over_limit",
            Reason::CostTooHigh => "cost_too_high",
            Reason::FailOpen => "fail_open",
            Reason::FailClosed => "fail_closed",
            Reason::Exempt => "exempt",
            Reason::Blocked => "blocked",
        }
    }

    /// Whether a decision for this reason admits the request.
    pub fn admits(self) -> bool {
        matches!(
            self,
            Reason::WithinLimit | Reason::FailOpen | Reason::Exempt
        )
    }

    /// Where the reason is in [`ALL`](Self::ALL).
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// Every reason, in the order of its declaration.
    pub(crate) const ALL: [Reason; 7] = [
        Reason::WithinLimit,
        Reason::OverLimit,
        Reason::CostTooHigh,
        Reason::FailOpen,
        Reason::FailClosed,
        Reason::Exempt,
        Reason::Blocked,
    ];
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `d` rounded up to whole ms (saturating): what the public constructors
/// keep, so that a decision reads at the precision its docs promise.
pub(crate) fn whole_ms_up(d: Duration) -> Duration {
    let ms = d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000));
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// `d` in whole ms, rounded up (saturating): what a [`Decision`] keeps.
fn ms_up(d: Duration) -> u64 {
    whole_ms_up(d).as_millis().try_into().unwrap_or(u64::MAX)
}

impl Decision {
    /// A decision for `reason`; `retry_after` is kept only for a denial,
    /// `delay` only for an admission. The durations must be whole ms (the
    /// stores' are; the public constructors round up).
    ///
    pub(crate) fn new(
        reason: Reason,
        limit: u64,
        remaining: u64,
        reset_after: Duration,
        retry_after: Option<Duration>,
        delay: Duration,
    ) -> Self {
        Self::from_ms(
            reason,
            limit,
            remaining,
            ms_up(reset_after),
            retry_after.map(ms_up),
            ms_up(delay),
        )
    }

    /// [`new`](Self::new), with the times in whole ms (as the stores reply).
    // `#[inline]` (plain): built on every decision inside the caller's
    // crate, where `check` is instantiated; out of line it is a call of its
    // own: 769 -> 709 instructions a memory-store GCRA decision (callgrind).
    #[inline]
    pub(crate) fn from_ms(
        reason: Reason,
        limit: u64,
        remaining: u64,
        reset_ms: u64,
        retry_ms: Option<u64>,
        delay_ms: u64,
    ) -> Self {
        let admits = reason.admits();
        Self {
            limit,
            remaining,
            reset_ms,
            retry_ms: retry_ms.filter(|_| !admits),
            delay_ms: if admits { delay_ms } else { 0 },
            verdict: PackedReason::new(reason, false),
        }
    }

    /// An admission within the limit: `limit` in all, `remaining` left,
    /// full again after `reset_after`.
    #[must_use]
    pub fn within_limit(limit: u64, remaining: u64, reset_after: Duration) -> Self {
        Self::new(
            Reason::WithinLimit,
            limit,
            remaining,
            whole_ms_up(reset_after),
            None,
            Duration::ZERO,
        )
    }

    /// A denial over the limit, to be retried after `retry_after`.
    #[must_use]
    pub fn over_limit(
        limit: u64,
        remaining: u64,
        reset_after: Duration,
        retry_after: Duration,
    ) -> Self {
        Self::new(
            Reason::OverLimit,
            limit,
            remaining,
            whole_ms_up(reset_after),
            Some(whole_ms_up(retry_after)),
            Duration::ZERO,
        )
    }

    /// A denial for a cost that exceeds the most the limit can ever hold:
    /// no wait would help, so there is no `retry_after`.
    #[must_use]
    pub fn cost_too_high(limit: u64, remaining: u64, reset_after: Duration) -> Self {
        Self::new(
            Reason::CostTooHigh,
            limit,
            remaining,
            whole_ms_up(reset_after),
            None,
            Duration::ZERO,
        )
    }

    /// The same decision, marked as made in the store's place (by a failure
    /// policy, or by your own code when the store could not be asked): the
    /// header writers of [`headers`](crate::headers) then leave it out.
    #[must_use]
    pub fn mark_degraded(self) -> Self {
        Self {
            verdict: PackedReason::new(self.reason(), true),
            ..self
        }
    }

    /// The same decision `since` later: its waits shortened by that much,
    /// but a denial's wait by 1 ms less. The store computes a fresh wait in
    /// floating point and rounds it up to the ms, so `ceil(x - since)` can
    /// come out 1 ms above `ceil(x) - since`; a wait told to a client must
    /// never be short (measured: 55 vs 56 ms, `tests/deny_cache.rs`).
    pub(crate) fn aged(self, since: Duration) -> Self {
        let since = ms_up(since);
        let margin = u64::from(since != 0);
        Self {
            retry_ms: self
                .retry_ms
                .map(|r| r.saturating_sub(since).saturating_add(margin)),
            reset_ms: self.reset_ms.saturating_sub(since),
            ..self
        }
    }

    /// The same decision with `remaining` replaced.
    pub(crate) fn with_remaining(self, remaining: u64) -> Self {
        Self { remaining, ..self }
    }

    /// Whether the request was admitted (and its cost charged): implied by
    /// its [`reason`](Self::reason).
    pub fn allowed(&self) -> bool {
        self.reason().admits()
    }

    /// Whether the request was denied.
    pub fn denied(&self) -> bool {
        !self.allowed()
    }

    /// The most a key can hold at once: the limit, capacity or burst (for a
    /// concurrency limit, the most requests in flight).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// How many more requests of cost 1 would be admitted right now, after
    /// this decision (for [`Limiter::peek`](crate::Limiter::peek): as the
    /// key is now).
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Time until the key is back to its full quota if nothing more arrives
    /// (zero when nothing is used).
    pub fn reset_after(&self) -> Duration {
        Duration::from_millis(self.reset_ms)
    }

    /// When denied over the limit: how long to wait before the same request
    /// can be admitted. `None` when admitted, and when denied for a cost
    /// that can never fit, or by a failure policy that cannot tell.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_ms.map(Duration::from_millis)
    }

    /// How long the admitted request must wait before it goes on: the time
    /// booked for a reservation ([`Limiter::reserve`](crate::Limiter::reserve)),
    /// or a leaky bucket's place in its queue. Zero for a check of the
    /// other algorithms, and for a denial.
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_ms)
    }

    /// Why the decision came out as it did.
    pub fn reason(&self) -> Reason {
        self.verdict.reason()
    }

    /// `true` when the store could not be asked and the failure policy made
    /// this decision (fail open, fail closed, or a fallback limiter, whose
    /// `reason` is its own). The numbers are then not the shared state: the
    /// layer sends no rate-limit fields.
    pub fn is_degraded(&self) -> bool {
        self.verdict.degraded()
    }

    /// How restrictive this decision is, to rank the limits of one request:
    /// a denial before an admission; among denials, one no wait can help,
    /// then the longest wait; among admissions, the fewest remaining; then
    /// the longest reset. The greatest is the most restrictive. The one
    /// ranking of floodgate: [`most_restrictive`](Self::most_restrictive)
    /// (what `check` returns) and the single-limit header fields both use it.
    fn restrictiveness(&self) -> (bool, (bool, u64), Reverse<u64>, u64) {
        // The wait: none at all (no wait helps) above any in ms.
        let wait = match self.retry_ms {
            None => (self.denied(), 0),
            Some(r) => (false, r),
        };
        (self.denied(), wait, Reverse(self.remaining), self.reset_ms)
    }

    /// Which of `a` and `b` is more restrictive (see `restrictiveness`).
    pub(crate) fn cmp_restrictive(a: &Decision, b: &Decision) -> Ordering {
        a.restrictiveness().cmp(&b.restrictiveness())
    }

    /// What the decisions of one request's limits add up to: the most
    /// restrictive of `first` and `rest` (the first given on a tie). It
    /// admits only if all admit; its delay is the longest, and it is
    /// degraded if any is.
    pub(crate) fn most_restrictive(first: Decision, rest: &[Decision]) -> Decision {
        let mut worst = first;
        let (mut delay, mut degraded) = (first.delay_ms, first.is_degraded());
        for d in rest {
            delay = delay.max(d.delay_ms);
            degraded |= d.is_degraded();
            if Self::cmp_restrictive(d, &worst) == Ordering::Greater {
                worst = *d;
            }
        }
        Decision {
            delay_ms: if worst.allowed() { delay } else { 0 },
            verdict: PackedReason::new(worst.reason(), degraded),
            ..worst
        }
    }
}

mod packed;
#[cfg(test)]
mod tests;
