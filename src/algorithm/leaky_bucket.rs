use super::validate::config_type;

config_type! {
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
    #[derive(Debug, Clone, Copy, PartialEq)]
    LeakyBucket { capacity: u64 = count("capacity"), rate: f64 = rate("leak_per_sec") }
    new(capacity: u64, leak_per_sec: f64)
        "A queue of `capacity` cost units (1 to 2^40) drained at `leak_per_sec` units per second (finite, above 0, one unit in at most 2^40 ms)."
    spec(this) super::Spec::LeakyBucket { capacity: this.capacity, rate: this.rate }
}
