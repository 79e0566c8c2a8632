//! Choosing an algorithm, and its numbers.
//!
//! "At most 10 requests per second per client" has several reasonable
//! definitions, and they differ exactly where it matters: at bursts and at
//! window boundaries. floodgate has six, each a small config type in
//! [`algorithm`](crate::algorithm), and each decides the same on Redis and
//! in memory.
//!
//! | algorithm | exact? | bursts | Redis memory per client | use for |
//! |---|---|---|---|---|
//! | [`FixedWindow`] | no: up to 2× at window boundaries | uncontrolled | 1 key, 56 B | coarse limits (per day), where a brief 2× is fine |
//! | [`SlidingLog`] | yes | none above the limit | 1 sorted set, O(limit): 216 B at limit 10 | low limits that must be exact (login attempts) |
//! | [`SlidingWindow`] (sliding window counter) | nearly | small overshoot | 1 key, 56 B | most API rate limits |
//! | [`TokenBucket`] | to its definition | up to capacity | 1 key, 88 B | APIs that allow short bursts |
//! | [`LeakyBucket`] | to its definition | queued and delayed, not rejected | 1 key, 88 B | smoothing output (like nginx `limit_req` without `nodelay`) |
//! | [`Gcra`] | to its definition | up to burst | 1 key, 104 B | a rate per period plus a burst, stated separately |
//!
//! Memory is `MEMORY USAGE` on Redis 7.0 after the same 10 s of traffic for
//! one client at a limit of 10 per second (BENCHMARKS.md, section "Redis
//! memory per idle client"; `cargo test --test redis_memory -- --nocapture`
//! measures it again). The token bucket, leaky bucket and GCRA keep the same
//! state (how much work is queued, and since when); GCRA's row is larger only
//! because its key name is a few bytes longer. Every algorithm keeps one key
//! per client, and the key expires once the client has been idle long
//! enough for it not to matter, so idle clients cost nothing. Only the
//! sliding log grows with the limit: one entry per admitted unit in the
//! window, so 10 000 per hour means up to 10 000 entries per client, and a
//! sliding log's limit is at most [`MAX_LOG`](crate::algorithm::MAX_LOG)
//! (2^16). In process, a [`MemoryStore`] holds about
//! 130 to 170 B per key for a token bucket and 170 to 310 B for a sliding
//! log at limit 10 (BENCHMARKS.md, "Memory store under a key spray").
//!
//! # What the differences look like
//!
//! `cargo run --example compare` runs the same traffic through all six;
//! `cargo run --example compare -- --charts docs/charts` also draws the
//! charts in the repository's `docs/charts/`:
//!
//! - `docs/charts/boundary_burst.svg`: 15 requests at t = 0.990 s and 15 at
//!   t = 1.010 s against 10 per second. The fixed window admits 20 within
//!   20 ms (10 in each window), the sliding window counter 11 (its estimate
//!   at 1.010 s is 10 × 0.99 = 9.9, under the limit), all the others 10.
//! - `docs/charts/steady_overload.svg`: 200 requests at random times over
//!   10 s, twice the limit. All admit about the long-run rate (93 to 108),
//!   but the most admitted in any one-second span differs: sliding log 10,
//!   sliding window 12, fixed window 17, and 19 for the token bucket, leaky
//!   bucket and GCRA, by design: a full bucket of 10, plus 10 refilled during
//!   that second.
//! - `docs/charts/burst_idle_burst.svg`: bursts between idle spells. The
//!   buckets refill while the client is idle and take a full burst each
//!   time; the windows depend on where the burst falls.
//!
//! The charts, built into this page from those files (click to open):
//!
//! <style>.floodgate-chart svg { width: 100%; height: auto; }</style>
//! <details class="floodgate-chart"><summary>The boundary burst</summary>
#![doc = include_str!("../../docs/charts/boundary_burst.svg")]
//! </details>
//! <details class="floodgate-chart"><summary>Steady overload</summary>
#![doc = include_str!("../../docs/charts/steady_overload.svg")]
//! </details>
//! <details class="floodgate-chart"><summary>Burst, idle, burst</summary>
#![doc = include_str!("../../docs/charts/burst_idle_burst.svg")]
//! </details>
//!
//! The boundary burst, run here on a [`MemoryStore`] with a
//! [`ManualClock`] (the same code runs on Redis):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::algorithm::*;
//! use floodgate::{clock::ManualClock, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! /// How many of 15 requests at 0.990 s and 15 at 1.010 s are admitted.
//! async fn boundary_burst<A: Algorithm>(algorithm: A) -> Result<(usize, usize), Box<dyn std::error::Error>> {
//!     let t0 = 1_791_860_000_000; // a window boundary
//!     let clock = ManualClock::new(t0);
//!     let limiter = Limiter::builder(MemoryStore::new(), algorithm).clock(clock.clone()).build()?;
//!     let mut admitted = [0, 0];
//!     for (i, at) in [990, 1010].into_iter().enumerate() {
//!         clock.set(t0 + at);
//!         for _ in 0..15 {
//!             admitted[i] += usize::from(limiter.check("ana", 1).await?.allowed());
//!         }
//!     }
//!     Ok((admitted[0], admitted[1]))
//! }
//!
//! let second = Duration::from_secs(1);
//! assert_eq!(boundary_burst(FixedWindow::new(10, second)).await?, (10, 10));
//! assert_eq!(boundary_burst(SlidingLog::new(10, second)).await?, (10, 0));
//! assert_eq!(boundary_burst(SlidingWindow::new(10, second)).await?, (10, 1));
//! assert_eq!(boundary_burst(TokenBucket::new(10, 10.0)).await?, (10, 0));
//! assert_eq!(boundary_burst(LeakyBucket::new(10, 10.0)).await?, (10, 0));
//! assert_eq!(boundary_burst(Gcra::new(10, second)).await?, (10, 0));
//! # Ok(()) }
//! ```
//!
//! # How to choose
//!
//! - **No strong reason otherwise: [`SlidingWindow`]** for per-client API
//!   limits ("100 per minute"), or **[`Gcra`]** when you want to state the
//!   burst separately from the rate. Both are constant memory and what most
//!   gateways run.
//! - **The limit protects something that must never see more than N in any
//!   window** (login attempts, OTP codes, an expensive downstream with a
//!   hard limit): **[`SlidingLog`]**, with a low limit. It is the only exact
//!   one; its memory is the price.
//! - **Per day or per month limits**, where a 2× moment at midnight does not
//!   matter: **[`FixedWindow`]**, the cheapest. Never for security limits:
//!   an attacker who times bursts to the boundary gets twice the attempts.
//!   Its windows are aligned to the Unix epoch (UTC), not to each client's
//!   first request, so every client's window ends at the same moment,
//!   unless [jittered](#windows-without-a-herd-at-reset).
//! - **Bursty clients that should be allowed a page load's worth at once**:
//!   **[`TokenBucket`]** (or [`Gcra`]: the same admissions and the same
//!   state, configured as a rate per period and a burst). Choose the
//!   capacity as the burst you are willing to accept: too small rejects the
//!   parallel requests a single page load fires.
//! - **The backend needs evenly spaced requests**: **[`LeakyBucket`]**. It
//!   admits like a token bucket, but an admitted request waits for its place
//!   in the queue ([`Decision::delay`](crate::Decision::delay); the layer
//!   sleeps before calling your service). Queued requests cost your users
//!   latency and hold a connection while they wait, so for APIs a prompt
//!   rejection is usually better.
//!
//! # Windows without a herd at reset
//!
//! A window's boundaries are the same for every client: aligned to the
//! Unix epoch, every key of a limit resets at the same instant. Clients
//! that were denied and wait their `Retry-After`, as well-behaved clients
//! do, then all come back at that instant: a herd, one spike on your
//! service and on Redis at every boundary. `.jittered()`, on
//! [`FixedWindow`] and [`SlidingWindow`], cures it: each key's windows
//! start at an offset of its own in `[0, window)`, taken from the key
//! (XXH3-64 of its bytes modulo the window, the same on every server, in
//! memory and on Redis, across restarts and releases), so the resets of
//! many keys spread evenly over the window. Each client still gets its
//! limit per window, and `reset_after`, `Retry-After` and the `RateLimit`
//! fields tell it its own reset. Turning the option on or off starts every
//! key afresh (a jittered limit keeps its state under a name of its own).
//! Keep a limit aligned when its window is a promise to users ("10 000 per
//! UTC day"). In `tests/jitter.rs` (1 000 clients at 10 a minute, each
//! sending until denied, then waiting its `Retry-After`, on Redis and in
//! memory), the busiest 100 ms after the start admits 10 000 requests with
//! aligned fixed windows and 70 with jittered ones (1 000 and 26 with
//! sliding windows), out of about the same total in the two minutes after.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::algorithm::FixedWindow;
//! use floodgate::clock::ManualClock;
//! use floodgate::{store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! let hourly = FixedWindow::new(100, Duration::from_secs(3_600));
//! let clock = ManualClock::new(1_800_000_000_000 + 1_234_567);
//! for alg in [hourly, hourly.jittered()] {
//!     let limiter = Limiter::builder(MemoryStore::new(), alg).clock(clock.clone()).build()?;
//!     // 1 000 clients spend their hour's quota now, and come back at their reset.
//!     let mut back_per_minute = vec![0; 61];
//!     for c in 0..1_000 {
//!         let d = limiter.check(&format!("client-{c}"), 100).await?;
//!         back_per_minute[d.reset_after().as_secs() as usize / 60] += 1;
//!     }
//!     let busiest = *back_per_minute.iter().max().unwrap();
//!     if alg.is_jittered() {
//!         assert!(busiest < 50); // about 17 a minute, every minute of the hour
//!     } else {
//!         assert_eq!(busiest, 1_000); // the herd: all in the same minute
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Choosing the numbers
//!
//! Each constructor is a `const fn` that names its fields: an invalid
//! constant does not compile, and an invalid value at run time panics with
//! a message naming the field. Each has a `try_new` that returns a
//! [`ConfigError`](crate::ConfigError) naming the bad field instead (for
//! limits read from configuration files):
//!
//! ```
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use floodgate::algorithm::*;
//! use std::time::Duration;
//!
//! let minute = Duration::from_secs(60);
//! let api = SlidingWindow::new(100, minute);          // about 100 in any minute
//! let logins = SlidingLog::new(5, 15 * minute);       // exactly 5 in any 15 minutes
//! let daily = FixedWindow::new(10_000, 24 * 60 * minute); // 10 000 per UTC day
//! let bursty = TokenBucket::new(40, 20.0);            // bursts of 40, then 20/s
//! let same = Gcra::new(20, Duration::from_secs(1)).try_burst(40)?; // the same admissions
//! let smooth = LeakyBucket::new(21, 10.0);            // nginx `rate=10r/s burst=20`
//!
//! let err = SlidingWindow::try_new(100, Duration::from_micros(1500)).unwrap_err();
//! assert_eq!(err.field(), "window");
//! assert_eq!(err.to_string(), "invalid `window`: must be a whole number of milliseconds");
//! # Ok(()) }
//! ```
//!
//! - A window or period is whole milliseconds, at least 1 ms; a limit,
//!   capacity or burst at least 1. The upper bounds, and everything else
//!   that is refused, are in [`configuration`](super::configuration).
//! - [`Gcra::new(limit, period)`](crate::algorithm::Gcra::new) admits `limit` per `period` at
//!   an even pace, one every `period / limit`; its burst defaults to `limit`.
//!   `Gcra::new(10, 1 s)` with a burst of 1 allows no burst at all: one request every
//!   100 ms. go-redis/redis_rate's `Burst` is the same number; redis-cell's
//!   `max_burst` is one less.
//! - [`TokenBucket::new(capacity, refill_per_sec)`](crate::algorithm::TokenBucket::new) is
//!   exactly `Gcra::new(refill_per_sec, 1 s)` with a burst of `capacity` for whole
//!   rates; what differs is the quota it reports to clients in
//!   `RateLimit-Policy` (see [`headers_and_clients`](super::headers_and_clients)):
//!   the bucket reports its capacity per time to refill fully, GCRA its
//!   limit per period.
//! - nginx's `limit_req zone=... rate=R burst=B` (which admits one request
//!   plus `B` queued) is `LeakyBucket::new(B + 1, R)`; with `nodelay` it is
//!   `TokenBucket::new(B + 1, R)`.
//!
//! Changing the algorithm of a running limiter starts every client afresh:
//! each algorithm keeps its state under its own key name. Changing only the
//! numbers keeps the state (see also limits chosen per request, in
//! [`several_limits`](super::several_limits#tiers-limits-per-request)).
//!
//! Several algorithms on one key at once ("10 per second *and* 1000 per
//! hour") are [`Limits`](crate::algorithm::Limits), in
//! [`several_limits`](super::several_limits).
//!
//! [`FixedWindow`]: crate::algorithm::FixedWindow
//! [`SlidingLog`]: crate::algorithm::SlidingLog
//! [`SlidingWindow`]: crate::algorithm::SlidingWindow
//! [`TokenBucket`]: crate::algorithm::TokenBucket
//! [`LeakyBucket`]: crate::algorithm::LeakyBucket
//! [`Gcra`]: crate::algorithm::Gcra
//! [`MemoryStore`]: crate::store::MemoryStore
//! [`ManualClock`]: crate::clock::ManualClock
