//! Testing your app with the limiter in it.
//!
//! Rate limits depend on time, which makes tests slow or flaky unless the
//! test owns the clock. Give the limiter a
//! [`ManualClock`](crate::clock::ManualClock) and the test decides when
//! time passes: every decision is then exact and repeatable, on a
//! [`MemoryStore`](crate::store::MemoryStore) as on Redis. Nothing sleeps.
//!
//! # Build the app from its limiters
//!
//! Let one function build the app from its limiters, and another build the
//! limiters with their limits: production passes Redis and no clock, tests
//! pass a memory store and a manual clock, and the limits under test are the
//! ones you ship.
//!
//! ```
//! use axum::{routing::get, Router};
//! use floodgate::algorithm::Gcra;
//! use floodgate::clock::ManualClock;
//! use floodgate::key::PeerIp;
//! use floodgate::layer::RateLimitLayer;
//! use floodgate::store::Store;
//! use floodgate::{ConfigError, Limiter};
//! use std::time::Duration;
//!
//! /// 10 per second per client IP, bursts of 10.
//! pub fn api_limiter(store: Store, clock: Option<ManualClock>) -> Result<Limiter<Gcra>, ConfigError> {
//!     let mut builder = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1))).name("api");
//!     if let Some(clock) = clock {
//!         builder = builder.clock(clock);
//!     }
//!     builder.build()
//! }
//!
//! pub fn app(api: Limiter<Gcra>) -> Router {
//!     Router::new()
//!         .route("/", get(|| async { "hello" }))
//!         .layer(RateLimitLayer::new(api, PeerIp::new()))
//! }
//!
//! // In tests/rate_limits.rs, as a `#[tokio::test] async fn`:
//! async fn a_burst_of_ten_then_429_until_the_next_token() -> Result<(), Box<dyn std::error::Error>> {
//!     use axum::{body::Body, extract::ConnectInfo, http::{Request, StatusCode}};
//!     use floodgate::store::MemoryStore;
//!     use std::net::SocketAddr;
//!     use tower::ServiceExt; // `oneshot`: tower with the "util" feature, a dev-dependency
//!
//!     let clock = ManualClock::new(0);
//!     let app = app(api_limiter(MemoryStore::new().into(), Some(clock.clone()))?);
//!     // axum's `ConnectInfo` is what `into_make_service_with_connect_info` puts
//!     // in each request; a test puts it there itself.
//!     let from = |ip: [u8; 4]| {
//!         let mut req = Request::get("/").body(Body::empty()).unwrap();
//!         req.extensions_mut().insert(ConnectInfo(SocketAddr::from((ip, 50_000))));
//!         req
//!     };
//!     let ana = [203, 0, 113, 9];
//!
//!     for remaining in (0..10).rev() {
//!         let res = app.clone().oneshot(from(ana)).await?;
//!         assert_eq!(res.status(), StatusCode::OK);
//!         assert_eq!(res.headers()["ratelimit"], format!(r#""api";r={remaining};t=1"#));
//!     }
//!     let res = app.clone().oneshot(from(ana)).await?;
//!     assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
//!     assert_eq!(res.headers()["retry-after"], "1"); // 100 ms, rounded up
//!
//!     // Somebody else is not affected.
//!     assert_eq!(app.clone().oneshot(from([198, 51, 100, 1])).await?.status(), StatusCode::OK);
//!
//!     // 100 ms later, one more token.
//!     clock.advance(Duration::from_millis(99));
//!     assert_eq!(app.clone().oneshot(from(ana)).await?.status(), StatusCode::TOO_MANY_REQUESTS);
//!     clock.advance(Duration::from_millis(1));
//!     assert_eq!(app.clone().oneshot(from(ana)).await?.status(), StatusCode::OK);
//!     Ok(())
//! }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! #     a_burst_of_ten_then_429_until_the_next_token().await
//! # }
//! ```
//!
//! `tower::ServiceExt::oneshot` sends one request through the router
//! without a server or a socket; add `tower = { version = "0.5", features =
//! ["util"] }` to your `[dev-dependencies]`. Everything floodgate does
//! happens in the layer, so what `oneshot` returns is what a client would
//! get, headers included. Served with connect info, the real server differs
//! only in where the peer address comes from.
//!
//! # Things to know
//!
//! - **Refunds and response-based charges run on a task** once the response
//!   is known ([`refund_when`](crate::layer::RateLimitLayer::refund_when),
//!   [`count_only_when`](crate::layer::RateLimitLayer::count_only_when), the
//!   refund of an inner denial). On a memory store one
//!   `tokio::task::yield_now().await` after the response lets it run; on
//!   Redis, poll until the state shows it (see the examples in
//!   [`choosing_a_key`](super::choosing_a_key) and
//!   [`several_limits`](super::several_limits)).
//! - **Peek without charging**: [`peek`](crate::Limiter::peek) reports a
//!   key's state as it is now (what remains, when it is full again) and
//!   charges nothing, as `limiter.check(key, 0)` does; a request of cost
//!   `c` would fit now when `remaining() >= c`.
//!   Keep a clone of the limiter before handing it to the layer: clones share
//!   everything.
//! - **Behind a proxy**, test the key you will get in production: a loopback
//!   peer and an `X-Forwarded-For` header (see
//!   [`behind_nginx`](super::behind_nginx)), including one the client forged.
//! - **The leaky bucket delays** admitted requests with `tokio::time::sleep`;
//!   a `#[tokio::test(start_paused = true)]` test skips the wait.
//! - **A concurrency lease** is held until the response body ends or is
//!   dropped: a test holds a slot by keeping the response, and frees it by
//!   dropping it (see [`several_limits`](super::several_limits#at-most-n-requests-in-flight-the-concurrency-limiter)).
//! - **Store failures**: a [`RedisStore`](crate::store::RedisStore) at
//!   `redis://127.0.0.1:1` fails at once. Build your app's limiters over it
//!   to test what your app answers while Redis is down (see
//!   [`failures`](super::failures)).
//! - **On a real Redis**, the same tests run with
//!   `RedisStore::from_url(...)` in place of the memory store: the
//!   `ManualClock` is passed to the script, so decisions are as exact as in
//!   memory. Give each test its own [`prefix`](crate::LimiterBuilder::prefix)
//!   or database, or flush between tests, so they do not share state.
//!   floodgate's own tests start a `redis-server` per test on a free port
//!   (`tests/common/`).
//!
//! A limiter can be used without the layer, so its limits can be tested on
//! their own:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::{algorithm::SlidingLog, clock::ManualClock, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! let clock = ManualClock::new(0);
//! let logins = Limiter::builder(MemoryStore::new(), SlidingLog::new(5, Duration::from_secs(900)))
//!     .clock(clock.clone())
//!     .build()?;
//! for _ in 0..5 {
//!     assert!(logins.check("198.51.100.4", 1).await?.allowed());
//!     clock.advance(Duration::from_secs(60));
//! }
//! let d = logins.check("198.51.100.4", 1).await?;
//! assert!(d.denied());
//! // The oldest attempt (at 0) leaves the 15-minute window at 900 s; it is now 300 s.
//! assert_eq!(d.retry_after(), Some(Duration::from_secs(600)));
//! # Ok(()) }
//! ```
