//! Costs: charging expensive requests more.
//!
//! Limiting requests when your real cost is downstream work lets one request
//! do fifty times the damage of another. Give each request a cost in the
//! limit's units: a search costs 5, an export 20, a listing 1. Every
//! algorithm takes costs: a request is admitted if its whole cost fits, and
//! then charged all of it; otherwise it is denied and charged nothing.
//!
//! The layer prices each request, the first that applies winning:
//!
//! 1. a [`Cost`](crate::layer::Cost) extension on the request, put there by
//!    an earlier middleware;
//! 2. [`RateLimitLayer::cost_fn`](crate::layer::RateLimitLayer::cost_fn):
//!    a function of the request's head (method, URI, headers, extensions);
//! 3. [`RateLimitLayer::cost`](crate::layer::RateLimitLayer::cost): a
//!    constant, 1 by default.
//!
//! # One budget, several prices
//!
//! One limiter per budget, and one layer per price: clones of a layer share
//! the limiter, so every route charges the same budget. Here each API key
//! has a token bucket of 100 tokens refilled at 10 per second (as in
//! `examples/axum_costs.rs`):
//!
//! ```
//! use axum::{body::Body, http::{Request, StatusCode}, response::Response, routing::{get, post}, Router};
//! use floodgate::algorithm::TokenBucket;
//! use floodgate::{clock::ManualClock, key::Header, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//! use tower::ServiceExt;
//!
//! async fn send(app: &Router, method: &str, path: &str) -> Response {
//!     let req = Request::builder().method(method).uri(path).header("x-api-key", "demo");
//!     app.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap()
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let clock = ManualClock::new(0);
//! let budget = Limiter::builder(MemoryStore::new(), TokenBucket::new(100, 10.0))
//!     .name("budget")
//!     .clock(clock.clone())
//!     .build()?;
//! let per_key = RateLimitLayer::new(budget, Header::try_new("x-api-key")?);
//! let app = Router::new()
//!     .route("/items", get(|| async { "items" }).route_layer(per_key.clone()))
//!     .route("/export", get(|| async { "export" }).route_layer(per_key.clone().cost(20)))
//!     .route("/import", post(|| async { "imported" }).route_layer(per_key.cost(500)));
//!
//! // Five exports spend the whole bucket.
//! for _ in 0..5 {
//!     assert_eq!(send(&app, "GET", "/export").await.status(), StatusCode::OK);
//! }
//! // The sixth must wait for 20 tokens at 10 per second: 2 s.
//! let res = send(&app, "GET", "/export").await;
//! assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(res.headers()["retry-after"], "2");
//! // A listing needs one token: 100 ms, rounded up to a whole second.
//! assert_eq!(send(&app, "GET", "/items").await.headers()["retry-after"], "1");
//!
//! clock.advance(Duration::from_secs(2));
//! assert_eq!(send(&app, "GET", "/export").await.status(), StatusCode::OK);
//!
//! // A cost above the capacity can never be admitted: denied without
//! // Retry-After, since waiting would not help, and the body says so.
//! let res = send(&app, "POST", "/import").await;
//! assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert!(res.headers().get("retry-after").is_none());
//! let body = axum::body::to_bytes(res.into_body(), usize::MAX).await?;
//! assert!(String::from_utf8_lossy(&body).contains("it will never be admitted"));
//! # Ok(()) }
//! ```
//!
//! **Costs above the limit are denied, always, with no retry time**: the
//! decision's reason is [`CostTooHigh`](crate::Reason::CostTooHigh) and
//! [`Decision::retry_after`](crate::Decision::retry_after) is `None`; gRPC
//! clients get no `RetryInfo` and `grpc-retry-pushback-ms: -1`. They are
//! counted as `reason="cost_too_high"` in `floodgate_decisions_total`. Choose
//! the capacity (or limit, or burst) at least as large as your most
//! expensive request; with a [`Gcra`](crate::algorithm::Gcra), the burst is
//! the ceiling, not the per-period limit.
//!
//! A cost of 0 is always admitted and charges nothing, but the response
//! still carries the rate-limit headers: `.cost(0)` on a `/quota` route
//! tells clients where they stand for free.
//!
//! # Prices from the request
//!
//! [`cost_fn`](crate::layer::RateLimitLayer::cost_fn) sees the request's
//! head, not its body:
//!
//! ```
//! use floodgate::{algorithm::TokenBucket, key::Global, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use http::{header::CONTENT_LENGTH, Method};
//!
//! let limiter = Limiter::new(MemoryStore::new(), TokenBucket::new(1_000, 100.0));
//! // Reads cost 1, writes 5.
//! let by_method = RateLimitLayer::new(limiter.clone(), Global::new())
//!     .cost_fn(|req| if req.method() == Method::GET || req.method() == Method::HEAD { 1 } else { 5 });
//! // Uploads: one unit per started megabyte announced in Content-Length.
//! let by_size = RateLimitLayer::new(limiter, Global::new()).cost_fn(|req| {
//!     let bytes: u64 = req
//!         .headers()
//!         .get(CONTENT_LENGTH)
//!         .and_then(|v| v.to_str().ok()?.parse().ok())
//!         .unwrap_or(0);
//!     1 + bytes / 1_000_000
//! });
//! ```
//!
//! When the price is known only to an earlier layer (it parsed the body and
//! counted the items of a batch, or looked up the caller's plan), that layer
//! inserts a [`Cost`](crate::layer::Cost) extension, which overrides the
//! limit layer's own price:
//!
//! ```
//! use axum::{extract::Request, middleware::{self, Next}, response::Response, routing::post, Router};
//! use floodgate::{algorithm::TokenBucket, key::Global, layer::{Cost, RateLimitLayer}, store::MemoryStore, Limiter};
//!
//! /// Runs before the limiter: prices a batch by its number of items.
//! async fn price_batch(mut req: Request, next: Next) -> Response {
//!     let items: u64 = req
//!         .headers()
//!         .get("x-batch-items")
//!         .and_then(|v| v.to_str().ok()?.parse().ok())
//!         .unwrap_or(1);
//!     req.extensions_mut().insert(Cost(items));
//!     next.run(req).await
//! }
//!
//! let limiter = Limiter::new(MemoryStore::new(), TokenBucket::new(1_000, 100.0));
//! let app: Router = Router::new()
//!     .route("/batch", post(|| async { "ok" }))
//!     .layer(RateLimitLayer::new(limiter, Global::new()))
//!     .layer(middleware::from_fn(price_batch)); // added last: runs first
//! ```
//!
//! # Costs without HTTP
//!
//! [`Limiter::check(key, cost)`](crate::Limiter::check) charges any cost,
//! and [`Limiter::refund(key, cost)`](crate::Limiter::refund) gives a charge
//! back (work that failed, or that a later check made unnecessary;
//! [`refund_with`](crate::Limiter::refund_with) for a charge made with
//! [`check_with`](crate::Limiter::check_with)):
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::{algorithm::SlidingWindow, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! // Outgoing e-mail: 1000 recipients per hour per customer.
//! let mail = Limiter::new(MemoryStore::new(), SlidingWindow::new(1_000, Duration::from_secs(3_600)));
//! let d = mail.check("customer-42", 300).await?; // a mailing to 300 recipients
//! assert!(d.allowed());
//! assert_eq!(d.remaining(), 700);
//! // The mail server refused it: give the charge back.
//! assert_eq!(mail.refund("customer-42", 300).await?.remaining(), 1_000);
//! # Ok(()) }
//! ```
//!
//! In the `RateLimit` header, `r` counts the limit's units: what is left in
//! cost units, i.e. how many requests of cost 1 would still be admitted.
//!
//! A concurrency limit takes no cost: each request in flight holds one slot
//! (see [`several_limits`](super::several_limits#at-most-n-requests-in-flight-the-concurrency-limiter)).
