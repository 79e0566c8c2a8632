//! The TCP peer address.

use std::borrow::Cow;
use std::net::SocketAddr;

use http::Extensions;

use super::ip::Grouping;
use super::{KeyExtractor, KeyRejection};
use crate::ConfigError;

/// The TCP peer address of a request, from its extensions.
///
/// Looks for, in this order:
/// * a plain [`SocketAddr`] (insert it yourself when serving with hyper),
/// * axum's `ConnectInfo<SocketAddr>` (feature `axum`; serve with
///   `into_make_service_with_connect_info::<SocketAddr>()`),
/// * tonic's `TcpConnectInfo` (feature `grpc`; tonic's server inserts it for
///   plain TCP. Behind tonic's own TLS it is wrapped in `TlsConnectInfo`, which
///   this crate cannot see: insert a [`SocketAddr`] in a layer instead).
///
/// ```
/// use std::net::SocketAddr;
///
/// let mut req = http::Request::new(());
/// assert_eq!(floodgate::key::peer_addr(req.extensions()), None);
/// let addr = SocketAddr::from(([192, 0, 2, 1], 50000));
/// req.extensions_mut().insert(addr);
/// assert_eq!(floodgate::key::peer_addr(req.extensions()), Some(addr));
/// ```
pub fn peer_addr(extensions: &Extensions) -> Option<SocketAddr> {
    if let Some(addr) = extensions.get::<SocketAddr>() {
        return Some(*addr);
    }
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::connect_info::ConnectInfo<SocketAddr>>() {
        return Some(info.0);
    }
    #[cfg(feature = "grpc")]
    if let Some(info) = extensions.get::<tonic::transport::server::TcpConnectInfo>() {
        return info.remote_addr();
    }
    None
}

pub(crate) fn no_peer() -> KeyRejection {
    KeyRejection::new(
        "no peer address: serve axum with \
         `into_make_service_with_connect_info::<SocketAddr>()`, \
         or insert the peer `SocketAddr` as a request extension",
    )
}

/// Keys on the TCP peer's IP address (see [`peer_addr`] for where it is
/// found).
///
/// Right when clients connect directly. Behind a reverse proxy every request
/// would have the proxy's address: use [`ClientIp`](super::ClientIp) there.
///
/// IPv6 addresses are grouped by their /64 network and IPv4 addresses are
/// kept whole, unless configured otherwise; IPv4-mapped IPv6 counts as IPv4.
///
/// ```
/// use floodgate::key::{KeyExtractor, PeerIp};
/// use std::net::SocketAddr;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let key = PeerIp::new().ipv4_prefix(24)?;
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert("192.0.2.77:1234".parse::<SocketAddr>()?);
/// assert_eq!(key.extract(&req)?, "192.0.2.0/24");
///
/// req.extensions_mut().insert("[2001:db8:1:2:3::4]:1234".parse::<SocketAddr>()?);
/// assert_eq!(key.extract(&req)?, "2001:db8:1:2::/64");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct PeerIp {
    grouping: Grouping,
}

impl PeerIp {
    /// IPv4 addresses whole, IPv6 addresses grouped by /64.
    pub fn new() -> Self {
        Self::default()
    }

    /// Groups IPv4 peer addresses by their first `len` bits (1 to 32, default
    /// 32: one key per address).
    ///
    /// # Errors
    /// A [`ConfigError`] naming `ipv4_prefix` for a length outside that
    /// range.
    pub fn ipv4_prefix(mut self, len: u8) -> Result<Self, ConfigError> {
        self.grouping = self.grouping.with_v4(len)?;
        Ok(self)
    }

    /// Groups IPv6 peer addresses by their first `len` bits (1 to 128, default
    /// 64: one key per typical site or home network).
    ///
    /// # Errors
    /// A [`ConfigError`] naming `ipv6_prefix` for a length outside that
    /// range.
    pub fn ipv6_prefix(mut self, len: u8) -> Result<Self, ConfigError> {
        self.grouping = self.grouping.with_v6(len)?;
        Ok(self)
    }
}

impl KeyExtractor for PeerIp {
    fn extract<'r, B>(&self, req: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        let addr = peer_addr(req.extensions()).ok_or_else(no_peer)?;
        Ok(Cow::Owned(self.grouping.key(addr.ip())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_peer_is_rejected() {
        let err = PeerIp::new().extract(&http::Request::new(())).unwrap_err();
        assert!(err.reason().contains("no peer address"), "{err}");
    }

    #[cfg(feature = "axum")]
    #[test]
    fn axum_connect_info() {
        let mut req = http::Request::new(());
        let addr: SocketAddr = "[::ffff:192.0.2.1]:80".parse().unwrap();
        req.extensions_mut()
            .insert(axum::extract::connect_info::ConnectInfo(addr));
        assert_eq!(PeerIp::new().extract(&req).unwrap(), "192.0.2.1");
    }

    #[cfg(feature = "grpc")]
    #[test]
    fn tonic_connect_info() {
        let mut req = http::Request::new(());
        req.extensions_mut()
            .insert(tonic::transport::server::TcpConnectInfo {
                local_addr: None,
                remote_addr: Some("192.0.2.2:80".parse().unwrap()),
            });
        assert_eq!(PeerIp::new().extract(&req).unwrap(), "192.0.2.2");
    }
}
