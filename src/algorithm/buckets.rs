//! The bucket algorithms' config types: `capacity` units and a rate per
//! second. Both are the virtual schedule of `gcra.rs`, the leaky bucket
//! with a delay.

use super::spec::Spec;
use super::validate::{self as check, or_panic, tri, Invalid, LEAK_PER_SEC, REFILL_PER_SEC};
use crate::{ConfigError, Quota};

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
/// use std::time::Duration;
/// const API: TokenBucket = TokenBucket::new(100, 10.0); // bursts of 100, then 10/s
/// assert_eq!(API.quota().window, Duration::from_secs(10)); // a full refill
/// assert_eq!(TokenBucket::try_new(10, f64::NAN).unwrap_err().field(), "refill_per_sec");
/// ```
///
/// An invalid constant is a compile-time error:
///
/// ```compile_fail
/// use floodgate::algorithm::TokenBucket;
/// const NONE: TokenBucket = TokenBucket::new(10, 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    capacity: u64,
    rate: f64,
}

impl TokenBucket {
    /// A bucket of `capacity` tokens (1 to 2^40) refilled at
    /// `refill_per_sec` tokens per second (finite, above 0, one token in at
    /// most 2^40 ms; a full refill, `capacity / refill_per_sec` seconds, at
    /// most 2^40 ms, else the error names `capacity`).
    ///
    /// A `const fn`: in a constant, an invalid value does not compile.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message
    /// names the field, and the panic points at the caller.
    #[track_caller]
    pub const fn new(capacity: u64, refill_per_sec: f64) -> Self {
        or_panic(Self::checked(capacity, refill_per_sec))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field instead of panicking.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `capacity` or `refill_per_sec` when it is
    /// out of bounds.
    pub fn try_new(capacity: u64, refill_per_sec: f64) -> Result<Self, ConfigError> {
        Self::checked(capacity, refill_per_sec).map_err(ConfigError::from)
    }

    const fn checked(capacity: u64, refill_per_sec: f64) -> Result<Self, Invalid> {
        let (capacity, rate) = tri!(check::bucket(capacity, refill_per_sec, REFILL_PER_SEC));
        Ok(Self { capacity, rate })
    }

    /// The limit as it reads on the wire (`RateLimit-Policy`): `capacity`
    /// per the time a full refill takes.
    pub fn quota(&self) -> Quota {
        self.to_spec().quota()
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::TokenBucket {
            capacity: self.capacity,
            rate: self.rate,
            interval_ms: 1000.0 / self.rate,
        }
    }
}

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
/// const SMOOTH: LeakyBucket = LeakyBucket::new(20, 10.0); // queue up to 20, 10/s out
/// assert_eq!(SMOOTH.quota().units, 20);
/// // A full drain over 2^40 ms is refused, naming `capacity`.
/// assert_eq!(LeakyBucket::try_new(1 << 40, 0.001).unwrap_err().field(), "capacity");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeakyBucket {
    capacity: u64,
    rate: f64,
}

impl LeakyBucket {
    /// A queue of `capacity` cost units (1 to 2^40) drained at
    /// `leak_per_sec` units per second (finite, above 0, one unit in at most
    /// 2^40 ms; a full drain, `capacity / leak_per_sec` seconds, at most
    /// 2^40 ms, else the error names `capacity`).
    ///
    /// A `const fn`: in a constant, an invalid value does not compile.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message
    /// names the field, and the panic points at the caller.
    #[track_caller]
    pub const fn new(capacity: u64, leak_per_sec: f64) -> Self {
        or_panic(Self::checked(capacity, leak_per_sec))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field instead of panicking.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `capacity` or `leak_per_sec` when it is out
    /// of bounds.
    pub fn try_new(capacity: u64, leak_per_sec: f64) -> Result<Self, ConfigError> {
        Self::checked(capacity, leak_per_sec).map_err(ConfigError::from)
    }

    const fn checked(capacity: u64, leak_per_sec: f64) -> Result<Self, Invalid> {
        let (capacity, rate) = tri!(check::bucket(capacity, leak_per_sec, LEAK_PER_SEC));
        Ok(Self { capacity, rate })
    }

    /// The limit as it reads on the wire (`RateLimit-Policy`): `capacity`
    /// per the time a full drain takes.
    pub fn quota(&self) -> Quota {
        self.to_spec().quota()
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::LeakyBucket {
            capacity: self.capacity,
            rate: self.rate,
            interval_ms: 1000.0 / self.rate,
        }
    }
}
