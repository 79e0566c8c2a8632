//! Which bucket a request counts against: the rate-limit key.
//!
//! A [`KeyExtractor`] turns a request into a string key. Requests with the
//! same key are counted together. If no key can be found the extractor returns a
//! [`KeyRejection`], which the layer answers with `400` by default: a request
//! without a key is never put into a shared "unknown" bucket.
//!
//! # Choosing a key
//!
//! * **Authenticated traffic**: key on who the caller is: an API key with
//!   [`Header`], or a user id an auth layer put in the request extensions with
//!   [`ExtensionKey`]. This is the fairest key: it follows the caller across
//!   addresses and does not punish users behind one NAT.
//! * **Anonymous traffic, server reached directly**: [`PeerIp`], the TCP peer
//!   address. It cannot be spoofed (beyond what TCP allows).
//! * **Anonymous traffic behind reverse proxies or a load balancer**: the peer
//!   is the proxy, so every client would share one bucket. Use [`ClientIp`]
//!   and tell it which proxies to trust.
//! * **Everything together**: [`Global`], e.g. to protect a fragile backend.
//! * **Combinations**: a tuple `(A, B)` of extractors keys on both, e.g.
//!   per user *and* per address. [`from_fn`] covers everything else.
//!
//! # Why the left-most `X-Forwarded-For` entry is not the client
//!
//! Every proxy *appends* the address it received the request from, so
//! `X-Forwarded-For: a, b, c` reads left to right from the furthest hop to the
//! nearest. But the client can send the header itself, with anything in it:
//! only the entries that *your* proxies appended are true, and those are on
//! the right. [`ClientIp`] therefore walks the list from the right, skipping
//! the proxies you trust, and takes the first address it does not trust. An
//! attacker who puts a fresh address on the left of each request gets nothing
//! from it. If the peer itself is not a trusted proxy, the headers are not
//! read at all.
//!
//! # IPv6: one key per /64
//!
//! A single IPv6 customer usually gets a whole /64 (or more), so keying on
//! the full 128-bit address would give an attacker 2⁶⁴ fresh buckets. The IP
//! extractors therefore group IPv6 addresses by their /64 prefix by default
//! (key `2001:db8:1:2::/64`) and IPv4 addresses not at all (key `192.0.2.7`).
//! Both prefix lengths are configurable. IPv4-mapped IPv6 addresses
//! (`::ffff:192.0.2.7`, as seen on dual-stack sockets) count as IPv4.
//!
//! # Example
//!
//! ```
//! use floodgate::key::{ClientIp, Header, KeyExtractor, PeerIp, ProxyHeader};
//! use std::net::SocketAddr;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Behind a load balancer at 10.0.0.0/8 that appends to X-Forwarded-For.
//! let client = ClientIp::new()
//!     .trust("10.0.0.0/8".parse()?)
//!     .proxy_header(ProxyHeader::XForwardedFor);
//!
//! let mut req = http::Request::builder()
//!     .header("x-forwarded-for", "6.6.6.6, 203.0.113.9") // 6.6.6.6: spoofed
//!     .body(())?;
//! req.extensions_mut().insert(SocketAddr::from(([10, 1, 2, 3], 443)));
//! assert_eq!(client.extract(&req)?, "203.0.113.9");
//!
//! // Directly reachable: the peer is the client.
//! assert_eq!(PeerIp::new().extract(&req)?, "10.1.2.3");
//!
//! // A missing API key is a rejection, not a shared bucket.
//! assert!(Header::try_new("x-api-key")?.extract(&req).is_err());
//! # Ok(())
//! # }
//! ```

use std::borrow::Cow;
use std::fmt;

mod chain;
mod client_ip;
mod combine;
mod extension;
mod fn_key;
mod forwarded;
mod global;
mod header;
pub(crate) mod ip;
mod key_for;
mod peer;
mod view;

pub use chain::{BrokenChain, ProxyHeader};
pub use client_ip::ClientIp;
pub use extension::ExtensionKey;
pub use fn_key::{from_fn, FnKey};
pub use global::Global;
pub use header::Header;
/// The CIDR networks [`ClientIp::trust`] takes (the `ipnet` crate, 2.x),
/// re-exported so that the version always matches floodgate's.
pub use ipnet::{IpNet, Ipv4Net, Ipv6Net};
pub use key_for::KeyFor;
pub use peer::{peer_addr, PeerIp};
pub use view::RequestView;

/// Finds the rate-limit key of a request.
///
/// Called once per request by the layer, so it must be cheap and must not
/// block. Implementations are cloned into every service clone.
///
/// Implement it for a custom key, or use [`from_fn`] for a closure:
///
/// ```
/// use floodgate::key::{KeyExtractor, KeyRejection};
/// use std::borrow::Cow;
///
/// /// Keys on the first path segment, e.g. the tenant in `/acme/orders`.
/// #[derive(Clone)]
/// struct Tenant;
///
/// impl KeyExtractor for Tenant {
///     fn extract<'r, B>(&self, req: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
///         match req.uri().path().split('/').nth(1) {
///             Some(t) if !t.is_empty() => Ok(format!("tenant:{t}").into()),
///             _ => Err(KeyRejection::new("no tenant in the path")),
///         }
///     }
/// }
///
/// let req = http::Request::get("/acme/orders").body(()).unwrap();
/// assert_eq!(Tenant.extract(&req).unwrap(), "tenant:acme");
/// ```
pub trait KeyExtractor: Clone + Send + Sync + 'static {
    /// The key of `req`, or why there is none.
    ///
    /// The key may borrow from the request ([`Header`] lends the header's
    /// own bytes): the layer copies it only when it must keep it past the
    /// decision (a refund or a late charge, a concurrency lease).
    ///
    /// # Errors
    /// A [`KeyRejection`] saying what the request lacks; the layers answer it
    /// with 400 (gRPC: `INVALID_ARGUMENT`).
    fn extract<'r, B>(&self, req: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection>;

    /// The key of the limit named `limit` when this extractor gives that
    /// limit a key of its own ([`KeyFor`], made by
    /// [`RateLimitLayer::key_for`](crate::layer::RateLimitLayer::key_for));
    /// `None` (the default): the limit takes the request's key, what
    /// [`extract`](Self::extract) returns.
    fn extract_for<'r, B>(
        &self,
        limit: &str,
        req: &'r http::Request<B>,
    ) -> Option<Result<Cow<'r, str>, KeyRejection>> {
        let _ = (limit, req);
        None
    }
}

/// Why no key could be extracted from a request.
///
/// The reason is meant for the client (the layer puts it into a `400`
/// problem+json response by default), so it names what is missing but never
/// echoes header values.
///
/// ```
/// use floodgate::key::KeyRejection;
///
/// let r = KeyRejection::new("missing `x-api-key` header");
/// assert_eq!(r.reason(), "missing `x-api-key` header");
/// assert_eq!(r.to_string(), "missing `x-api-key` header");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRejection {
    reason: Cow<'static, str>,
}

impl KeyRejection {
    /// A rejection with a human-readable reason.
    pub fn new(reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            reason: reason.into(),
        }
    }

    /// Why no key could be extracted.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for KeyRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for KeyRejection {}
