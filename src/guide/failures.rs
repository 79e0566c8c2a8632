//! Fail open or fail closed: what happens when Redis is slow or down.
//!
//! A rate limiter sits in front of every request, so when its store fails,
//! something must be decided for every request all the same. Failing open
//! (admitting) loses protection for a while; failing closed (refusing) loses
//! availability. Neither is right for every limit, and whatever you leave as
//! the default *will be discovered during the incident that takes the limiter
//! down*. So decide it, per limiter, before that incident. The mechanics are
//! in [`failure`](crate::failure); this page is about choosing.
//!
//! A [`MemoryStore`](crate::store::MemoryStore) cannot fail: none of this
//! applies to it.
//!
//! # Choosing, limit by limit
//!
//! | what the limit protects | policy | why | the layer answers |
//! |---|---|---|---|
//! | against abuse, scraping, a client that loops: ordinary API limits | [`FailOpen`] (the default) | a few minutes without limits is an inconvenience; refusing every request is an outage, and the limiter must not become the outage | your response, without rate-limit fields |
//! | a fragile downstream that must not see more than N | [`FallbackLimiter`] | keep a limit, approximately: each app server enforces its share locally (the global limit divided by the number of servers) | as the fallback decides: your response, or `429` with `Retry-After`; without rate-limit fields |
//! | money or security: per-tenant billing limits, paid API credits, login attempts, password resets, OTP codes | [`FailClosed`] | unlimited paid usage or unlimited password guesses are worse than a short refusal | `503` with `Retry-After` |
//! | you call [`Limiter`](crate::Limiter) yourself and want to decide in your code | [`ReturnError`] | the store's error comes back as [`Error::Store`](crate::Error::Store) | `503` without `Retry-After` |
//!
//! Abuse limits fail open because their whole point is to keep the service
//! up. Billing and login limits may fail closed because what they protect is
//! worth more than the requests refused meanwhile. A login endpoint that
//! fails closed refuses logins while Redis is down; a login endpoint that
//! fails open hands an attacker who can take Redis down (or just wait for it
//! to go down) unlimited guesses. Which is worse is your call; make it
//! explicit with [`on_store_failure`](crate::LimiterBuilder::on_store_failure),
//! on every limiter that is not an ordinary one.
//!
//! One store can serve limiters with different policies: the policy belongs
//! to the limiter.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{body::Body, http::{Request, StatusCode}, routing::{get, post}, Router};
//! use floodgate::algorithm::{SlidingLog, SlidingWindow};
//! use floodgate::failure::FailurePolicy;
//! use floodgate::{key::Global, layer::RateLimitLayer, store::RedisStore, Limiter};
//! use std::time::Duration;
//! use tower::ServiceExt;
//!
//! // A Redis that is not there: nothing listens on port 1.
//! let store = RedisStore::from_url("redis://127.0.0.1:1")?;
//! let api = Limiter::builder(store.clone(), SlidingWindow::new(100, Duration::from_secs(60)))
//!     .name("api")
//!     .on_store_failure(FailurePolicy::FailOpen)
//!     .build()?;
//! let login = Limiter::builder(store, SlidingLog::new(5, Duration::from_secs(900)))
//!     .name("login")
//!     .on_store_failure(FailurePolicy::FailClosed)
//!     .build()?;
//! let app = Router::new()
//!     .route("/", get(|| async { "ok" }).route_layer(RateLimitLayer::new(api, Global::new())))
//!     .route("/login", post(|| async { "welcome" }).route_layer(RateLimitLayer::new(login, Global::new())));
//!
//! // Failing open: served, without rate-limit headers (their numbers would be made up).
//! let res = app.clone().oneshot(Request::get("/").body(Body::empty())?).await?;
//! assert_eq!(res.status(), StatusCode::OK);
//! assert!(res.headers().get("ratelimit").is_none());
//!
//! // Failing closed: 503 with Retry-After, not 429: the client is not over
//! // its limit, the limiter cannot tell.
//! let res = app.clone().oneshot(Request::post("/login").body(Body::empty())?).await?;
//! assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
//! assert_eq!(res.headers()["retry-after"], "1");
//! # Ok(()) }
//! ```
//!
//! # How long a request waits for a failing store
//!
//! Not long, by design:
//!
//! - **Timeout.** Every decision waits at most
//!   [`timeout`](crate::LimiterBuilder::timeout), default **100 ms**: a
//!   hundred times what Redis normally takes on the same network, and well
//!   under any request's latency budget. It covers the whole call (waiting
//!   for a connection, the call, and its `EVAL` when Redis lacks floodgate's
//!   code). Then the policy decides. A timeout ends the wait, not the
//!   command: a call that timed out may still run when Redis catches up, and
//!   charge the key, so a slow Redis errs on the strict side. A concurrency
//!   limiter's acquire that timed out is undone: its release is sent after
//!   it, on the same connection, so that it does not hold a slot until its
//!   lease expires.
//! - **Circuit breaker.** After 5 failures in a row (errors or timeouts) the
//!   limiter stops calling the store for 500 ms: the policy answers at once,
//!   with no timeout to wait for. Then one request probes the store; if it
//!   answers, limiting resumes by itself. Tune it with
//!   [`circuit_breaker`](crate::LimiterBuilder::circuit_breaker)
//!   ([`CircuitBreaker::new(failures, cool_down)`](crate::failure::CircuitBreaker::new)).
//!   While the circuit is open, a fail-closed limiter's `Retry-After` is the
//!   rest of the cool-down.
//! - **Connecting** happens in the background, bounded by
//!   [`RedisStore::connect_timeout`](crate::store::RedisStore::connect_timeout)
//!   (1 s); after a failed attempt, calls fail at once for 100 ms instead of
//!   hammering a Redis that is down. A store can be built, and the app
//!   started, while Redis is down: it connects when Redis comes up.
//!
//! So with Redis gone, a request costs at most 100 ms for the first few, and
//! nothing after that.
//!
//! # A fallback: keep an approximate limit
//!
//! When no limit at all is not acceptable, but refusing everybody is not
//! either, decide with a second limiter over a
//! [`MemoryStore`](crate::store::MemoryStore) in each app server, with that
//! server's share of the limit. Its decisions keep their own
//! [reason](crate::Reason): a client over the fallback's limit is denied
//! for [`OverLimit`](crate::Reason::OverLimit) and answered `429` with
//! `Retry-After`, as over any limit, but without rate-limit fields, since
//! their numbers are this server's, not the shared state.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{body::Body, http::{Request, StatusCode}, routing::get, Router};
//! use floodgate::algorithm::SlidingWindow;
//! use floodgate::failure::{CircuitBreaker, FailurePolicy};
//! use floodgate::store::{MemoryStore, RedisStore};
//! use floodgate::{key::Global, layer::RateLimitLayer, Limiter, Reason};
//! use std::time::Duration;
//! use tower::ServiceExt;
//!
//! let minute = Duration::from_secs(60);
//! let servers = 4;
//! // 100 per minute for the whole fleet; 25 per server while Redis is away.
//! let local = Limiter::builder(MemoryStore::new(), SlidingWindow::new(100 / servers, minute))
//!     .name("search-local")
//!     .build()?;
//! // A Redis that is not there, as above.
//! let search = Limiter::builder(RedisStore::from_url("redis://127.0.0.1:1")?, SlidingWindow::new(100, minute))
//!     .name("search")
//!     .timeout(Duration::from_millis(50))
//!     .circuit_breaker(CircuitBreaker::new(3, Duration::from_secs(1)))
//!     .on_store_failure(FailurePolicy::fallback(local))
//!     .build()?;
//! let app = Router::new()
//!     .route("/search", get(|| async { "results" }))
//!     .layer(RateLimitLayer::new(search.clone(), Global::new()));
//!
//! for _ in 0..25 {
//!     let res = app.clone().oneshot(Request::get("/search").body(Body::empty())?).await?;
//!     assert_eq!(res.status(), StatusCode::OK);
//! }
//! let res = app.clone().oneshot(Request::get("/search").body(Body::empty())?).await?;
//! assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert!(res.headers().contains_key("retry-after"));
//! assert!(res.headers().get("ratelimit").is_none());
//!
//! let d = search.check("global", 1).await?; // the key `Global` gives every request
//! assert!(d.is_degraded() && d.denied() && d.reason() == Reason::OverLimit);
//! # Ok(()) }
//! ```
//!
//! The fallback of a rate limiter is a [`Limiter`](crate::Limiter), of any
//! algorithm; the fallback of a concurrency limiter is another
//! [`ConcurrencyLimiter`](crate::concurrency::ConcurrencyLimiter). Either
//! kind goes into [`FailurePolicy::fallback`](crate::failure::FailurePolicy::fallback);
//! the wrong kind is refused by `build`, naming `on_store_failure` (see
//! [`configuration`](super::configuration)).
//!
//! # The concurrency limiter
//!
//! A [`ConcurrencyLimiter`](crate::concurrency::ConcurrencyLimiter) (at most
//! N requests in flight, see [`several_limits`](super::several_limits)) is
//! built with the same settings and fails the same way, each policy in its
//! own terms:
//!
//! - [`FailOpen`]: the request is admitted without a lease, since there is
//!   no store to hold one in; nothing is released when it ends.
//! - [`FailClosed`]: denied, and the layer answers `503` with `Retry-After`.
//! - [`FallbackLimiter`]: a concurrency limiter over a memory store takes and
//!   releases the leases while Redis is away; when it is full, the layer
//!   answers `429`.
//! - [`ReturnError`]: `acquire` returns the error; the layer answers `503`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::concurrency::ConcurrencyLimiter;
//! use floodgate::failure::FailurePolicy;
//! use floodgate::store::{MemoryStore, RedisStore};
//! use floodgate::Reason;
//!
//! let down = RedisStore::from_url("redis://127.0.0.1:1")?;
//! let uploads = ConcurrencyLimiter::builder(down.clone(), 2).name("uploads").build()?;
//! let lease = uploads.acquire("ana").await?.expect("failing open admits");
//! assert_eq!(lease.decision().reason(), Reason::FailOpen);
//!
//! let exports = ConcurrencyLimiter::builder(down.clone(), 2)
//!     .name("exports")
//!     .on_store_failure(FailurePolicy::FailClosed)
//!     .build()?;
//! assert_eq!(exports.acquire("ana").await?.unwrap_err().reason(), Reason::FailClosed);
//!
//! // Four in flight for the fleet, one per server while Redis is away.
//! let local = ConcurrencyLimiter::builder(MemoryStore::new(), 1).name("reports-local").build()?;
//! let reports = ConcurrencyLimiter::builder(down, 4)
//!     .name("reports")
//!     .on_store_failure(FailurePolicy::fallback(local))
//!     .build()?;
//! let held = reports.acquire("ana").await?.expect("the local slot");
//! assert_eq!(reports.acquire("ana").await?.unwrap_err().reason(), Reason::OverLimit);
//! drop(held); // released in the fallback
//! assert!(reports.acquire("ana").await?.is_ok());
//! # Ok(()) }
//! ```
//!
//! # Seeing it happen
//!
//! Every decision a policy made has [`Decision::is_degraded`](crate::Decision::is_degraded)
//! set, and the layer then sends no rate-limit fields (their numbers would
//! not be the shared state). Its [`reason`](crate::Decision::reason) is
//! [`FailOpen`](crate::Reason::FailOpen), [`FailClosed`](crate::Reason::FailClosed),
//! or the fallback's own. Each such charge is counted in
//! `floodgate_degraded_total`, and by its reason in
//! `floodgate_decisions_total`; a fallback's decisions are also counted
//! under the fallback's own name. Each is logged (a `warn` at most once per
//! second per limiter, with how many it stands for; a `warn` when the
//! circuit opens, an `info` when it closes), and passed to your
//! [`failure_hook`](crate::LimiterBuilder::failure_hook) with why
//! ([`FailureKind`](crate::failure::FailureKind): timeout, unavailable,
//! connection, server, circuit open, ...). Alert on
//! `floodgate_degraded_total` rising: while it does, your limits are not
//! what you configured. See [`metrics_and_tracing`](super::metrics_and_tracing).
//!
//! # Testing your choice
//!
//! A store at `redis://127.0.0.1:1` fails at once, as in the first example:
//! your tests can check what your app answers while Redis is down, without
//! stopping anything. See [`testing`](super::testing).
//!
//! [`FailOpen`]: crate::failure::FailurePolicy::FailOpen
//! [`FailClosed`]: crate::failure::FailurePolicy::FailClosed
//! [`FallbackLimiter`]: crate::failure::FailurePolicy::Fallback
//! [`ReturnError`]: crate::failure::FailurePolicy::ReturnError
