//! floodgate: distributed rate limiting for tower, axum and tonic.
//!
//! New here? Start with the [`guide`]: every decision you make when adding
//! floodgate to a service, with examples that run.
//!
//! A [`RateLimitLayer`] takes a key from each request
//! ([`key`]), charges the request's cost to it through a [`Limiter`], and
//! either lets it through with rate-limit headers ([`headers`]) or answers at
//! once ([`response`]): 429 for HTTP, `RESOURCE_EXHAUSTED` for gRPC.
//!
//! A [`Limiter`] is one [`algorithm`] over one [`store`]: state in Redis
//! ([`RedisStore`](store::RedisStore): every app server sees the same
//! counters, each decision one atomic call of floodgate's function library)
//! or in this process ([`MemoryStore`](store::MemoryStore)). Both decide the
//! same, decision by decision; the time comes from a [`clock`]. A
//! [`ConcurrencyLimiter`] bounds requests
//! in flight per key, with its own layer. Decisions waiting for Redis at the
//! same moment share one call, and a key the whole fleet hammers can be
//! decided on each server from a slice of its quota ([`HotKeys`]), never
//! admitting more than the limit ([`guide::hot_keys`]).
//!
//! Every entry of both limiters takes one decision path: the limits are
//! planned, the store decides (at once in memory; else under the limiter's
//! timeout and circuit breaker, with its [failure policy](failure)
//! deciding when the store cannot), the limits' decisions add up to the overall one, and
//! the [`metrics`] count each by its [`Reason`]. A configuration that
//! `build` accepted never fails a request: invalid values are rejected when
//! they are written (a `const` that does not compile, a `try_new`, `build`),
//! each error naming its field ([`ConfigError`]).
//!
//! ```
//! use axum::{routing::get, Router};
//! use floodgate::{algorithm::Gcra, key::PeerIp, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! let limiter = Limiter::new(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)));
//! let app: Router = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(limiter, PeerIp::new()));
//! ```

// docs.rs (`--cfg docsrs`, nightly) marks what needs a feature, e.g. the
// gRPC answers ("Available on crate feature grpc only").
#![cfg_attr(docsrs, feature(doc_cfg))]
// Getters and builders whose result is obviously used: `#[must_use]` on each
// would be noise. Methods returning `Self`, and the layer and extractor types,
// are `#[must_use]`. (Here rather than in Cargo.toml, so that it holds even
// when clippy is run with `-W clippy::pedantic`.)
#![allow(clippy::must_use_candidate)]
// The steps of a memory-store decision are `#[inline(always)]`
// (`limiter/core.rs`, `limiter/outcome.rs`, `limiter/mod.rs`, `pending.rs`,
// the replies): left to itself the compiler keeps some of them out of line.
// Measured 2026-12-01 (`benches/memory.rs`, issue 16): with plain
// `#[inline]` instead, 684 -> 806 instructions a GCRA decision (callgrind),
// and 1.25-1.29x -> 1.43-1.46x governor's time on one thread (two
// interleaved runs of 5 rounds on a quiet machine).
#![allow(clippy::inline_always)]
// Cargo.toml allows these for tests and benchmarks (see the reasons there);
// the library keeps them: only algorithm/ allows the casts again, for its
// Lua-exact arithmetic.
#![warn(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::too_many_lines,
    clippy::items_after_statements,
    clippy::needless_pass_by_value,
    clippy::float_cmp,
    clippy::struct_excessive_bools,
    clippy::unused_self,
    clippy::default_trait_access,
    clippy::unnecessary_wraps
)]

pub mod algorithm;
pub mod clock;
pub mod concurrency;
#[cfg(feature = "serde")]
pub mod config;
mod config_error;
mod decision;
mod decisions;
mod error;
pub mod failure;
pub mod guide;
pub mod headers;
pub mod key;
pub mod layer;
mod limiter;
pub mod metrics;
mod pending;
pub mod prelude;
mod quota;
pub mod response;
pub mod store;

pub use concurrency::{ConcurrencyLimiter, ConcurrencyLimiterBuilder, Lease};
pub use config_error::ConfigError;
pub use decision::{Decision, Reason};
pub use decisions::{Decisions, LimitDecision};
pub use error::Error;
pub use layer::{ConcurrencyLimitLayer, RateLimitLayer};
pub use limiter::{Exemptions, Grant, HotKeys, Limiter, LimiterBuilder, Reservation};
pub use quota::Quota;

// README's examples run as doctests, here and nowhere else
// (`tests/readme.rs` checks that they are included once).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
