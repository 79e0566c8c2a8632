//! The client address behind trusted reverse proxies.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use http::HeaderMap;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::chain::{self, BrokenChain, ProxyHeader, Walk, MAX_ENTRIES};
use super::forwarded;
use super::ip::{canonical, Grouping};
use super::peer::{no_peer, peer_addr};
use super::{KeyExtractor, KeyRejection};
use crate::ConfigError;

/// Keys on the client's IP address behind trusted reverse proxies.
///
/// # Algorithm
///
/// The chain is the entries of the proxy header followed by the TCP peer
/// (see [`peer_addr`]); hop 1 is the peer, hop 2 the
/// right-most entry, and so on. A hop is *trusted* if its address is in a
/// network given to [`trust`](Self::trust) (or the helpers), or if it is
/// among the first [`trusted_hops`](Self::trusted_hops) hops.
///
/// 1. If the peer is not trusted, the peer is the client; headers are not
///    read (anyone can send them).
/// 2. Otherwise the first header in [`proxy_headers`](Self::proxy_headers)
///    that the request has is read; repeated lines are one list, in order.
/// 3. Walking from the right, trusted hops are skipped; the first untrusted
///    address is the client. The left-most entries, which the client can
///    forge, are therefore never reached unless every hop right of them is
///    trusted.
/// 4. If every hop is trusted, the furthest (left-most) one is the client.
/// 5. An entry that is not an address, or more than 64 hops, ends the walk
///    as configured by [`on_broken_chain`](Self::on_broken_chain).
///
/// At most 64 entries are parsed from the right. `Forwarded` is tokenized
/// left to right (quoted strings need it), in linear time and constant
/// memory.
///
/// With [`trusted_hops`](Self::trusted_hops) the server must not be reachable
/// except through that many proxies: a client that connects directly is then
/// taken for a proxy. Trusted networks do not have that weakness.
///
/// The key is the client address grouped like [`PeerIp`](super::PeerIp)'s:
/// IPv6 by /64, IPv4 whole, by default.
///
/// ```
/// use floodgate::key::{ClientIp, KeyExtractor, ProxyHeader};
/// use std::net::SocketAddr;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let key = ClientIp::new()
///     .trust_private()
///     .proxy_header(ProxyHeader::Forwarded);
///
/// let mut req = http::Request::builder()
///     .header("forwarded", r#"for=6.6.6.6, for="[2001:db8:cafe::17]:4711""#)
///     .header("forwarded", "for=10.0.0.7;proto=https")
///     .body(())?;
/// req.extensions_mut().insert(SocketAddr::from(([10, 0, 0, 1], 443)));
/// assert_eq!(key.extract(&req)?, "2001:db8:cafe::/64");
/// assert_eq!(key.client_ip(&req)?, "2001:db8:cafe::17".parse::<std::net::IpAddr>()?);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a layer or extractor does nothing until it is used"]
pub struct ClientIp {
    networks: Arc<Vec<IpNet>>,
    hops: usize,
    headers: Arc<Vec<ProxyHeader>>,
    broken: BrokenChain,
    grouping: Grouping,
}

impl Default for ClientIp {
    fn default() -> Self {
        Self {
            networks: Arc::default(),
            hops: 0,
            headers: Arc::new(vec![ProxyHeader::XForwardedFor]),
            broken: BrokenChain::default(),
            grouping: Grouping::default(),
        }
    }
}

impl ClientIp {
    /// Trusts nothing (so the peer is the client until proxies are trusted),
    /// reads `X-Forwarded-For`, uses the last trusted address on a broken
    /// chain, keys IPv4 whole and IPv6 by /64.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trusts proxies in `network`, e.g. your load balancers' subnet.
    /// IPv4-mapped IPv6 networks (`::ffff:10.0.0.0/104`) are taken as IPv4.
    ///
    /// ```
    /// use floodgate::key::{ClientIp, IpNet};
    /// let key = ClientIp::new().trust("10.0.0.0/8".parse::<IpNet>().unwrap());
    /// ```
    pub fn trust(mut self, network: IpNet) -> Self {
        Arc::make_mut(&mut self.networks).push(unmap(network).trunc());
        self
    }

    /// Trusts loopback: `127.0.0.0/8` and `::1/128` (a proxy on the same
    /// host).
    pub fn trust_loopback(self) -> Self {
        self.trust(LOOPBACK_V4).trust(LOOPBACK_V6)
    }

    /// Trusts private networks: `10.0.0.0/8`, `172.16.0.0/12`,
    /// `192.168.0.0/16` (RFC 1918) and `fc00::/7` (unique local, RFC 4193).
    pub fn trust_private(self) -> Self {
        PRIVATE.iter().fold(self, |c, &net| c.trust(net))
    }

