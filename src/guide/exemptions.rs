//! Exemptions, limits in shadow mode, and seeing a limit before it bites.
//!
//! # Keys never limited, keys always refused
//!
//! Your own monitoring, a partner's office network, the health checker:
//! never limited. A scraper you caught, an abusive network: always
//! refused, whatever its rate. [`Exemptions`](crate::Exemptions) holds both
//! lists, by exact key and, for IP keys, by IPv4 or IPv6 network (as
//! envoyproxy/ratelimit's `unlimited` descriptors, upstash's deny list and
//! rate-limiter-flexible's black-and-white wrapper do).
//!
//! They belong to the limiter, not the layer: the layers, `check`,
//! `check_all`, `check_with` and `peek` all see them, and a concurrency
//! limiter takes them too (a refund or a release still reaches the store,
//! to give back what was charged before the key was listed). A listed key is answered before
//! anything else, without the store:
//!
//! | list | decision | HTTP | gRPC | metrics (`floodgate_decisions_total`) |
//! |---|---|---|---|---|
//! | allow | [`Reason::Exempt`](crate::Reason::Exempt), admitted, numbers `u64::MAX` | the service's response, no rate-limit fields | the same | `outcome="allowed",reason="exempt"` |
//! | deny | [`Reason::Blocked`](crate::Reason::Blocked), denied, no `retry_after` | 403, problem+json | `PERMISSION_DENIED` | `outcome="denied",reason="blocked"` |
//!
//! A key on both lists is refused. The handle is cheap to clone and every
//! clone is the same lists: keep one where your admin endpoint, a file
//! watcher or a database poll can reach it, and change the lists while the
//! service runs. The next decision sees the change; nothing is rebuilt.
//! With both lists empty a decision pays one atomic load for them.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::{body::Body, http::Request, routing::get, Router};
//! use floodgate::{algorithm::Gcra, key::PeerIp, layer::RateLimitLayer};
//! use floodgate::{store::MemoryStore, Exemptions, Limiter};
//! use std::{net::SocketAddr, time::Duration};
//! use tower::ServiceExt;
//!
//! let exemptions = Exemptions::new();
//! exemptions.allow_network("10.0.0.0/8".parse()?); // the office
//! exemptions.deny_network("2001:db8:bad::/48".parse()?); // a scraper
//! let limiter = Limiter::builder(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)))
//!     .exemptions(exemptions.clone())
//!     .build()?;
//! let app = Router::new()
//!     .route("/", get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(limiter, PeerIp::new()));
//!
//! let from = |peer: &str| {
//!     let mut request = Request::new(Body::empty());
//!     let peer: SocketAddr = peer.parse().unwrap();
//!     request.extensions_mut().insert(axum::extract::ConnectInfo(peer));
//!     request
//! };
//! let office = app.clone().oneshot(from("10.1.2.3:5000")).await?;
//! assert_eq!(office.status(), 200);
//! assert!(office.headers().get("ratelimit").is_none()); // not limited
//! let scraper = app.clone().oneshot(from("[2001:db8:bad::7]:5000")).await?;
//! assert_eq!(scraper.status(), 403);
//!
//! // Later, from an admin endpoint: the scraper is let back in.
//! exemptions.remove_denied_network("2001:db8:bad::/48".parse()?);
//! assert_eq!(app.oneshot(from("[2001:db8:bad::7]:5000")).await?.status(), 200);
//! # Ok(()) }
//! ```
//!
//! A network matches an IP key in it, and a key that is itself a network
//! inside it: [`PeerIp`](crate::key::PeerIp) and
//! [`ClientIp`](crate::key::ClientIp) key IPv6 clients by their /64 (or the
//! prefix you chose), and `2001:db8:bad:1::/64` is in `2001:db8:bad::/48`.
//! Other keys (an API key, a user id) are matched exactly.
//!
//! # One limit in shadow mode
//!
//! [`RateLimitLayer::shadow`](crate::layer::RateLimitLayer::shadow) puts a
//! whole layer in shadow mode (see [`several_limits`](super::several_limits)).
//! To try one new limit beside limits already enforced, put that limit
//! alone in shadow mode ([`Limits::shadow`](crate::algorithm::Limits::shadow),
//! as envoy's `shadow_mode`): it decides and is charged on every request,
//! its state as if it were enforced, but it never denies. The request is
//! decided by the other limits, and charged to them; the layer leaves the
//! shadowed limit out of the `RateLimit` fields (it limits no client), and
//! `floodgate_shadow_denials_total{limiter,limit}` counts the requests it
//! would have denied. When that count looks right, remove the `.shadow`:
//! the limit keeps its counters (its state is the same key).
//!
//! ```
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use floodgate::algorithm::{Limits, SlidingWindow};
//! use std::time::Duration;
//!
//! let limits = Limits::new("second", SlidingWindow::new(10, Duration::from_secs(1)))
//!     .try_with("day", SlidingWindow::new(5_000, Duration::from_secs(86_400)))?
//!     .shadow("day")?; // measured, not enforced yet
//! assert!(limits.is_shadowed("day"));
//! # Ok(()) }
//! ```
//!
//! It works the same on Redis and in memory: Redis decides the shadowed
//! limit in the same call as the others, and does not let its denial stop
//! their charge.
//!
//! # Seeing a limit before it bites
//!
//! `floodgate_near_limit_total{limiter}` counts the admissions that left
//! some limit with less than a fifth of it (envoy's `near_limit`). Against
//! `floodgate_decisions_total{outcome="allowed"}` it says how close your
//! clients run to their limits: a rising share means denials are coming.
//! See [`metrics_and_tracing`](super::metrics_and_tracing) for the other
//! metrics.
