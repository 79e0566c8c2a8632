use super::validate::config_type;

config_type! {
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
    #[derive(Debug, Clone, Copy, PartialEq)]
    TokenBucket { capacity: u64 = count("capacity"), rate: f64 = rate("refill_per_sec") }
    new(capacity: u64, refill_per_sec: f64)
        "A bucket of `capacity` tokens (1 to 2^40) refilled at `refill_per_sec` tokens per second (finite, above 0, one token in at most 2^40 ms)."
    spec(this) super::Spec::TokenBucket { capacity: this.capacity, rate: this.rate }
}
