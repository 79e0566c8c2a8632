//! IP addresses: one canonical form, grouping by prefix, and parsing the
//! node strings found in proxy headers.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ConfigError;

/// `::ffff:1.2.3.4` becomes `1.2.3.4`, so a client reached over a dual-stack
/// socket and over IPv4 has one key and matches IPv4 trusted networks.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

/// How many leading bits of an address make its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grouping {
    v4: u8,
    v6: u8,
}

impl Default for Grouping {
    fn default() -> Self {
        Self { v4: 32, v6: 64 }
    }
}

/// `len` if it is a prefix length of a `family` address of `max` bits.
fn prefix_len(field: &'static str, family: &str, len: u8, max: u8) -> Result<u8, ConfigError> {
    if (1..=max).contains(&len) {
        return Ok(len);
    }
    Err(ConfigError::new(
        field,
        format!(
            "{len} is not an {family} prefix length: use 1 to {max} ({max} = one key per address)"
        ),
    ))
}

impl Grouping {
    pub(crate) fn with_v4(self, len: u8) -> Result<Self, ConfigError> {
        let v4 = prefix_len("ipv4_prefix", "IPv4", len, 32)?;
        Ok(Self { v4, ..self })
    }

    pub(crate) fn with_v6(self, len: u8) -> Result<Self, ConfigError> {
        let v6 = prefix_len("ipv6_prefix", "IPv6", len, 128)?;
        Ok(Self { v6, ..self })
    }

    /// The key of `ip`: the address itself at full length, else the network
    /// in CIDR notation (`2001:db8:1:2::/64`). The forms are canonical, so
    /// every address of one network gives the same string.
    pub(crate) fn key(self, ip: IpAddr) -> String {
        match canonical(ip) {
            IpAddr::V4(a) if self.v4 == 32 => a.to_string(),
            IpAddr::V4(a) => {
                let net = u32::from(a) & (u32::MAX << (32 - self.v4));
                format!("{}/{}", Ipv4Addr::from(net), self.v4)
            }
            IpAddr::V6(a) if self.v6 == 128 => a.to_string(),
            IpAddr::V6(a) => {
                let net = u128::from(a) & (u128::MAX << (128 - self.v6));
                format!("{}/{}", Ipv6Addr::from(net), self.v6)
            }
        }
    }
}

/// One hop of a proxy header, as far as it can be understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Node {
    Ip(IpAddr),
    /// RFC 7239 `unknown`, or an element without `for`.
    Unknown,
    /// RFC 7239 obfuscated identifier, e.g. `_hidden`.
    Obfuscated,
    /// Anything else: not an address.
    Invalid,
}

/// Longer than any valid node: `[ffff:…:255.255.255.255]:65535` is 53 bytes.
/// Checked before parsing so a huge entry costs nothing.
pub(crate) const MAX_NODE_LEN: usize = 64;

/// Parses one hop: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:80`, `unknown`, `_obfuscated`; RFC 7239
/// obfuscated ports (`:_p1`) too. Bare IPv6 is accepted because
/// `X-Forwarded-For` writers use it.
pub(crate) fn parse_node(raw: &[u8]) -> Node {
    if raw.is_empty() || raw.len() > MAX_NODE_LEN {
        return Node::Invalid;
    }
    let Ok(s) = std::str::from_utf8(raw) else {
        return Node::Invalid;
    };
    if let Some(rest) = s.strip_prefix('[') {
        let Some((inside, after)) = rest.split_once(']') else {
            return Node::Invalid;
        };
        let port_ok = after.is_empty() || after.strip_prefix(':').is_some_and(valid_port);
        return match inside.parse::<Ipv6Addr>() {
            Ok(v6) if port_ok => Node::Ip(canonical(IpAddr::V6(v6))),
            _ => Node::Invalid,
        };
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Node::Ip(canonical(ip));
    }
    let (name, port) = match s.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (s, None),
    };
    if port.is_some_and(|p| !valid_port(p)) {
        return Node::Invalid;
    }
    if name.eq_ignore_ascii_case("unknown") {
        Node::Unknown
    } else if obfuscated(name) {
        Node::Obfuscated
    } else if let (Ok(v4), Some(_)) = (name.parse::<Ipv4Addr>(), port) {
        Node::Ip(IpAddr::V4(v4))
    } else {
        Node::Invalid
    }
}

