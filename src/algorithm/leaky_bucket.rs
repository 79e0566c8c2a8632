use super::spec::Spec;
use super::validate;
use crate::ConfigError;

/// Leaky bucket as a queue, like nginx `limit_req` without `nodelay`.
///
/// The queue drains at `leak_per_sec`. An admitted request gets a
/// [`delay`](crate::Decision::delay): the time for what is ahead of it to
/// drain, so output is smooth whatever the input. A request is rejected when
/// the queue has no room left for its cost. nginx's `burst=B` (which admits
/// one request plus `B` queued) is `LeakyBucket::new(B + 1, rate)`.
///
/// Admission is the same as a token bucket of the same capacity and rate; the
/// difference is the delay. Queued requests cost the user latency, which is
/// why a plain rejection (token bucket, GCRA) usually suits APIs better.
///
/// Kept as the time until the queue is empty: the delay of an admitted
/// request.
///
/// ```
/// use floodgate::algorithm::LeakyBucket;
/// let smooth = LeakyBucket::new(20, 10.0); // queue up to 20, 10/s out
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeakyBucket {
    capacity: u64,
    rate: f64,
}

impl LeakyBucket {
    /// A queue of `capacity` cost units drained at `leak_per_sec` units per second.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message names the field.
    pub fn new(capacity: u64, leak_per_sec: f64) -> Self {
        validate::or_panic(Self::try_new(capacity, leak_per_sec))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid field.
    pub fn try_new(capacity: u64, leak_per_sec: f64) -> Result<Self, ConfigError> {
        Ok(Self {
            capacity: validate::limit("capacity", capacity)?,
            rate: validate::rate("leak_per_sec", leak_per_sec)?,
        })
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::LeakyBucket {
            capacity: self.capacity,
            rate: self.rate,
        }
    }
}
