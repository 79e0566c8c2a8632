//! The bucket algorithms' config types: both are the virtual schedule of
//! `gcra.rs`, the leaky bucket with a delay.

use super::validate::bucket_types;

bucket_types! {
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
    /// const API: TokenBucket = TokenBucket::new(100, 10.0); // bursts of 100, then 10/s
    /// assert!(TokenBucket::try_new(10, f64::NAN).is_err());
    /// ```
    TokenBucket(refill_per_sec = "refill_per_sec"): "A bucket of `capacity` tokens (1 to 2^40) refilled at `refill_per_sec` tokens per second (finite, above 0, one token in at most 2^40 ms; a full refill, `capacity / refill_per_sec` seconds, at most 2^40 ms, else the error names `capacity`).";

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
    /// ```
    LeakyBucket(leak_per_sec = "leak_per_sec"): "A queue of `capacity` cost units (1 to 2^40) drained at `leak_per_sec` units per second (finite, above 0, one unit in at most 2^40 ms; a full drain, `capacity / leak_per_sec` seconds, at most 2^40 ms, else the error names `capacity`).";
}