    /// Trusts the `n` nearest hops, whatever their address: the peer and the
    /// `n - 1` right-most header entries. With one load balancer in front,
    /// `n = 1` and the client is the right-most entry. At most 64.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `trusted_hops` when `n` is above 64.
    pub fn trusted_hops(mut self, n: usize) -> Result<Self, ConfigError> {
        if n > MAX_ENTRIES {
            return Err(ConfigError::new(
                "trusted_hops",
                format!("{n} is more than the {MAX_ENTRIES} hops examined"),
            ));
        }
        self.hops = n;
        Ok(self)
    }

    /// Reads only `header` (default: `X-Forwarded-For`).
    pub fn proxy_header(self, header: ProxyHeader) -> Self {
        self.proxy_headers([header])
    }

    /// Reads the first of `headers` the request has, in this order. Every
    /// header listed must be one your proxies set: a client can send any
    /// header the proxy lets through.
    pub fn proxy_headers(mut self, headers: impl IntoIterator<Item = ProxyHeader>) -> Self {
        self.headers = Arc::new(headers.into_iter().collect());
        self
    }

    /// What to do with an entry that is not an address right of the client
    /// (default [`BrokenChain::UseLastTrusted`]).
    pub fn on_broken_chain(mut self, broken: BrokenChain) -> Self {
        self.broken = broken;
        self
    }

    /// Groups IPv4 client addresses by their first `len` bits (1 to 32, default
    /// 32: one key per address).
    ///
    /// # Errors
    /// A [`ConfigError`] naming `ipv4_prefix` for a length outside that
    /// range.
    pub fn ipv4_prefix(mut self, len: u8) -> Result<Self, ConfigError> {
        self.grouping = self.grouping.with_v4(len)?;
        Ok(self)
    }

    /// Groups IPv6 client addresses by their first `len` bits (1 to 128, default
    /// 64: one key per typical site or home network).
    ///
    /// # Errors
    /// A [`ConfigError`] naming `ipv6_prefix` for a length outside that
    /// range.
    pub fn ipv6_prefix(mut self, len: u8) -> Result<Self, ConfigError> {
        self.grouping = self.grouping.with_v6(len)?;
        Ok(self)
    }

    /// The client's address, before grouping (IPv4-mapped IPv6 unmapped).
    /// Useful for logging.
    ///
    /// # Errors
    /// A [`KeyRejection`] when the request has no peer address.
    pub fn client_ip<B>(&self, req: &http::Request<B>) -> Result<IpAddr, KeyRejection> {
        let peer = canonical(peer_addr(req.extensions()).ok_or_else(no_peer)?.ip());
        let trusted = |ip: IpAddr, hop: usize| {
            hop <= self.hops || self.networks.iter().any(|n| n.contains(&ip))
        };
        // Not behind a proxy of ours: the headers are the client's own words.
        if !trusted(peer, 1) {
            return Ok(peer);
        }
        let headers = req.headers();
        let Some(header) = self.headers.iter().find(|h| headers.contains_key(h.name())) else {
            return Ok(peer);
        };
        match walk(header, headers, peer, trusted) {
            Walk::Client(ip) => Ok(ip),
            Walk::Broken { last, too_long } => {
                tracing::debug!(
                    header = %header.name(),
                    too_long,
                    "forwarding chain ends in an entry that is not an address"
                );
                match self.broken {
                    BrokenChain::UseLastTrusted => Ok(last),
                    BrokenChain::Reject if too_long => Err(KeyRejection::new(format!(
                        "more than {MAX_ENTRIES} trusted proxies in `{}`",
                        header.name()
                    ))),
                    BrokenChain::Reject => Err(KeyRejection::new(format!(
                        "`{}` has an entry that is not an IP address where the client should be",
                        header.name()
                    ))),
                }
            }
        }
    }
}

fn walk(
    header: &ProxyHeader,
    headers: &HeaderMap,
    peer: IpAddr,
    trusted: impl Fn(IpAddr, usize) -> bool,
) -> Walk {
    let values = headers.get_all(header.name());
    match header {
        ProxyHeader::XForwardedFor | ProxyHeader::List(_) => {
            chain::walk(peer, chain::list_rev(values), trusted)
        }
        ProxyHeader::XRealIp | ProxyHeader::Single(_) => {
            chain::walk(peer, std::iter::once(chain::single(&values)), trusted)
        }
        ProxyHeader::Forwarded => {
            // Only the right-most elements matter; keep one more than the
            // walk looks at so that it can tell the chain is too long.
            let mut nodes = VecDeque::new();
            for value in values {
                forwarded::for_nodes(value.as_bytes(), |node| {
                    if nodes.len() > MAX_ENTRIES {
                        nodes.pop_front();
                    }
                    nodes.push_back(node);
                });
            }
            chain::walk(peer, nodes.into_iter().rev(), trusted)
        }
    }
}

