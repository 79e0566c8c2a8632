//! Behind nginx: axum behind an nginx reverse proxy on the same host.
//!
//! The usual deployment: nginx listens on ports 80 and 443, terminates TLS,
//! and passes requests to the app on `127.0.0.1:3000`. To the app, every
//! request then comes from `127.0.0.1`, so limiting by the peer address
//! would put every client into one bucket. nginx must say who the client
//! is, and the app must believe nginx and nobody else.
//!
//! # nginx
//!
//! ```nginx
//! server {
//!     listen 80;
//!     listen [::]:80;
//!     server_name api.example.com;
//!
//!     location / {
//!         proxy_pass http://127.0.0.1:3000;
//!         proxy_set_header Host $host;
//!         proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
//!         proxy_set_header X-Forwarded-Proto $scheme;
//!     }
//! }
//! ```
//!
//! `$proxy_add_x_forwarded_for` is the request's own `X-Forwarded-For` (if
//! the client sent one) with `$remote_addr`, the address nginx received the
//! request from, appended on the right. nginx sends no `X-Forwarded-For` by
//! default: without that line the app cannot know the client.
//!
//! # The app
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use floodgate::{algorithm::Gcra, key::ClientIp, layer::RateLimitLayer, store::RedisStore, Limiter};
//! use std::{net::SocketAddr, time::Duration};
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let store = RedisStore::from_url("redis://127.0.0.1:6379")?;
//!     let limiter = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1)))
//!         .name("per-ip")
//!         .build()?;
//!     let app = Router::new()
//!         .route("/", get(|| async { "hello" }))
//!         // nginx connects from loopback: trust it, and nothing else.
//!         .layer(RateLimitLayer::new(limiter, ClientIp::new().trust_loopback()));
//!
//!     // Listen on loopback only: clients get in through nginx, not around it.
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//!     // With connect info, each request carries its peer address (nginx's),
//!     // which is what tells ClientIp that the request came through nginx.
//!     axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//!     Ok(())
//! }
//! ```
//!
//! Three lines matter: [`ClientIp::new().trust_loopback()`](crate::key::ClientIp::trust_loopback)
//! (`127.0.0.0/8` and `::1`, whichever nginx connects from), the bind to
//! `127.0.0.1`, and `into_make_service_with_connect_info::<SocketAddr>()`
//! (without it there is no peer address and every request is answered
//! `400`).
//!
//! # What the app sees
//!
//! [`ClientIp`](crate::key::ClientIp) believes `X-Forwarded-For` only when
//! the peer is trusted, and then reads it from the right, skipping trusted
//! addresses: the first untrusted entry is the client. The entry nginx
//! appended is right-most, so what the client wrote itself, on the left, is
//! never reached:
//!
//! ```
//! use floodgate::key::{ClientIp, KeyExtractor};
//! use std::net::SocketAddr;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let key = ClientIp::new().trust_loopback();
//! let request = |peer: &str, xff: Option<&str>| -> http::Request<()> {
//!     let mut req = http::Request::builder();
//!     if let Some(xff) = xff {
//!         req = req.header("x-forwarded-for", xff);
//!     }
//!     let mut req = req.body(()).unwrap();
//!     req.extensions_mut().insert(peer.parse::<SocketAddr>().unwrap());
//!     req
//! };
//!
//! // A client at 203.0.113.9, through nginx.
//! assert_eq!(key.extract(&request("127.0.0.1:41000", Some("203.0.113.9")))?, "203.0.113.9");
//! // The same client, sending "X-Forwarded-For: 10.1.1.1" itself to look
//! // like someone else: nginx appended the true address, and that one counts.
//! assert_eq!(key.extract(&request("127.0.0.1:41000", Some("10.1.1.1, 203.0.113.9")))?, "203.0.113.9");
//! // An IPv6 client: one key per /64.
//! assert_eq!(key.extract(&request("[::1]:41000", Some("2001:db8:7:8::42")))?, "2001:db8:7:8::/64");
//! // A client that reached the app directly (had it listened on 0.0.0.0):
//! // not a trusted peer, so its header is ignored.
//! assert_eq!(key.extract(&request("198.51.100.7:5000", Some("1.2.3.4")))?, "198.51.100.7");
//! // nginx without the X-Forwarded-For line: all that is known is nginx,
//! // and every client would share its bucket. Check your configuration!
//! assert_eq!(key.extract(&request("127.0.0.1:41000", None))?, "127.0.0.1");
//! # Ok(()) }
//! ```
//!
//! # Mistakes that put everyone in one bucket, or nobody
//!
//! | mistake | what happens |
//! |---|---|
//! | [`PeerIp`](crate::key::PeerIp) behind nginx | every request is `127.0.0.1`: one bucket for all clients; the first busy one locks everybody out |
//! | `ClientIp::new()` without `trust_loopback()` | the same: an untrusted peer is the client, and headers are not read |
//! | no `proxy_set_header X-Forwarded-For` in nginx | the same: nginx is the only address known |
//! | keying on the left-most `X-Forwarded-For` entry (a hand-written extractor) | each client picks its own key: no limit at all |
//! | `trusted_hops(1)` with the app listening on `0.0.0.0` | a client that connects to the app directly is taken for nginx, and its forged header believed |
//! | nginx to the app over a Unix socket (`proxy_pass http://unix:...`) | no peer address: every request is `400`; use TCP on loopback |
//!
//! # More proxies in front of nginx
//!
//! If a cloud load balancer or a CDN sits in front of nginx, nginx's
//! `$remote_addr` is that proxy, and the client is one entry further left.
//! Either trust the proxy's networks as well
//! (`ClientIp::new().trust_loopback().trust("10.0.0.0/8".parse()?)`, or
//! the ranges your CDN publishes), or let nginx's realip module find the
//! client (`set_real_ip_from <proxy network>; real_ip_header
//! X-Forwarded-For; real_ip_recursive on;`), after which `$remote_addr` is
//! the client and the configuration above works unchanged.
//!
//! # Other things nginx does
//!
//! - nginx passes the `429` and `503` answers and every rate-limit header
//!   through untouched. Keep `proxy_intercept_errors` off for the API (or
//!   leave 429 and 503 out of its `error_page`s), or clients lose the
//!   problem+json body.
//! - nginx's own `limit_req` is a per-nginx leaky bucket: it does not see
//!   the other servers' traffic. You do not need it next to floodgate; if
//!   you keep it as a coarse first line, set `limit_req_status 429;` (its
//!   default is 503).
//! - gRPC through nginx (`grpc_pass grpc://127.0.0.1:50051;`) takes the same
//!   line as `grpc_set_header X-Forwarded-For $proxy_add_x_forwarded_for;`;
//!   tonic's server provides the peer address by itself.
//! - Several app servers, each with its own nginx: the same configuration on
//!   every host, and one Redis they all reach (see
//!   [`redis_and_cluster`](super::redis_and_cluster)). The whole app, with its
//!   failure policies, is at the start of the [guide](super).
