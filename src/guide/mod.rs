//! The guide: every decision a new user makes, in the order they come up,
//! each with examples that run (`cargo test --doc` runs every one of them).
//!
//! This module holds no code, only documentation. Read it on
//! [docs.rs](https://docs.rs/tower-floodgate/latest/floodgate/guide/), or locally
//! with `cargo doc --open`. The README says what floodgate is and how to try
//! it; this guide says how to put it in front of a real service.
//!
//! # The decisions
//!
//! | decision | default | read |
//! |---|---|---|
//! | where the state lives: this process, one Redis, a Redis Cluster | none: you pass a store | [`redis_and_cluster`] |
//! | the algorithm and its numbers (limit, window, burst) | none: you pass one | [`choosing_an_algorithm`] |
//! | which numbers and names are valid, and what is refused before anything runs | - | [`configuration`] |
//! | limits in the service's configuration file, with environment overrides | limits written in code | [`limits_as_configuration`] |
//! | what a client is: peer IP, client IP behind proxies, API key, user | none: you pass a key extractor | [`choosing_a_key`], [`behind_nginx`] |
//! | which requests the limit covers, and in which order with your other middleware | the routes you put it on | [below](#where-the-layer-goes) |
//! | what a request costs | 1 | [`costs`] |
//! | several limits, tiers, counting by the response, in-flight limits | one limit | [`several_limits`] |
//! | waiting for a turn instead of a 429, sharing a partner's quota, costs known only after the response (LLM tokens) | refuse at once; the cost is known up front | [`waiting_and_late_costs`] |
//! | changing the limits while the service runs (a reloaded file), keeping what clients used | limits fixed at build | [`changing_limits`] |
//! | keys never limited or always refused, a limit tried in shadow mode, limits about to bite | none | [`exemptions`] |
//! | what happens when Redis is slow or down | fail open after 100 ms | [`failures`] |
//! | which URL for your managed Redis, TLS, Sentinel, the ACL, the eviction policy, what to monitor | - | [`deploying`] |
//! | one key hammered by the whole fleet, or more decisions than one call each | many decisions per call; no allotments | [`hot_keys`] |
//! | what each decision is answered with (429, 503, ...), which headers go out, and what clients do with them | IETF `RateLimit` fields | [`headers_and_clients`] |
//! | how to test your app with the limiter in it | - | [`testing`] |
//! | how to watch it in production | metrics and spans off until you install a recorder or subscriber | [`metrics_and_tracing`] |
//! | services in other languages, behind Envoy, Istio or Envoy Gateway | - | [`from_any_language`] |
//!
//! # Putting it together: axum behind nginx, on Redis
//!
//! The case the guide is written for: an axum app on several servers, each
//! behind an nginx on the same host, sharing one Redis. Per client IP,
//! 20 requests per second with bursts of 40 (GCRA), failing open if Redis is
//! unreachable; logins limited to 5 failed attempts per 15 minutes per client
//! IP, exactly (sliding log), failing closed.
//!
//! `Cargo.toml`:
//!
//! ```toml
//! [dependencies]
//! tower-floodgate = "0.1" # imported as `floodgate`
//! axum = "0.8"
//! tokio = { version = "1", features = ["full"] }
//! ```
//!
//! The app, as a function of its store so that tests can build it over a
//! [`MemoryStore`](crate::store::MemoryStore) (this block runs: it builds the
//! app over memory and sends it a request as nginx would forward it):
//!
//! ```
//! use axum::{http::StatusCode, routing::{get, post}, Router};
//! use floodgate::algorithm::{Gcra, SlidingLog};
//! use floodgate::failure::FailurePolicy;
//! use floodgate::key::ClientIp;
//! use floodgate::layer::RateLimitLayer;
//! use floodgate::store::Store;
//! use floodgate::{ConfigError, Limiter};
//! use std::time::Duration;
//!
//! pub fn app(store: Store) -> Result<Router, ConfigError> {
//!     // nginx on the same host connects from loopback and appends the
//!     // client's address to X-Forwarded-For: trust loopback, nothing else.
//!     let client_ip = ClientIp::new().trust_loopback();
//!
//!     // Abuse protection for the whole API: fail open (the default).
//!     let api = Limiter::builder(store.clone(), Gcra::new(20, Duration::from_secs(1)).try_burst(40)?)
//!         .name("api")
//!         .on_store_failure(FailurePolicy::FailOpen)
//!         .build()?;
//!     // Password guessing: exact, counts only failures, fails closed.
//!     let login = Limiter::builder(store, SlidingLog::new(5, Duration::from_secs(15 * 60)))
//!         .name("login")
//!         .on_store_failure(FailurePolicy::FailClosed)
//!         .build()?;
//!
//!     Ok(Router::new()
//!         .route("/", get(|| async { "hello" }))
//!         .route(
//!             "/login",
//!             post(|| async { StatusCode::UNAUTHORIZED }).route_layer(
//!                 RateLimitLayer::new(login, client_ip.clone())
//!                     .count_only_when(|s: StatusCode| s == StatusCode::UNAUTHORIZED),
//!             ),
//!         )
//!         .layer(RateLimitLayer::new(api, client_ip)))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # use tower::ServiceExt;
//! # use floodgate::store::MemoryStore;
//! let app = app(MemoryStore::new().into())?;
//! // What the app sees from nginx: a loopback peer and the client's address
//! // appended to X-Forwarded-For (after whatever the client sent itself).
//! let mut req = axum::http::Request::get("/")
//!     .header("x-forwarded-for", "6.6.6.6, 203.0.113.9")
//!     .body(axum::body::Body::empty())?;
//! req.extensions_mut()
//!     .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from(([127, 0, 0, 1], 40000))));
//! let res = app.clone().oneshot(req).await?;
//! assert_eq!(res.status(), StatusCode::OK);
//! assert_eq!(res.headers()["ratelimit"], r#""api";r=39;t=1"#);
//! # // `Router::layer` covers paths that match no route too (see below).
//! # let mut req = axum::http::Request::get("/wp-admin").body(axum::body::Body::empty())?;
//! # req.extensions_mut().insert(axum::extract::ConnectInfo(std::net::SocketAddr::from(([127, 0, 0, 1], 40000))));
//! # let res = app.clone().oneshot(req).await?;
//! # assert_eq!(res.status(), StatusCode::NOT_FOUND);
//! # assert!(res.headers().contains_key("ratelimit"));
//! # Ok(()) }
//! ```
//!
//! `main` (marked `no_run` here: it needs a Redis and serves forever):
//!
//! ```no_run
//! # use axum::Router;
//! # use floodgate::store::Store;
//! # fn app(store: Store) -> Result<Router, floodgate::ConfigError> { Ok(Router::new()) }
//! use floodgate::store::RedisStore;
//! use std::net::SocketAddr;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Connections are made lazily: this does not fail while Redis is down.
//!     let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
//!     let store = RedisStore::from_url(&url)?;
//!     let app = app(store.into())?;
//!     // Loopback only: clients reach the app through nginx, never directly.
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     // Connect info puts the peer address (nginx's) in each request.
//!     axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//!     Ok(())
//! }
//! ```
//!
//! nginx (the whole file is in [`behind_nginx`]):
//!
//! ```nginx
//! location / {
//!     proxy_pass http://127.0.0.1:3000;
//!     proxy_set_header Host $host;
//!     proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
//! }
//! ```
//!
//! Redis: `sudo apt-get install redis-server` (macOS: `brew install redis`)
//! on one host that all app servers reach, or a managed Redis: floodgate
//! needs only `FCALL` (Redis 7; `EVALSHA` before), no module. Nothing has to
//! be loaded or migrated first: a call that finds floodgate's code missing
//! runs it by `EVAL` while it is loaded in the background, on first use and
//! whenever Redis lacks it again.
//!
//! What each choice above means, and the alternatives, is in the sections.
//!
//! # Where the layer goes
//!
//! A [`RateLimitLayer`](crate::layer::RateLimitLayer) (or a
//! [`ConcurrencyLimitLayer`](crate::layer::ConcurrencyLimitLayer)) is an
//! ordinary tower layer, placed like any other axum middleware:
//!
//! - `Router::layer` covers every route added *before* it, and requests to
//!   paths that match no route (a scanner probing for `/wp-admin` is
//!   charged too, which is usually what you want);
//! - `Router::route_layer` covers only requests whose path matches a route
//!   (a method the route does not answer, 405, is still charged);
//! - `get(handler).route_layer(...)` covers one route, only the methods it
//!   answers, e.g. with its own cost (see [`costs`]). Not
//!   `get(handler).layer(...)`: that also wraps the route's 405 answer, so a
//!   `POST` to a `get` route is charged, and answered 429 instead of 405
//!   once the client is over the limit;
//! - with several layers, **the one added last runs first**. A limit keyed
//!   on what your auth layer found must run after it, so it is added
//!   *before* the auth layer; an IP limit meant to slow down credential
//!   guessing is added after it (see
//!   [`choosing_a_key`](choosing_a_key#several-keys-per-request-stacked-layers)).
//!
//! Clones of a layer share its limiter: one limit can cover several routes
//! through several `.route_layer(...)` calls.

pub mod behind_nginx;
pub mod changing_limits;
pub mod choosing_a_key;
pub mod choosing_an_algorithm;
pub mod configuration;
pub mod costs;
pub mod deploying;
pub mod exemptions;
pub mod failures;
pub mod from_any_language;
pub mod headers_and_clients;
pub mod hot_keys;
pub mod limits_as_configuration;
pub mod metrics_and_tracing;
pub mod redis_and_cluster;
pub mod several_limits;
pub mod testing;
pub mod waiting_and_late_costs;
