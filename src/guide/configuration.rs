//! What cannot be written, and what `build` rejects.
//!
//! floodgate checks a configuration once, when it is made, and never per
//! request. Some mistakes cannot be written at all: a type or the compiler
//! refuses them. The others are refused where the value is given, by
//! `try_new`, `try_with`, `try_burst`, a store's constructor or a builder's
//! `build`, with a [`ConfigError`](crate::ConfigError) that names the field
//! ([`field()`](crate::ConfigError::field)) and says why.
//!
//! # The rules
//!
//! | what | rule | field |
//! |---|---|---|
//! | a limit, capacity or burst | 1 to 2^40 | `limit`, `capacity`, `burst` |
//! | a window, period, lease or cool-down | whole milliseconds, 1 ms to 2^40 ms (about 34 years) | `window`, `period`, `lease`, `cool_down` |
//! | a rate per second | finite and above 0; one unit takes at most 2^40 ms (so at least 1000 / 2^40 per second) and at least 2^-40 ms (so at most 2^40 per ms) | `refill_per_sec`, `leak_per_sec` |
//! | a sliding log | `limit` at most [`MAX_LOG`](crate::algorithm::MAX_LOG) (2^16: one entry per unit admitted), `limit` × `window` in ms below 2^50 | `limit` |
//! | a bucket | the time to refill or drain fully, `capacity` / rate, at most 2^40 ms | `capacity` |
//! | a GCRA burst | `burst` × `period` / `limit` at most 2^40 ms | `burst` |
//! | the name of a limit in [`Limits`](crate::algorithm::Limits) | 1 to 32 characters of `A-Z a-z 0-9 _ - .`, not used twice | `name` |
//! | the limits of one [`Limits`](crate::algorithm::Limits) | at most [`MAX_LIMITS`](crate::algorithm::MAX_LIMITS) (16) | `limits` |
//! | a limiter's prefix | at most 64 bytes, no `{` or `}` | `prefix` |
//! | a limiter's name | 1 to 64 characters of `A-Z a-z 0-9 _ - .` | `name` |
//! | a limiter's timeout | at least 1 ms | `timeout` |
//! | a fallback | a [`Limiter`](crate::Limiter) for a rate limiter, a [`ConcurrencyLimiter`](crate::concurrency::ConcurrencyLimiter) for a concurrency limiter | `on_store_failure` |
//! | a concurrency limit | 1 to 2^20 requests in flight | `max` |
//! | a circuit breaker | at least 1 failure | `failures` |
//! | a Redis URL, cluster nodes | `redis://`, `rediss://` (TLS), `redis+sentinel://`, `rediss+sentinel://`, `unix://`; at least one node; certificates that parse as PEM and a URL with TLS for them | `url`, `nodes`, `ca_certificate`, `client_certificate`, `sentinel_password` |
//! | a header to key on | a valid header name; `max_len` at least 1 byte | `name`, `max_len` |
//! | IP grouping | `ipv4_prefix` 1 to 32, `ipv6_prefix` 1 to 128 | `ipv4_prefix`, `ipv6_prefix` |
//! | proxies trusted by count | `trusted_hops` at most 64 | `trusted_hops` |
//!
//! The bounds on counts, windows and rates keep each of them well within
//! what Lua's doubles hold exactly (2^53), for the Redis code. When two
//! values are wrong, the first in the constructor's order is named.
//!
//! # Values known at run time: `try_new`
//!
//! Numbers read from a file or the environment go through `try_new`, and
//! `?` carries the error up with the field it names:
//!
//! ```
//! use floodgate::algorithm::{Gcra, SlidingLog, SlidingWindow, TokenBucket};
//! use floodgate::{store::MemoryStore, ConfigError, Limiter};
//! use std::time::Duration;
//!
//! fn api(limit: u64, per_ms: u64, burst: u64) -> Result<Limiter<Gcra>, ConfigError> {
//!     let gcra = Gcra::try_new(limit, Duration::from_millis(per_ms))?.try_burst(burst)?;
//!     Limiter::builder(MemoryStore::new(), gcra).name("api").build()
//! }
//!
//! assert!(api(100, 1_000, 200).is_ok());
//! assert_eq!(api(0, 1_000, 200).unwrap_err().field(), "limit");
//! assert_eq!(api(100, 0, 200).unwrap_err().field(), "period");
//! assert_eq!(api(100, 1_000, 0).unwrap_err().field(), "burst");
//!
//! let e = SlidingWindow::try_new(100, Duration::from_micros(1_500)).unwrap_err();
//! assert_eq!(e.to_string(), "invalid `window`: must be a whole number of milliseconds");
//! let e = TokenBucket::try_new(100, f64::NAN).unwrap_err();
//! assert_eq!(e.field(), "refill_per_sec");
//! // One entry per unit admitted: past 2^16, use a sliding window.
//! let e = SlidingLog::try_new(100_000, Duration::from_secs(3_600)).unwrap_err();
//! assert_eq!(e.field(), "limit");
//! ```
//!
//! # Constants: checked by the compiler
//!
//! Every algorithm's `new` is a `const fn`. A constant is evaluated when
//! the crate compiles, so an invalid one is a compile-time error that names
//! the field, and a limit written in the code can never fail at run time.
//! These compile:
//!
//! ```
//! use floodgate::algorithm::{FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket};
//! use floodgate::failure::CircuitBreaker;
//! use std::time::Duration;
//!
//! const DAILY: FixedWindow = FixedWindow::new(10_000, Duration::from_secs(86_400));
//! const LOGINS: SlidingLog = SlidingLog::new(5, Duration::from_secs(900));
//! const API: SlidingWindow = SlidingWindow::new(100, Duration::from_secs(60));
//! const BURSTY: TokenBucket = TokenBucket::new(100, 10.0);
//! const SMOOTH: LeakyBucket = LeakyBucket::new(20, 10.0);
//! const STEADY: Gcra = Gcra::new(10, Duration::from_secs(1));
//! const PATIENT: CircuitBreaker = CircuitBreaker::new(10, Duration::from_secs(1));
//! ```
//!
//! and each of these, the same with one value out of bounds, does not:
//!
//! ```compile_fail,E0080
//! use floodgate::algorithm::FixedWindow;
//! use std::time::Duration;
//! const DAILY: FixedWindow = FixedWindow::new(0, Duration::from_secs(86_400));
//! ```
//!
//! ```compile_fail,E0080
//! use floodgate::algorithm::SlidingLog;
//! use std::time::Duration;
//! const LOGINS: SlidingLog = SlidingLog::new(5, Duration::from_micros(900_000_500));
//! ```
//!
//! ```compile_fail,E0080
//! use floodgate::algorithm::SlidingWindow;
//! use std::time::Duration;
//! const API: SlidingWindow = SlidingWindow::new(100, Duration::ZERO);
//! ```
//!
//! ```compile_fail,E0080
//! use floodgate::algorithm::TokenBucket;
//! const BURSTY: TokenBucket = TokenBucket::new(100, 0.0);
//! ```
//!
//! ```compile_fail,E0080
//! use floodgate::algorithm::LeakyBucket;
//! const SMOOTH: LeakyBucket = LeakyBucket::new(20, f64::INFINITY);
//! ```
//!
//! ```compile_fail,E0080
//! use floodgate::algorithm::Gcra;
//! use std::time::Duration;
//! const STEADY: Gcra = Gcra::new(1 << 41, Duration::from_secs(1));
//! ```
//!
//! ```compile_fail,E0080
//! use floodgate::failure::CircuitBreaker;
//! use std::time::Duration;
//! const PATIENT: CircuitBreaker = CircuitBreaker::new(0, Duration::from_secs(1));
//! ```
//!
//! The compiler's message is the one `try_new` returns, e.g. ``invalid
//! `limit`: must be at least 1``. Outside a constant, `new` with an invalid
//! value panics with that message: use `try_new` for values you did not
//! write yourself.
//!
//! # What the types rule out
//!
//! A [`Limits`](crate::algorithm::Limits) is made with its first limit, so
//! it is never empty, and holds only single algorithms
//! ([`Single`](crate::algorithm::Single)), so limits never nest:
//!
//! ```
//! use floodgate::algorithm::{Gcra, Limits};
//! use std::time::Duration;
//! let second = Limits::new("second", Gcra::new(10, Duration::from_secs(1)));
//! let both = Limits::new("minute", Gcra::new(100, Duration::from_secs(60)))
//!     .try_with("second", Gcra::new(10, Duration::from_secs(1)))
//!     .unwrap();
//! # let _ = (second, both);
//! ```
//!
//! ```compile_fail,E0061
//! use floodgate::algorithm::Limits;
//! let none = Limits::new();
//! ```
//!
//! ```compile_fail,E0277
//! use floodgate::algorithm::{Gcra, Limits};
//! use std::time::Duration;
//! let second = Limits::new("second", Gcra::new(10, Duration::from_secs(1)));
//! let nested = Limits::new("minute", second);
//! ```
//!
//! Sizes that must not be zero are a
//! [`NonZeroUsize`](std::num::NonZeroUsize): the deny cache's number of
//! keys, a memory store's number of keys, a Redis store's number of
//! connections. These compile and run:
//!
//! ```
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use floodgate::algorithm::Gcra;
//! use floodgate::store::{MemoryStore, RedisStore};
//! use floodgate::Limiter;
//! use std::num::NonZeroUsize;
//! use std::time::Duration;
//!
//! let store = MemoryStore::with_max_keys(NonZeroUsize::new(10_000).unwrap());
//! let limiter = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1)))
//!     .deny_cache(NonZeroUsize::new(1_000).unwrap())
//!     .build()?;
//! let redis = RedisStore::from_url("redis://127.0.0.1:6379")?.connections(NonZeroUsize::new(4).unwrap());
//! # let _ = (limiter, redis);
//! # Ok(()) }
//! ```
//!
//! and a 0 in their place does not:
//!
//! ```compile_fail,E0308
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use floodgate::algorithm::Gcra;
//! use floodgate::store::MemoryStore;
//! use floodgate::Limiter;
//! use std::time::Duration;
//! let limiter = Limiter::builder(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)))
//!     .deny_cache(0)
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0308
//! use floodgate::store::MemoryStore;
//! let store = MemoryStore::with_max_keys(0);
//! ```
//!
//! ```compile_fail,E0308
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use floodgate::store::RedisStore;
//! let redis = RedisStore::from_url("redis://127.0.0.1:6379")?.connections(0);
//! # Ok(()) }
//! ```
//!
//! `NonZeroUsize::new(0)` is `None`, and in a constant
//! `NonZeroUsize::new(0).unwrap()` does not compile either.
//!
//! # What `build` checks
//!
//! A builder takes any value and checks them all in `build`, the first
//! error winning. Both builders check the settings they share the same way:
//!
//! ```
//! use floodgate::algorithm::Gcra;
//! use floodgate::concurrency::ConcurrencyLimiter;
//! use floodgate::failure::FailurePolicy;
//! use floodgate::{store::MemoryStore, ConfigError, Limiter};
//! use std::time::Duration;
//!
//! let gcra = Gcra::new(10, Duration::from_secs(1));
//! let field = |r: Result<Limiter<Gcra>, ConfigError>| r.unwrap_err().field();
//! let builder = || Limiter::builder(MemoryStore::new(), gcra);
//! assert_eq!(field(builder().prefix("rl{a}").build()), "prefix");
//! assert_eq!(field(builder().name("my api").build()), "name");
//! assert_eq!(field(builder().timeout(Duration::ZERO).build()), "timeout");
//!
//! // A rate limiter falls back to a rate limiter, of any algorithm.
//! let uploads = ConcurrencyLimiter::builder(MemoryStore::new(), 2).build().unwrap();
//! let wrong = builder().on_store_failure(FailurePolicy::fallback(uploads)).build();
//! assert_eq!(field(wrong), "on_store_failure");
//!
//! let concurrency = |max| ConcurrencyLimiter::builder(MemoryStore::new(), max);
//! assert_eq!(concurrency(0).build().unwrap_err().field(), "max");
//! assert_eq!(concurrency(2).lease(Duration::ZERO).build().unwrap_err().field(), "lease");
//! assert_eq!(concurrency(2).name("").build().unwrap_err().field(), "name");
//! ```
//!
//! `tests/config.rs` tries every rule above at both ends of its bound.
