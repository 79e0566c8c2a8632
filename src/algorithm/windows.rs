//! The window algorithms' config types; their twins are in
//! `fixed_window.rs`, `sliding_log.rs` and `sliding_window.rs`.

use super::validate::{invalid, window_types, Invalid};

window_types! {
    /// Fixed window: one counter per aligned window of time.
    ///
    /// The cheapest algorithm, and the loosest: a client that times its bursts
    /// to a window boundary gets up to twice the limit within a moment. Use it
    /// for coarse quotas (per day), where a brief 2× does not matter.
    ///
    /// ```
    /// use floodgate::algorithm::FixedWindow;
    /// use std::time::Duration;
    /// const DAILY: FixedWindow = FixedWindow::new(10_000, Duration::from_secs(86_400));
    /// assert!(FixedWindow::try_new(0, Duration::from_secs(1)).is_err());
    /// ```
    ///
    /// An invalid constant is a compile-time error:
    ///
    /// ```compile_fail
    /// use floodgate::algorithm::FixedWindow;
    /// use std::time::Duration;
    /// const NONE: FixedWindow = FixedWindow::new(0, Duration::from_secs(1));
    /// ```
    FixedWindow: "At most `limit` cost units per aligned `window` (whole ms, 1 ms to 2^40 ms; `limit` 1 to 2^40).";

    /// Sliding log: the time of every admitted request within the window.
    ///
    /// Exact: no span of `window` ever admits more than `limit`. The price is
    /// memory: one entry per admitted request, so `limit` entries per busy key.
    /// Use it for low limits that must be exact (login attempts). Rejected
    /// requests are never recorded, so a client that keeps hammering is released
    /// as soon as its old requests leave the window.
    ///
    /// ```
    /// use floodgate::algorithm::SlidingLog;
    /// use std::time::Duration;
    /// const LOGINS: SlidingLog = SlidingLog::new(5, Duration::from_secs(60));
    /// ```
    SlidingLog: "At most `limit` cost units in any span of `window` (whole ms, 1 ms to 2^40 ms; `limit` 1 to 2^16 ([`MAX_LOG`](crate::algorithm::MAX_LOG)): one entry per unit admitted; and `limit` × `window` in ms below 2^50, where the log's member numbering would lose precision).", also small_enough;

    /// Sliding window counter: the current and the previous fixed-window counts,
    /// the previous one weighted by how much of it is still inside the sliding
    /// window: `prev × (1 − (now mod w)/w) + cur`, counted in whole requests.
    ///
    /// Nearly exact with constant memory: what most gateways run. A request is
    /// denied when adding its cost to the estimate would exceed the limit.
    ///
    /// ```
    /// use floodgate::algorithm::SlidingWindow;
    /// use std::time::Duration;
    /// const API: SlidingWindow = SlidingWindow::new(100, Duration::from_secs(60));
    /// ```
    SlidingWindow: "About `limit` cost units in any span of `window` (whole ms, 1 ms to 2^40 ms; `limit` 1 to 2^40).";
}

/// The most entries a sliding log keeps per key: an admitted request writes
/// one per unit of its cost, in one call.
pub const MAX_LOG: u64 = 1 << 16;

/// At most [`MAX_LOG`] entries, and `limit` × `window` (ms) below 2^50.
const fn small_enough(log: &SlidingLog) -> Result<(), Invalid> {
    if log.limit > MAX_LOG {
        return Err(invalid!(
            "limit",
            "must be at most 2^16 for a sliding log (one entry per unit admitted): above, use a sliding window"
        ));
    }
    if (log.limit as u128) * (log.window_ms as u128) >= 1 << 50 {
        return Err(invalid!(
            "limit",
            "limit × window (ms) must stay below 2^50 for a sliding log"
        ));
    }
    Ok(())
}
