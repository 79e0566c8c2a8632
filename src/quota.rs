use std::time::Duration;

/// How a limit reads on the wire: `units` per `window`.
///
/// This is what `RateLimit-Policy: "name";q=<units>;w=<window>` reports. For
/// the bucket algorithms `window` is the time the bucket takes to refill (or
/// drain) fully; for a concurrency limit, the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    /// Requests (cost units) per window.
    pub units: u64,
    /// The window the units apply to.
    pub window: Duration,
}
