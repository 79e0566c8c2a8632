//! The tower layer: [`RateLimitLayer`] for axum, tonic and any tower service.
//!
//! For each request the layer takes a key with a
//! [`KeyExtractor`](crate::key::KeyExtractor), prices the request (default
//! 1; see [`RateLimitLayer::cost`], [`RateLimitLayer::cost_fn`] and the
//! [`Cost`] extension), and asks its [`Limiter`](crate::Limiter):
//!
//! - admitted: the inner service is called (after the leaky bucket's delay,
//!   if any) and its response gets the rate-limit headers;
//! - denied: the layer answers at once, 429 with `Retry-After` and an RFC
//!   9457 problem+json body, or for gRPC a trailers-only `RESOURCE_EXHAUSTED`
//!   with `RetryInfo` and `QuotaFailure` details, never an HTTP 429;
//! - no key: 400 problem+json (gRPC: `INVALID_ARGUMENT`) naming why;
//! - store down and the limiter's failure policy denies: 503 (gRPC:
//!   `UNAVAILABLE`), with no rate-limit headers, since they would be false.
//!
//! Every answer the layer gives by itself can be replaced with
//! [`RateLimitLayer::on_rejection`].

mod body;
mod cost;
mod future;
// tower-http's layout: one folder per concern with layer.rs, service.rs, future.rs.
#[allow(clippy::module_inception)]
mod layer;
mod rejection;
mod service;
mod settle;

pub use body::RateLimitBody;
pub use cost::Cost;
pub use future::ResponseFuture;
pub use layer::RateLimitLayer;
pub use rejection::{Reason, Rejection};
pub use service::RateLimit;
pub(crate) use settle::spawn as spawn_settlement;
pub use settle::RateLimited;
