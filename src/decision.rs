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
