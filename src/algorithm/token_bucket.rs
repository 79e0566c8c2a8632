use super::spec::Spec;
use super::validate;
use crate::ConfigError;

/// Token bucket: holds up to `capacity` tokens, refilled continuously at
/// `refill_per_sec`; a request takes `cost` tokens if they are there.
///
/// "A sustained rate plus an allowed burst": a full bucket admits `capacity`
/// at once, then the refill rate. Choose the capacity as the burst you are
/// willing to accept. A key nobody used is a full bucket.
///
/// Kept as the time until the bucket is full again rather than as a token
/// count: a bucket refilled at `r` per second is exactly GCRA with one token
/// every `1000 / r` ms and a burst of `capacity`, and a backlog of time needs
/// no fractional refills added up.
///
/// ```
/// use floodgate::algorithm::TokenBucket;
/// let api = TokenBucket::new(100, 10.0); // bursts of 100, then 10/s
/// assert!(TokenBucket::try_new(10, f64::NAN).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    capacity: u64,
    rate: f64,
}

impl TokenBucket {
    /// A bucket of `capacity` tokens refilled at `refill_per_sec` tokens per second.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message names the field.
    pub fn new(capacity: u64, refill_per_sec: f64) -> Self {
        validate::or_panic(Self::try_new(capacity, refill_per_sec))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field: `capacity` of 0, `refill_per_sec` not finite or not above 0.
    pub fn try_new(capacity: u64, refill_per_sec: f64) -> Result<Self, ConfigError> {
        Ok(Self {
            capacity: validate::limit("capacity", capacity)?,
            rate: validate::rate("refill_per_sec", refill_per_sec)?,
        })
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::TokenBucket {
            capacity: self.capacity,
            rate: self.rate,
        }
    }
}
