//! The tower layers: [`RateLimitLayer`] (rate limits) and
//! [`ConcurrencyLimitLayer`] (requests in flight), for axum, tonic and any
//! tower service.
//!
//! For each request a layer takes a key with a
//! [`KeyExtractor`](crate::key::KeyExtractor), starts its limiter's decision
//! (the rate-limit layer prices the request first: default 1; see
//! [`RateLimitLayer::cost`], [`RateLimitLayer::cost_fn`] and the [`Cost`]
//! extension), and then, by the decision's [`Reason`](crate::Reason):
//!
//! - admitted: the inner service is called (after the leaky bucket's delay,
//!   if any) and its response gets the rate-limit headers; a concurrency
//!   lease is held until the response body ends;
//! - over a limit: the layer answers at once, 429 with `Retry-After` and an
//!   RFC 9457 problem+json body, or for gRPC a trailers-only
//!   `RESOURCE_EXHAUSTED` with `RetryInfo` and `QuotaFailure` details,
//!   never an HTTP 429;
//! - no key: 400 problem+json (gRPC: `INVALID_ARGUMENT`) naming why;
//! - store down and the failure policy fails closed: 503 (gRPC:
//!   `UNAVAILABLE`), with no rate-limit headers, since they would be false;
//!   a fallback limiter's denial is answered like any other, 429.
//!
//! The rate-limit layer answers with the inner service's own body type
//! (its rejections are built as that type: [`RejectionBody`]), so an
//! admitted response passes through unchanged; the concurrency layer's
//! body ([`ResponseBody`]) holds the request's lease until it ends. Both
//! share one rejection path: every answer a layer gives by itself can be
//! replaced with `on_rejection`. A decision the store makes at
//! once (the memory store, or the deny cache) is served without a future of
//! its own, as a synchronous middleware would.

mod body;
mod concurrency;
mod cost;
mod future;
mod gatekeeper;
mod next;
mod outbound;
mod own_fields;
pub mod predicate;
mod rate_limit;
mod responder;
mod settle;
mod settle_at_end;
mod waiting;

pub use body::{RejectionBody, ResponseBody};
pub use concurrency::{ConcurrencyLimit, ConcurrencyLimitLayer};
pub use cost::{ActualCost, Cost};
pub use future::{ConcurrencyLimitFuture, ResponseFuture};
pub use outbound::{OutboundError, OutboundFuture, OutboundLimit, OutboundLimitLayer};
pub(crate) use own_fields::OwnFields;
pub use rate_limit::{RateLimit, RateLimitLayer};
pub use responder::{Rejection, RejectionKind};
pub use settle::DeniedByLimit;
pub use settle_at_end::{SettleAtEnd, SettlingBody};
