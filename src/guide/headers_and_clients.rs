//! Headers, rejections, and what clients should do with them.
//!
//! # What goes out
//!
//! What the layers answer follows the decision's [`Reason`](crate::Reason):
//!
//! | situation | reason | HTTP | gRPC |
//! |---|---|---|---|
//! | admitted | `WithinLimit` | your response, plus `RateLimit-Policy` and `RateLimit` | your response, the same fields as metadata |
//! | denied by a limit | `OverLimit` | `429`, `Retry-After`, `RateLimit-Policy`, `RateLimit`, `Cache-Control: no-store`, an `application/problem+json` body | `RESOURCE_EXHAUSTED` with `RetryInfo` and `QuotaFailure` details, `grpc-retry-pushback-ms` |
//! | denied, and the cost can never fit | `CostTooHigh` | `429` without `Retry-After`; the body says it will never be admitted | `RESOURCE_EXHAUSTED` without `RetryInfo`, `grpc-retry-pushback-ms: -1` |
//! | no key in the request | no decision | `400`, problem+json saying what is missing | `INVALID_ARGUMENT` |
//! | store down, limiter fails open | `FailOpen` | your response, no rate-limit fields | your response |
//! | store down, limiter fails closed | `FailClosed` | `503` with `Retry-After`, no rate-limit fields | `UNAVAILABLE` with `RetryInfo` |
//! | store down, a fallback limiter decides | the fallback's | as for that reason above, without rate-limit fields | the same |
//! | store down, the limiter returns the error | no decision | `503` without `Retry-After` | `UNAVAILABLE` |
//!
//! The concurrency layer answers the same way, except that its admitted
//! responses carry no rate-limit fields: a key with `max` requests in
//! flight is denied for `OverLimit`, with `Retry-After: 1` (see
//! [`several_limits`](super::several_limits#at-most-n-requests-in-flight-the-concurrency-limiter)).
//! A store that is down is the subject of [`failures`](super::failures).
//!
//! The fields are those of the IETF draft
//! [draft-ietf-httpapi-ratelimit-headers](https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/)
//! (revision 11), structured-field lists:
//!
//! ```text
//! RateLimit-Policy: "second";q=2;w=1, "day";q=1000;w=86400
//! RateLimit: "second";r=0;t=1
//! ```
//!
//! On the wire each limit is a *policy*, as the draft calls it: hence
//! `RateLimit-Policy`, the `violated-policies` of the problem+json body, and
//! the gRPC `QuotaFailure` subject `policy:<name>`. Each item is one limit:
//!
//! - `RateLimit-Policy` lists every limit the request was checked against:
//!   its name and its [quota](crate::algorithm::Quota), the units `q` per
//!   window `w` in seconds (for the buckets, the capacity and the time to
//!   refill it fully).
//! - `RateLimit` reports the most restrictive one: `r`, how many more
//!   requests of cost 1 it would admit now, and `t`, the seconds until all
//!   `q` units are back (for a denial: until the retry, if later).
//! - `Retry-After` is in whole seconds, **rounded up**: a client that waits
//!   that long is never early (a 300 ms wait is `Retry-After: 1`, never `0`).
//!
//! Two limits on one key, a denial at 400 ms into the second:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{body::Body, http::{Request, StatusCode}, routing::get, Router};
//! use floodgate::algorithm::{FixedWindow, Limits};
//! use floodgate::{clock::ManualClock, key::Global, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//! use tower::ServiceExt;
//!
//! let limits = Limits::new("second", FixedWindow::new(2, Duration::from_secs(1)))
//!     .try_with("day", FixedWindow::new(1_000, Duration::from_secs(86_400)))?;
//! let clock = ManualClock::new(400);
//! let limiter = Limiter::builder(MemoryStore::new(), limits).clock(clock).build()?;
//! let app = Router::new()
//!     .route("/", get(|| async { "ok" }))
//!     .layer(RateLimitLayer::new(limiter, Global::new()));
//! let get = || app.clone().oneshot(Request::get("/").body(Body::empty()).unwrap());
//!
//! let res = get().await?;
//! assert_eq!(res.status(), StatusCode::OK);
//! assert_eq!(res.headers()["ratelimit-policy"], r#""second";q=2;w=1, "day";q=1000;w=86400"#);
//! assert_eq!(res.headers()["ratelimit"], r#""second";r=1;t=1"#);
//!
//! get().await?;
//! let res = get().await?;
//! assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(res.headers()["retry-after"], "1"); // 600 ms, rounded up
//! assert_eq!(res.headers()["ratelimit"], r#""second";r=0;t=1"#);
//! assert_eq!(res.headers()["content-type"], "application/problem+json");
//! let body = axum::body::to_bytes(res.into_body(), usize::MAX).await?;
//! let problem: serde_json::Value = serde_json::from_slice(&body)?;
//! assert_eq!(problem["type"], "https://iana.org/assignments/http-problem-types#quota-exceeded");
//! assert_eq!(problem["violated-policies"], serde_json::json!(["second"]));
//! assert_eq!(problem["detail"], r#"Rate limit exceeded for policy "second" (limit 2). Retry in 1 second."#);
//! # Ok(()) }
//! ```
//!
//! The names in these fields are the limiter's
//! [name](crate::LimiterBuilder::name) (or each limit's name in a
//! [`Limits`](crate::algorithm::Limits)): name them for your clients to
//! read. Stacked layers each add their own items to the same two fields.
//!
//! # What clients should do
//!
//! Put this in your API documentation:
//!
//! 1. **On `429`, wait `Retry-After` seconds, then retry.** Never sooner:
//!    the request would be denied again. When many clients were denied at
//!    once, add a little random delay on top, so they do not come back in
//!    step.
//! 2. **A `429` without `Retry-After` will never succeed as it is**: the
//!    request costs more than the whole limit. Split it, or ask for a larger
//!    limit; retrying is pointless.
//! 3. **On `503` with `Retry-After`**, the limiter could not decide (its
//!    store is down) and refuses for now: wait and retry, as for a `429`.
//! 4. **Pace yourself with `RateLimit`**: `r` requests are left, and the
//!    quota is whole again in `t` seconds. A client that spreads its `r`
//!    requests over `t` seconds, or slows down as `r` nears 0, is never
//!    denied.
//! 5. **No rate-limit fields means "unknown", not "unlimited"**: they are
//!    left out when the limiter could not reach its store.
//! 6. **gRPC clients**: read `RetryInfo.retry_delay` from the status details
//!    (tonic: `tonic_types::StatusExt::get_details_retry_info`), or let the
//!    client's retries honour `grpc-retry-pushback-ms` (a negative value
//!    means do not retry). floodgate never answers a gRPC client with HTTP 429,
//!    which gRPC clients would read as `UNAVAILABLE` and retry at once.
//!    The gRPC answers come with the `grpc` feature, off by default
//!    (`tower-floodgate = { version = "0.1", features = ["grpc"] }`): without
//!    it every request, gRPC or not, gets the HTTP answers.
//!
//! Browsers show JavaScript only a few response headers unless the server
//! lists the others: if browser code on another origin calls your API, add
//! `Access-Control-Expose-Headers: RateLimit, RateLimit-Policy, Retry-After`
//! (e.g. with tower-http's `CorsLayer::expose_headers`).
//!
//! A gRPC client reading the retry delay, here from a rejection made by the
//! layer:
//!
//! ```
//! # #[cfg(feature = "grpc")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{body::Body, http::Request, routing::post, Router};
//! use floodgate::{algorithm::Gcra, clock::ManualClock, key::Global, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//! use tonic_types::StatusExt;
//! use tower::ServiceExt;
//!
//! // One call per 2 s, no burst.
//! let limiter = Limiter::builder(MemoryStore::new(), Gcra::new(1, Duration::from_secs(2)))
//!     .clock(ManualClock::new(0))
//!     .build()?;
//! let app = Router::new()
//!     .route("/helloworld.Greeter/SayHello", post(|| async { "" }))
//!     .layer(RateLimitLayer::new(limiter, Global::new()));
//! let call = || {
//!     let req = Request::post("/helloworld.Greeter/SayHello")
//!         .header("content-type", "application/grpc")
//!         .body(Body::empty())
//!         .unwrap();
//!     app.clone().oneshot(req)
//! };
//! call().await?;
//! let res = call().await?;
//! assert_eq!(res.status(), 200); // gRPC errors travel in headers
//!
//! let status = tonic::Status::from_header_map(res.headers()).expect("a gRPC status");
//! assert_eq!(status.code(), tonic::Code::ResourceExhausted);
//! let retry = status.get_details_retry_info().expect("RetryInfo");
//! assert_eq!(retry.retry_delay, Some(Duration::from_secs(2)));
//! # Ok(()) }
//! # #[cfg(not(feature = "grpc"))] fn main() {}
//! ```
//!
//! # Other header styles
//!
//! [`RateLimitLayer::headers`](crate::layer::RateLimitLayer::headers) picks
//! the fields, [`HeaderStyle`](crate::headers::HeaderStyle):
//!
//! - `Ietf` (default): the two fields above;
//! - `Legacy { reset }`: `X-RateLimit-Limit`, `X-RateLimit-Remaining`,
//!   `X-RateLimit-Reset`, for clients written against GitHub-style APIs,
//!   with the reset in seconds from now
//!   ([`ResetUnit::DeltaSeconds`](crate::headers::ResetUnit::DeltaSeconds))
//!   or as a Unix time
//!   ([`ResetUnit::EpochSeconds`](crate::headers::ResetUnit::EpochSeconds),
//!   as GitHub sends it). Say which in your documentation: vendors differ;
//! - `Both`, while clients migrate;
//! - `None`: no fields (rejections still carry `Retry-After`).
//!
//! ```
//! # use floodgate::{algorithm::Gcra, key::PeerIp, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! # use std::time::Duration;
//! use floodgate::headers::{HeaderStyle, ResetUnit};
//! # let limiter = Limiter::new(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)));
//! let layer = RateLimitLayer::new(limiter, PeerIp::new())
//!     .headers(HeaderStyle::Legacy { reset: ResetUnit::EpochSeconds });
//! ```
//!
//! # Your own rejections
//!
//! `on_rejection`, on either layer
//! ([`RateLimitLayer`](crate::layer::RateLimitLayer::on_rejection),
//! [`ConcurrencyLimitLayer`](crate::layer::ConcurrencyLimitLayer::on_rejection)),
//! replaces every answer the layer gives by itself (429, 400, 503 and their
//! gRPC forms). It is given a [`Rejection`](crate::layer::Rejection): its
//! `kind` ([`RejectionKind`](crate::layer::RejectionKind): `Limited` with
//! each limit's report, `NoKey` with why, `Unavailable` with when to retry),
//! whether the request is gRPC, the header style and the time. Start from
//! the default and change what you need, so the headers stay right:
//!
//! ```
//! # use floodgate::{algorithm::Gcra, key::PeerIp, store::MemoryStore, Limiter};
//! # use std::time::Duration;
//! use floodgate::layer::{RateLimitLayer, RejectionKind};
//! use http::header::{CONTENT_TYPE, HeaderValue};
//!
//! # let limiter = Limiter::new(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)));
//! let layer = RateLimitLayer::new(limiter, PeerIp::new()).on_rejection(|rejection| {
//!     let mut res = rejection.default_response();
//!     if matches!(rejection.kind, RejectionKind::Limited { .. }) && !rejection.grpc {
//!         *res.body_mut() = "Too many requests. Please wait a moment.\n".into();
//!         res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
//!     }
//!     res
//! });
//! ```
