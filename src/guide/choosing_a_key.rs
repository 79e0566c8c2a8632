//! Choosing a key: what "one client" is.
//!
//! Requests with the same key are counted together. The key is taken from
//! each request by a [`KeyExtractor`](crate::key::KeyExtractor), the same
//! for both layers; a request it finds no key in is answered `400` with a
//! problem+json body saying why (gRPC: `INVALID_ARGUMENT`), and never put
//! into a shared "unknown" bucket.
//!
//! | your traffic | key | extractor |
//! |---|---|---|
//! | anonymous, clients connect to your server directly | the TCP peer address | [`PeerIp`] |
//! | anonymous, behind nginx, a load balancer or a CDN | the client address the proxies report | [`ClientIp`] with the proxies trusted |
//! | API clients with keys | the API key, or better the account it belongs to | [`Header`], [`ExtensionKey`] |
//! | logged-in users | the user id your auth layer found | [`ExtensionKey`] |
//! | everyone together (protecting a fragile backend) | one constant | [`Global`] |
//! | a combination, one bucket per pair | e.g. user and IP | a tuple `(A, B)` |
//! | anything else | your function | [`from_fn`], or implement `KeyExtractor` |
//!
//! # Clients that connect directly: `PeerIp`
//!
//! [`PeerIp`] keys on the address of the TCP connection, which a client
//! cannot forge. axum puts it in each request only when the app is served
//! with connect info; without it every request is answered `400` ("no peer
//! address"):
//!
//! ```
//! # async fn serve(app: axum::Router) -> std::io::Result<()> {
//! # let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<std::net::SocketAddr>()).await
//! # }
//! ```
//!
//! tonic's server puts the peer address in by itself (`TcpConnectInfo`);
//! floodgate reads it with the `grpc` feature (`features = ["grpc"]`).
//!
//! # Clients behind proxies: `ClientIp`
//!
//! Behind a reverse proxy the peer is the proxy: with [`PeerIp`] every client
//! would share the proxy's one bucket, and one busy client would lock out
//! everybody. The client's address is in a header the proxy writes, usually
//! `X-Forwarded-For`. [`ClientIp`] reads it, but only as far as it can be
//! trusted, so tell it which peers are your proxies:
//!
//! - [`trust_loopback()`](crate::key::ClientIp::trust_loopback): a proxy on
//!   the same host (nginx in front of the app: see
//!   [`behind_nginx`](super::behind_nginx));
//! - [`trust(network)`](crate::key::ClientIp::trust): your load balancers'
//!   subnet, or your CDN's published ranges;
//!   [`trust_private()`](crate::key::ClientIp::trust_private) trusts all of
//!   RFC 1918 and IPv6 unique-local addresses;
//! - [`trusted_hops(n)`](crate::key::ClientIp::trusted_hops): the `n`
//!   nearest hops whatever their address, when the proxies' addresses are
//!   not known in advance. Only safe if nobody can reach the app except
//!   through exactly those `n` proxies: a client that connects directly is
//!   taken for a proxy, and its header believed. Prefer networks.
//!
//! ## Why the left-most `X-Forwarded-For` entry is not the client
//!
//! Each proxy *appends* the address it received the request from, so
//! `X-Forwarded-For: a, b, c` reads from the furthest hop (left) to the
//! nearest (right). But the client may send the header itself, with anything
//! in it, and the proxies append to what it sent: only the entries your own
//! proxies added are true, and they are on the right. Limiting on the
//! left-most entry (as some limiters do) lets a client choose its own bucket:
//! a fresh address on each request, no limit at all. [`ClientIp`] walks the
//! list from the right, skips the proxies you trust, and takes the first
//! address it does not trust. If the peer itself is not trusted, no header
//! is read: anyone can send headers.
//!
//! ```
//! use floodgate::key::{ClientIp, KeyExtractor};
//! use std::net::SocketAddr;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // One load balancer in 10.0.0.0/8 in front of the app.
//! let key = ClientIp::new().trust("10.0.0.0/8".parse()?);
//!
//! let request = |peer: [u8; 4], xff: &str| -> http::Request<()> {
//!     let mut req = http::Request::builder().header("x-forwarded-for", xff).body(()).unwrap();
//!     req.extensions_mut().insert(SocketAddr::from((peer, 443)));
//!     req
//! };
//! // The client sent "X-Forwarded-For: 1.2.3.4" itself; the balancer appended
//! // the address it saw. The forged entry is never reached.
//! assert_eq!(key.extract(&request([10, 0, 0, 5], "1.2.3.4, 203.0.113.9"))?, "203.0.113.9");
//! assert_eq!(key.extract(&request([10, 0, 0, 5], "5.6.7.8, 203.0.113.9"))?, "203.0.113.9");
//! // Connecting directly (bypassing the balancer): the header is ignored.
//! assert_eq!(key.extract(&request([198, 51, 100, 7], "1.2.3.4"))?, "198.51.100.7");
//! # Ok(()) }
//! ```
//!
//! Other headers: [`ProxyHeader::Forwarded`](crate::key::ProxyHeader::Forwarded)
//! (RFC 7239), [`ProxyHeader::XRealIp`](crate::key::ProxyHeader::XRealIp)
//! (one address, set by the proxy), or a CDN's own, e.g.
//! `ProxyHeader::Single(HeaderName::from_static("cf-connecting-ip"))` with
//! the CDN's networks trusted. Name only headers your nearest proxy sets on
//! every request: a header it passes through untouched is whatever the
//! client wrote. An entry that is not an address (`unknown`, garbage) right
//! of the client makes the request count against the last trusted proxy's
//! bucket by default, which limits it rather than letting it through
//! ([`on_broken_chain`](crate::key::ClientIp::on_broken_chain)).
//!
//! ## IPv6: one key per /64
//!
//! One IPv6 customer usually gets a whole /64, often a /56 or /48. Keyed on
//! the full address, an attacker has 2⁶⁴ fresh buckets. So both IP
//! extractors group IPv6 addresses by their /64 (key `2001:db8:1:2::/64`),
//! and IPv4 addresses not at all (key `192.0.2.7`); IPv4-mapped IPv6
//! (`::ffff:192.0.2.7`) counts as IPv4. To be stricter, group by /56 or /48
//! with `ipv6_prefix`:
//!
//! ```
//! use floodgate::key::{KeyExtractor, PeerIp};
//! use std::net::SocketAddr;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut req = http::Request::new(());
//! req.extensions_mut().insert("[2001:db8:1:2:3::4]:5000".parse::<SocketAddr>()?);
//! assert_eq!(PeerIp::new().extract(&req)?, "2001:db8:1:2::/64");
//! assert_eq!(PeerIp::new().ipv6_prefix(48)?.extract(&req)?, "2001:db8:1::/48");
//! # Ok(()) }
//! ```
//!
//! The other way round, many people can share one IPv4 address (offices,
//! universities, mobile carriers' NAT): an IP limit must be generous enough
//! for all of them, and per-user limits are fairer wherever you know the
//! user.
//!
//! # API keys and users
//!
//! A key that follows the caller is the fairest: it does not punish
//! neighbours behind one NAT, and a caller cannot escape it by changing
//! address.
//!
//! - [`Header`] keys on a header's value, e.g. `x-api-key`. A missing,
//!   empty, repeated or oversized header is a `400`. Mind two things. A
//!   limiter that runs *before* your auth layer counts unverified keys, so
//!   a random key per request gets a fresh bucket each: put the key limit
//!   after authentication, and an IP limit before it. And the key's value
//!   ends up in the Redis key name (longer than 128 bytes it is hashed):
//!   for secrets, prefer the account id.
//! - [`Extension<T>`](crate::key::ExtensionKey) keys on a value your auth layer
//!   put in the request's extensions (the user id, the account, the
//!   organization): after authentication, by construction, since the
//!   extension is only there once auth has run.
//!
//! # Several keys per request: stacked layers
//!
//! Per IP *and* per user are two limits on two keys: two layers. In axum the
//! layer added last runs first, so list them innermost first. Here the
//! per-IP limit runs before authentication (so that guessing tokens is
//! limited too) and the per-user limit after it:
//!
//! ```
//! use axum::{extract::{ConnectInfo, Request}, http::StatusCode, middleware::{self, Next}};
//! use axum::{response::Response, routing::get, Router};
//! use floodgate::algorithm::SlidingWindow;
//! use floodgate::key::{ExtensionKey, PeerIp};
//! use floodgate::{layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::{fmt, net::SocketAddr, time::Duration};
//! use tower::ServiceExt;
//!
//! /// What the auth layer found.
//! #[derive(Clone)]
//! struct User(u64);
//! impl fmt::Display for User {
//!     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
//!         write!(f, "user:{}", self.0)
//!     }
//! }
//!
//! /// A stand-in for real authentication: `Authorization: Bearer user-<id>`.
//! async fn auth(mut req: Request, next: Next) -> Result<Response, StatusCode> {
//!     let header = req.headers().get("authorization").and_then(|v| v.to_str().ok());
//!     let id = header
//!         .and_then(|v| v.strip_prefix("Bearer user-"))
//!         .and_then(|id| id.parse().ok())
//!         .ok_or(StatusCode::UNAUTHORIZED)?;
//!     req.extensions_mut().insert(User(id));
//!     Ok(next.run(req).await)
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let minute = Duration::from_secs(60);
//! let store = MemoryStore::new();
//! let per_ip = Limiter::builder(store.clone(), SlidingWindow::new(100, minute)).name("per-ip").build()?;
//! let per_user = Limiter::builder(store, SlidingWindow::new(2, minute)).name("per-user").build()?;
//!
//! let app = Router::new()
//!     .route("/", get(|| async { "ok" }))
//!     .layer(RateLimitLayer::new(per_user, ExtensionKey::<User>::new())) // third
//!     .layer(middleware::from_fn(auth))                                // second
//!     .layer(RateLimitLayer::new(per_ip.clone(), PeerIp::new()));      // first
//!
//! let mut statuses = Vec::new();
//! for _ in 0..4 {
//!     let mut req = axum::http::Request::get("/").header("authorization", "Bearer user-7").body(axum::body::Body::empty())?;
//!     req.extensions_mut().insert(ConnectInfo(SocketAddr::from(([203, 0, 113, 9], 5000))));
//!     statuses.push(app.clone().oneshot(req).await?.status().as_u16());
//! }
//! assert_eq!(statuses, [200, 200, 429, 429]);
//!
//! // The two requests the per-user limit denied were given back to the
//! // per-IP limit: it holds only the two that were served. (Refunds run on a
//! // task once the response is known; let it run.)
//! tokio::task::yield_now().await;
//! assert_eq!(per_ip.check("203.0.113.9", 0).await?.remaining(), 98);
//! # Ok(()) }
//! ```
//!
//! That refund is [`RateLimitLayer::refund_inner_denials`], on by default:
//! with stacked limits, a request is charged only where all of them admit
//! it, so a client denied by its per-user limit does not also use up the
//! per-IP limit of everyone behind its address. It is not atomic: the outer
//! limit is charged first and refunded after the inner denial, so for that
//! moment it holds a charge it will give back, and a concurrent request may
//! see one less remaining. Turn it off (`refund_inner_denials(false)`) for an
//! outer limit that should count every attempt, denied or not (load
//! shedding). Several limits on *one* key are atomic instead: see
//! [`several_limits`](super::several_limits).
//!
//! A tuple of extractors is something else: `(ExtensionKey::<User>::new(),
//! PeerIp::new())` is *one* limit whose buckets are the pairs (user 7 from
//! one address, user 7 from another), e.g. to limit each device of an
//! account separately.
//!
//! # Several keys, one decision
//!
//! When the keys are known at the same point (a user and everyone, an API
//! key and its organisation), put both limits in one limiter and give each
//! its own key, taken by any extractor: [`RateLimitLayer::key_for`] (or
//! [`Limiter::check_keys`](crate::Limiter::check_keys) without a layer).
//! The layer's extractor then yields every limit's key
//! ([`KeyFor`](crate::key::KeyFor)), and a request lacking one of them
//! is answered 400 before anything is charged.
//! They are then decided **in one store call, all or nothing**: a request
//! the global limit refuses charges nothing to the user's, the 429 shows
//! the numbers of both, and a stalled Redis costs one timeout, not one per
//! layer. Stack layers instead when a key only exists later in the stack
//! (after authentication, as above).
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{routing::get, Router};
//! use floodgate::algorithm::{Gcra, Limits};
//! use floodgate::key::{Global, Header};
//! use floodgate::{layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! // 10 a second per API key, 500 a second for everyone together.
//! let limits = Limits::new("per-key", Gcra::new(10, Duration::from_secs(1)))
//!     .try_with("everyone", Gcra::new(500, Duration::from_secs(1)))?;
//! let limiter = Limiter::new(MemoryStore::new(), limits);
//! let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(
//!     RateLimitLayer::new(limiter, Header::try_new("x-api-key")?)
//!         // "per-key" takes the layer's key; "everyone" one key for all.
//!         .key_for("everyone", Global::named("all"))?,
//! );
//! # Ok(()) }
//! ```
//!
//! # Everyone together: `Global`
//!
//! Per-client limits alone do not bound the total: a million well-behaved
//! clients can still overwhelm a backend. Stack a [`Global`] limit outside
//! the per-client one for what the backend can take (e.g.
//! `Global::named("search")` on the search route), and charge expensive
//! operations more (see [`costs`](super::costs)). With Redis, a global key is
//! one hot key on one Redis (or one cluster shard): every request in the
//! whole fleet runs its script there.
//!
//! [`PeerIp`]: crate::key::PeerIp
//! [`ClientIp`]: crate::key::ClientIp
//! [`Header`]: crate::key::Header
//! [`ExtensionKey`]: crate::key::ExtensionKey
//! [`Global`]: crate::key::Global
//! [`from_fn`]: crate::key::from_fn
//! [`RateLimitLayer::refund_inner_denials`]: crate::layer::RateLimitLayer::refund_inner_denials
//! [`RateLimitLayer::key_for`]: crate::layer::RateLimitLayer::key_for
