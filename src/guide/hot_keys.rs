//! Hot keys and many decisions per call: what floodgate does when one Redis
//! round trip per decision is the ceiling.
//!
//! Every decision on a Redis store is one atomic call of floodgate's code.
//! Two things lift that ceiling, both on the one decision path (the
//! timeout, the circuit breaker, the failure policy and the metrics apply
//! to them as to any call):
//!
//! - **many decisions per call**, on by default: decisions waiting for
//!   Redis at the same moment go out together (see
//!   [`redis_and_cluster`](super::redis_and_cluster#many-decisions-per-call)).
//!   It helps every key, keeps every decision exact, and never makes a
//!   request wait for others. Turn it off with
//!   [`max_decisions_per_call(1)`](crate::store::RedisStoreBuilder::max_decisions_per_call).
//! - **hot-key allotments**, off by default: one key that a whole fleet
//!   hammers (one partner's API key, a celebrity account, a global limit)
//!   is decided on each app server from a slice of its quota, taken from
//!   Redis in one call, instead of one call per request.
//!
//! # When to turn allotments on
//!
//! When a few keys take a large share of the traffic and their limits are
//! large: thousands a second, where one Redis key (or one Cluster shard)
//! would otherwise take every request of every app server. A limit of 10
//! a minute gains nothing (the slice would be 1); a login limit should
//! stay exact per request (use a sliding log, which refuses allotments).
//!
//! ```
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use floodgate::algorithm::TokenBucket;
//! use floodgate::store::MemoryStore; // a RedisStore in production
//! use floodgate::{HotKeys, Limiter};
//!
//! // Per partner: 5 000 requests a second with bursts of 5 000, on 6 app servers.
//! let partners = Limiter::builder(MemoryStore::new(), TokenBucket::new(5_000, 5_000.0))
//!     .name("partners")
//!     // A key is hot on a server from 100 decisions a second there (the
//!     // default); each slice is 5 000 / (10 × 6) = 83 units.
//!     .hot_keys(HotKeys::new(6))
//!     .build()?;
//! # let _ = partners; Ok(()) }
//! ```
//!
//! Set `servers` to the number of app servers that share the key, or a
//! little more: the slice is `limit / (10 × servers)`, so the units held at
//! one time stay under a tenth of the limit. Fewer servers than you said
//! only makes the slices smaller than they could be; more servers than you
//! said lets more units sit in slices (still never more admitted than the
//! limit, but a server may deny while others hold units).
//!
//! # What it costs in accuracy
//!
//! Every admitted unit was charged in Redis before it was admitted: the
//! fleet never admits more than the algorithm allows, and the price is
//! paid in the other direction.
//!
//! | algorithm | allotment lasts | over the algorithm's bound | under it |
//! |---|---|---|---|
//! | fixed window | to the window's end | never | units held at the window's end: at most a tenth of the limit |
//! | sliding window counter | to the window's end | never | the same |
//! | token bucket, GCRA | as long as the bucket takes to refill the slice, then unused units are given back | at most one slice in any interval (a unit is admitted up to that long after it was charged) | units held when a key cools, until given back |
//! | sliding log, leaky bucket | refused at build (`hot_keys` field) | | |
//!
//! A server that stops while holding a slice costs the others that slice
//! until the window ends or the bucket refills it; no key is left behind in
//! Redis (a slice is a charge of the key's own state, with its own TTL).
//! When the store fails, a server goes on deciding from the slice it holds
//! (those units were charged), and then the failure policy answers.
//!
//! While a hot key is spent, each server asks Redis once per slice: it
//! denies the key itself until Redis's wait for a slice has passed (as if
//! another server held the units), so a key far over its limit costs
//! Redis a few calls a second, not one per request.
//!
//! On a local decision, `remaining` is what Redis reported left when the
//! slice was taken plus what this server's slice still holds: other
//! servers may have spent some since. A denial of a hot key is remembered
//! by the [deny cache](crate::LimiterBuilder::deny_cache), which allotments
//! turn on.
//!
//! # Seeing it in the metrics
//!
//! | metric | what to look for |
//! |---|---|
//! | `floodgate_local_decisions_total{limiter}` | the share of `floodgate_decisions_total` decided from slices: near 1 for a hot key |
//! | `floodgate_allotments_total{limiter}` | slices taken: each one is one Redis call |
//! | `floodgate_allotment_units_total{limiter, event}` | units `taken`, `returned` (a bucket's unused units given back), `expired` (a window's unused units, lost with it): `expired` ÷ `taken` is what allotments cost in accuracy |
//!
//! `tests/hot_keys.rs` runs four servers on one key against a real Redis,
//! with and without allotments, and checks each algorithm's bound in every
//! window, 90 % of the admissions without allotments, and the calls;
//! BENCHMARKS.md measures the load.
