//! What a decision of one key is as the scripts return it ([`Reply`]),
//! and how it reads as a [`Decision`].

use super::spec::ms;
use crate::decision::{Decision, Reason};

/// A decision as the scripts return it: whole numbers, durations in ms
/// rounded up, `retry_ms` -1 for none.
///
/// The scripts reply `allowed` (1 or 0); the reply keeps why instead
/// ([`Reason::of`]), which the twins know where they decide: the metrics
/// and the `Decision` then read it rather than work it out again.
// Kept rather than worked out again: 514 -> 502 instructions a GCRA
// decision (callgrind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    /// `WithinLimit`, `OverLimit` or `CostTooHigh`.
    pub reason: Reason,
    pub limit: i64,
    pub remaining: i64,
    pub reset_ms: i64,
    pub retry_ms: i64,
    pub delay_ms: i64,
}

/// Lua's `reply()`.
pub(crate) fn reply(
    allowed: bool,
    limit: f64,
    remaining: f64,
    reset: f64,
    retry: Option<f64>,
    delay: f64,
) -> Reply {
    let retry_ms = retry.map_or(-1, ms);
    Reply {
        reason: Reason::of(allowed, retry_ms),
        limit: limit as i64,
        remaining: remaining.max(0.0) as i64,
        reset_ms: ms(reset),
        retry_ms,
        delay_ms: ms(delay),
    }
}

impl Reason {
    /// Why a script's reply came out as it did: admitted, over the limit
    /// (a retry helps), or a cost that can never fit (no retry).
    #[inline]
    pub(crate) fn of(allowed: bool, retry_ms: i64) -> Self {
        match (allowed, retry_ms >= 0) {
            (true, _) => Reason::WithinLimit,
            (false, true) => Reason::OverLimit,
            (false, false) => Reason::CostTooHigh,
        }
    }
}

impl Default for Reply {
    /// A placeholder: nothing admitted, nothing known.
    fn default() -> Self {
        Reply {
            reason: Reason::CostTooHigh,
            limit: 0,
            remaining: 0,
            reset_ms: 0,
            retry_ms: -1,
            delay_ms: 0,
        }
    }
}

impl Reply {
    /// An admission that left less than a fifth of the limit (envoy's
    /// `near_limit`): `Decision::is_near_limit`, read from the reply.
    #[inline(always)]
    pub(crate) fn is_near_limit(self) -> bool {
        self.allowed() && self.remaining.saturating_mul(5) < self.limit
    }

    /// Whether the key admits.
    #[inline(always)]
    pub(crate) fn allowed(self) -> bool {
        self.reason == Reason::WithinLimit
    }

    /// The decision this reply reads as: admitted within the limit, denied
    /// over it (with the wait), or denied for a cost that can never fit
    /// (no wait).
    #[inline(always)]
    pub(crate) fn decision(self) -> Decision {
        let n = |v: i64| v.max(0).unsigned_abs();
        Decision::from_ms(
            self.reason,
            n(self.limit),
            n(self.remaining),
            n(self.reset_ms),
            (self.retry_ms >= 0).then(|| n(self.retry_ms)),
            n(self.delay_ms),
        )
    }
}
