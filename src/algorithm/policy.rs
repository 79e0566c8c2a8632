use std::time::Duration;

/// How an algorithm's quota reads on the wire: `q` requests per `w`.
///
/// This is what `RateLimit-Policy: "name";q=..;w=..` reports. For the bucket
/// algorithms `w` is the time the bucket takes to refill (or drain) fully.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Policy {
    /// The quota: requests (cost units) per window.
    pub quota: u64,
    /// The window the quota applies to.
    pub window: Duration,
}