/// RFC 7239 `port / obfport`: 1 to 5 digits (at most 65535), or obfuscated.
fn valid_port(p: &str) -> bool {
    let digits = (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
    (digits && p.parse::<u32>().is_ok_and(|n| n <= 65535)) || obfuscated(p)
}

/// RFC 7239 `"_" 1*(ALPHA / DIGIT / "." / "_" / "-")`.
fn obfuscated(s: &str) -> bool {
    s.len() >= 2
        && s.starts_with('_')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Node {
        Node::Ip(s.parse().unwrap())
    }

    #[test]
    fn nodes() {
        assert_eq!(parse_node(b"192.0.2.1"), ip("192.0.2.1"));
        assert_eq!(parse_node(b"192.0.2.1:8080"), ip("192.0.2.1"));
        assert_eq!(parse_node(b"192.0.2.1:_p"), ip("192.0.2.1"));
        assert_eq!(parse_node(b"2001:db8::1"), ip("2001:db8::1"));
        assert_eq!(parse_node(b"[2001:db8::1]"), ip("2001:db8::1"));
        assert_eq!(parse_node(b"[2001:db8::1]:4711"), ip("2001:db8::1"));
        assert_eq!(parse_node(b"::ffff:192.0.2.1"), ip("192.0.2.1"));
        assert_eq!(parse_node(b"[::ffff:192.0.2.1]:1"), ip("192.0.2.1"));
        assert_eq!(parse_node(b"unknown"), Node::Unknown);
        assert_eq!(parse_node(b"UNKNOWN:80"), Node::Unknown);
        assert_eq!(parse_node(b"_hidden"), Node::Obfuscated);
        assert_eq!(parse_node(b"_hidden:_port"), Node::Obfuscated);
    }

    #[test]
    fn bad_nodes() {
        for bad in [
            &b""[..],
            b"_",
            b"1.2.3.4:65536",
            b"1.2.3.4:123456",
            b"1.2.3.4:",
            b"1.2.3.4:-1",
            b"[2001:db8::1",
            b"[2001:db8::1]:",
            b"[2001:db8::1]x",
            b"[1.2.3.4]",
            b"01.2.3.4",
            b"1.2.3",
            b"fe80::1%eth0",
            b"host.example",
            b"\xff\xfe",
            b"_bad!",
            &[b'1'; 100],
        ] {
            assert_eq!(
                parse_node(bad),
                Node::Invalid,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn grouping() {
        let g = Grouping::default();
        assert_eq!(g.key("192.0.2.7".parse().unwrap()), "192.0.2.7");
        assert_eq!(g.key("::ffff:192.0.2.7".parse().unwrap()), "192.0.2.7");
        assert_eq!(
            g.key("2001:db8:1:2:aaaa::1".parse().unwrap()),
            "2001:db8:1:2::/64"
        );
        let g = g.with_v4(24).unwrap().with_v6(128).unwrap();
        assert_eq!(g.key("192.0.2.7".parse().unwrap()), "192.0.2.0/24");
        assert_eq!(g.key("2001:db8::1".parse().unwrap()), "2001:db8::1");
        let g = g.with_v4(1).unwrap().with_v6(1).unwrap();
        assert_eq!(g.key("200.0.0.1".parse().unwrap()), "128.0.0.0/1");
        assert_eq!(g.key("ffff::1".parse().unwrap()), "8000::/1");
    }

    #[test]
    fn bad_prefixes() {
        let g = Grouping::default();
        assert_eq!(g.with_v4(0).unwrap_err().field(), "ipv4_prefix");
        assert_eq!(g.with_v4(33).unwrap_err().field(), "ipv4_prefix");
        assert_eq!(g.with_v6(0).unwrap_err().field(), "ipv6_prefix");
        assert_eq!(g.with_v6(129).unwrap_err().field(), "ipv6_prefix");
    }
}
