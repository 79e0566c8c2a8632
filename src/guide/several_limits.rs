//! Several limits at once, tiers, counting by the response, shadow mode,
//! and limits on requests in flight.
//!
//! # Several limits on one key: `Limits`
//!
//! "10 per second, 1000 per hour and 10 000 per day" is three limits on one
//! key. Put them in one [`Limits`](crate::algorithm::Limits), each with a
//! name, and give it to one limiter. They are checked **all or nothing**: a
//! request is admitted only if every limit admits it, and then charged to
//! every one; if one denies, none is charged, so a client held back by the
//! per-second limit does not also use up its daily limit. On Redis all of
//! them are decided in one script call (their keys share the client's hash
//! tag, so they sit on one shard of a cluster too): concurrent requests can
//! never slip between them.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::algorithm::{FixedWindow, Limits, SlidingWindow};
//! use floodgate::{clock::ManualClock, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! let limits = Limits::new("second", SlidingWindow::new(3, Duration::from_secs(1)))
//!     .try_with("day", FixedWindow::new(5, Duration::from_secs(86_400)))?;
//! let clock = ManualClock::new(0);
//! let limiter = Limiter::builder(MemoryStore::new(), limits).clock(clock.clone()).build()?;
//!
//! for _ in 0..3 {
//!     assert!(limiter.check("ana", 1).await?.allowed());
//! }
//! // The 4th is denied by "second"; "day" alone would admit it, but is not
//! // charged either.
//! let d = limiter.check_all("ana", 1).await?;
//! assert!(d.overall().denied());
//! assert_eq!(d.each()[1].name(), "day");
//! assert!(d.each()[1].decision().allowed());
//! assert_eq!(limiter.check_all("ana", 0).await?.each()[1].decision().remaining(), 2);
//!
//! clock.advance(Duration::from_secs(2));
//! assert!(limiter.check("ana", 1).await?.allowed());
//! assert!(limiter.check("ana", 1).await?.allowed());
//! // Now the day is spent: the wait is the rest of the UTC day.
//! let d = limiter.check("ana", 1).await?;
//! assert_eq!(d.retry_after(), Some(Duration::from_secs(86_398)));
//! # Ok(()) }
//! ```
//!
//! [`check`](crate::Limiter::check) returns the most restrictive limit's
//! numbers; [`check_all`](crate::Limiter::check_all) each limit's decision
//! too. Through the layer, `RateLimit-Policy` lists every limit and
//! `RateLimit` reports the most restrictive one. At most
//! [`MAX_LIMITS`](crate::algorithm::MAX_LIMITS) (16) limits, of any
//! algorithms, each named with 1 to 32 characters of `A-Z a-z 0-9 _ - .`.
//!
//! Limits on *different* keys (per user and global, per API key and per
//! organisation) are one decision too when each limit is given its own key
//! ([`RateLimitLayer::key_for`](crate::layer::RateLimitLayer::key_for),
//! [`Limiter::check_keys`](crate::Limiter::check_keys)); layers stacked
//! around other middleware (a per-IP limit before authentication, a
//! per-user one after) are not atomic: see
//! [`choosing_a_key`](super::choosing_a_key#several-keys-one-decision).
//!
//! # Tiers: limits per request
//!
//! Customers on different plans need different limits, and a customer who
//! upgrades should not start over. Give the layer a function that picks the
//! limits per request, [`RateLimitLayer::limits_for`](crate::layer::RateLimitLayer::limits_for)
//! (typically from what your auth layer put in the request); `None` keeps
//! the limiter's own. Without HTTP, [`Limiter::check_with`](crate::Limiter::check_with)
//! does the same for one call (and [`refund_with`](crate::Limiter::refund_with)
//! gives its charge back). The key's state is shared across tiers: a client
//! that changes plan keeps what it has used.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::algorithm::Gcra;
//! use floodgate::{key::Header, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! #[derive(Clone, Copy)]
//! enum Tier { Free, Pro }
//!
//! let second = Duration::from_secs(1);
//! let free = Gcra::new(10, second);
//! let pro = Gcra::new(100, second);
//! let limiter = Limiter::builder(MemoryStore::new(), free).name("plan").build()?;
//!
//! // Over HTTP: the tier is a request extension set by your auth layer.
//! let layer = RateLimitLayer::new(limiter.clone(), Header::try_new("x-api-key")?)
//!     .limits_for(move |req| match req.extensions().get::<Tier>()? {
//!         Tier::Free => None, // the limiter's own
//!         Tier::Pro => Some(pro),
//!     });
//!
//! // Without HTTP:
//! let d = limiter.check_with("acme", 1, &pro).await?;
//! assert_eq!(d.overall().limit(), 100);
//! assert_eq!(d.each()[0].quota().units, 100); // what RateLimit-Policy reports
//! assert_eq!(limiter.check("acme", 1).await?.limit(), 10);
//! # Ok(()) }
//! ```
//!
//! The tiers' limits are values of the limiter's algorithm type. To vary
//! more than the numbers per tier, make the limiter's algorithm a
//! [`Limits`](crate::algorithm::Limits) and return a `Limits` per tier, with
//! the same limit names to keep the state across tiers.
//!
//! # Counting by the response
//!
//! Sometimes whether a request should count is known only from its
//! response:
//!
//! - [`refund_when`](crate::layer::RateLimitLayer::refund_when): charge
//!   every request up front, and give the charge back when the status
//!   matches, e.g. `|s| s.is_server_error()`, so that clients are not
//!   punished for your outage. The limit holds at any moment (a request is
//!   admitted at full cost); the refund makes room only afterwards.
//! - [`count_only_when`](crate::layer::RateLimitLayer::count_only_when):
//!   charge only requests whose response matches, e.g. failed logins
//!   (`401`, `403`). Until the response is known the layer only *tries* the
//!   request (decided as a charge, nothing written, counted in the metrics):
//!   it passes while the limit has room for it, and is charged when its
//!   response matches; a response that is not charged reports what remains
//!   without it.
//!
//! `count_only_when` opens a race: requests of one key that are in flight at
//! the same moment all pass the trial before any of them is charged, so an
//! attacker who sends 100 login attempts at once gets up to 100 through a
//! limit of 5. The limit is exceeded by at most the number of that key's
//! requests in flight together; bound that number with a concurrency limit
//! (below), e.g. one login in flight per IP.
//!
//! ```
//! use axum::{body::Body, extract::ConnectInfo, http::{Request, StatusCode}, routing::post, Router};
//! use floodgate::algorithm::SlidingLog;
//! use floodgate::concurrency::ConcurrencyLimiter;
//! use floodgate::layer::ConcurrencyLimitLayer;
//! use floodgate::{key::PeerIp, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::{net::SocketAddr, time::Duration};
//! use tower::ServiceExt;
//!
//! async fn login(body: String) -> StatusCode {
//!     if body == "right" { StatusCode::OK } else { StatusCode::UNAUTHORIZED }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemoryStore::new();
//! let failures = Limiter::builder(store.clone(), SlidingLog::new(3, Duration::from_secs(900)))
//!     .name("login-failures")
//!     .build()?;
//! let one_at_a_time = ConcurrencyLimiter::builder(store, 1).name("login-in-flight").build()?;
//! let count_failures = RateLimitLayer::new(failures, PeerIp::new()).count_only_when(|s: http::StatusCode| s == 401 || s == 403);
//! let app = Router::new()
//!     .route("/login", post(login).route_layer(count_failures))
//!     .layer(ConcurrencyLimitLayer::new(one_at_a_time, PeerIp::new())); // outside: runs first
//! let attempt = |password: &'static str| {
//!     let mut req = Request::post("/login").body(Body::from(password)).unwrap();
//!     req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([198, 51, 100, 4], 5000))));
//!     app.clone().oneshot(req)
//! };
//!
//! // Successful logins cost nothing.
//! for _ in 0..10 {
//!     assert_eq!(attempt("right").await?.status(), StatusCode::OK);
//! }
//! for _ in 0..3 {
//!     assert_eq!(attempt("wrong").await?.status(), StatusCode::UNAUTHORIZED);
//!     tokio::task::yield_now().await; // the charge is made on a task, after the response
//! }
//! // Three failures: locked out for 15 minutes, even with the right password.
//! assert_eq!(attempt("right").await?.status(), StatusCode::TOO_MANY_REQUESTS);
//! # Ok(()) }
//! ```
//!
//! # Shadow mode: try a limit before enforcing it
//!
//! [`RateLimitLayer::shadow(true)`](crate::layer::RateLimitLayer::shadow)
//! decides, charges and sends headers as usual but never blocks: a request
//! over the limit is served anyway, and logged at `info`. Deploy a new limit
//! in shadow mode, watch how many requests it would deny
//! (`floodgate_decisions_total{limiter="...",outcome="denied"}`, see
//! [`metrics_and_tracing`](super::metrics_and_tracing)), then
//! turn it on.
//!
//! ```
//! # use floodgate::{algorithm::SlidingWindow, key::PeerIp, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! # use std::time::Duration;
//! let candidate = Limiter::builder(MemoryStore::new(), SlidingWindow::new(60, Duration::from_secs(60)))
//!     .name("candidate")
//!     .build()
//!     .unwrap();
//! let layer = RateLimitLayer::new(candidate, PeerIp::new()).shadow(true);
//! ```
//!
//! # At most N requests in flight: the concurrency limiter
//!
//! Rate limits bound how many requests start per second; they do not bound
//! how many run at once. Slow requests (uploads, reports, long polls) pile
//! up even at a modest rate. A
//! [`ConcurrencyLimiter`](crate::concurrency::ConcurrencyLimiter) allows at
//! most `max` requests in flight per key, across all app servers when the
//! store is Redis. It is built like a [`Limiter`](crate::Limiter), with the
//! same settings (prefix, name, clock, timeout, failure policy, circuit
//! breaker, failure hook), and reports in the same metrics.
//!
//! [`ConcurrencyLimitLayer`](crate::layer::ConcurrencyLimitLayer) puts it in
//! front of a service. Each request holds a lease from its admission until
//! its response body ends or is dropped; the next one over `max` is answered
//! `429` (gRPC: `RESOURCE_EXHAUSTED`) at once, with `Retry-After: 1`
//! ([`retry_after`](crate::layer::ConcurrencyLimitLayer::retry_after)
//! changes it: when a slot frees cannot be foreseen). The layer also takes
//! [`shadow`](crate::layer::ConcurrencyLimitLayer::shadow) and
//! [`on_rejection`](crate::layer::ConcurrencyLimitLayer::on_rejection), as
//! the rate-limit layer does. A lease not released (a server that crashed
//! mid-request) expires by itself after
//! [`lease`](crate::concurrency::ConcurrencyLimiterBuilder::lease) (default
//! 60 s; choose it longer than your slowest request).
//!
//! ```
//! use axum::{body::Body, http::{Request, StatusCode}, routing::post, Router};
//! use floodgate::concurrency::ConcurrencyLimiter;
//! use floodgate::layer::ConcurrencyLimitLayer;
//! use floodgate::{key::Header, store::MemoryStore};
//! use std::time::Duration;
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let uploads = ConcurrencyLimiter::builder(MemoryStore::new(), 1)
//!     .name("uploads")
//!     .lease(Duration::from_secs(600))
//!     .build()?;
//! let app = Router::new()
//!     .route("/upload", post(|| async { "stored" }))
//!     .layer(ConcurrencyLimitLayer::new(uploads, Header::try_new("x-api-key")?));
//! let upload = || {
//!     let req = Request::post("/upload").header("x-api-key", "ana").body(Body::empty()).unwrap();
//!     app.clone().oneshot(req)
//! };
//!
//! let first = upload().await?; // its body is not sent yet: it holds the slot
//! let second = upload().await?;
//! assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(second.headers()["retry-after"], "1");
//! assert_eq!(second.headers()["ratelimit-policy"], r#""uploads";q=1;w=600"#);
//! drop(first); // the response is done: the slot is free
//! assert_eq!(upload().await?.status(), StatusCode::OK);
//! # Ok(()) }
//! ```
//!
//! The `429` names the limit in the rate-limit fields, `q` the most in
//! flight and `w` the lease; admitted responses carry none. Every request
//! holds one slot, whatever its cost.
//!
//! Without the layer, [`acquire(key)`](crate::concurrency::ConcurrencyLimiter::acquire)
//! returns a [`Lease`](crate::concurrency::Lease), released when dropped, or
//! the denying [`Decision`](crate::Decision) with its reason;
//! [`peek`](crate::concurrency::ConcurrencyLimiter::peek) and
//! [`in_flight`](crate::concurrency::ConcurrencyLimiter::in_flight) take
//! nothing. What it does when Redis is down (fail open admits without a
//! lease, fail closed answers `503`, a fallback is another concurrency
//! limiter) is in [`failures`](super::failures#the-concurrency-limiter).