impl KeyExtractor for ClientIp {
    fn extract<'r, B>(&self, req: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        self.client_ip(req)
            .map(|ip| Cow::Owned(self.grouping.key(ip)))
    }
}

/// The networks of `trust_loopback` and `trust_private`, checked when the
/// crate compiles.
const LOOPBACK_V4: IpNet = v4(127, 0, 8);
const LOOPBACK_V6: IpNet = v6(0, 0x1, 128);
const PRIVATE: [IpNet; 4] = [
    v4(10, 0, 8),
    v4(172, 16, 12),
    v4(192, 168, 16),
    v6(0xfc00, 0, 7),
];

/// The IPv4 network `a.b.0.0/len`.
const fn v4(a: u8, b: u8, len: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, 0, 0), len))
}

/// The IPv6 network `first::last/len`.
const fn v6(first: u16, last: u16, len: u8) -> IpNet {
    IpNet::V6(Ipv6Net::new_assert(
        Ipv6Addr::new(first, 0, 0, 0, 0, 0, 0, last),
        len,
    ))
}

/// Addresses are matched in canonical form, so networks must be too.
fn unmap(network: IpNet) -> IpNet {
    match network {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => Ipv4Net::new(v4, v6.prefix_len() - 96).map_or(network, IpNet::V4),
            None => network,
        },
        _ => network,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }
    use std::fmt::Write as _;
    use std::net::SocketAddr;

    fn req(peer: &str, headers: &[(&str, &str)]) -> http::Request<()> {
        let mut b = http::Request::builder();
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let mut r = b.body(()).unwrap();
        r.extensions_mut()
            .insert(peer.parse::<SocketAddr>().unwrap());
        r
    }

    #[test]
    fn mapped_networks_are_unmapped() {
        let c = ClientIp::new().trust("::ffff:10.0.0.0/104".parse().unwrap());
        assert_eq!(c.networks[0], net("10.0.0.0/8"));
        let r = req("[::ffff:10.1.1.1]:1", &[("x-forwarded-for", "1.2.3.4")]);
        assert_eq!(c.extract(&r).unwrap(), "1.2.3.4");
    }

    #[test]
    fn networks_are_truncated() {
        let c = ClientIp::new().trust("10.9.9.9/8".parse().unwrap());
        assert_eq!(c.networks[0], net("10.0.0.0/8"));
    }

    #[test]
    fn first_present_header_wins() {
        let c = ClientIp::new()
            .trust_loopback()
            .proxy_headers([ProxyHeader::Forwarded, ProxyHeader::XRealIp]);
        let r = req(
            "127.0.0.1:1",
            &[("x-real-ip", "2.2.2.2"), ("forwarded", "for=1.1.1.1")],
        );
        assert_eq!(c.extract(&r).unwrap(), "1.1.1.1");
        let r = req("127.0.0.1:1", &[("x-real-ip", "2.2.2.2")]);
        assert_eq!(c.extract(&r).unwrap(), "2.2.2.2");
        let r = req("127.0.0.1:1", &[("x-forwarded-for", "3.3.3.3")]);
        assert_eq!(c.extract(&r).unwrap(), "127.0.0.1");
    }

    #[test]
    fn trusted_hops_bound() {
        assert!(ClientIp::new().trusted_hops(64).is_ok());
        assert_eq!(
            ClientIp::new().trusted_hops(65).unwrap_err().field(),
            "trusted_hops"
        );
    }

    #[test]
    fn forwarded_keeps_the_right_end() {
        let trusted = (0..1000).fold(String::new(), |mut s, i| {
            let _ = write!(s, "for=10.0.{}.{}, ", i / 256, i % 256);
            s
        });
        let c = ClientIp::new()
            .trust_private()
            .proxy_header(ProxyHeader::Forwarded);
        let value = format!("{trusted}for=198.51.100.1");
        let r = req("10.0.0.1:1", &[("forwarded", &value)]);
        assert_eq!(c.extract(&r).unwrap(), "198.51.100.1");
        // Only trusted hops, more than 64 of them: a broken chain.
        let value = format!("{trusted}for=10.9.9.9");
        let r = req("10.0.0.1:1", &[("forwarded", &value)]);
        let err = c
            .on_broken_chain(BrokenChain::Reject)
            .extract(&r)
            .unwrap_err();
        assert!(err.reason().contains("more than 64"), "{err}");
    }
}
