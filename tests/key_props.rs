//! Properties of the IP key extractors.
//!
//! 256 cases per property by default; set `PROPTEST_CASES` for more (read by
//! `ProptestConfig::default()`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use floodgate::key::{BrokenChain, ClientIp, KeyExtractor, PeerIp, ProxyHeader};
use http::{HeaderName, HeaderValue, Request};
use ipnet::IpNet;
use proptest::prelude::*;

// --- building requests ---

fn request(peer: IpAddr, name: &HeaderName, lines: &[Vec<u8>]) -> Request<()> {
    let mut r = Request::new(());
    for line in lines {
        let value = HeaderValue::from_bytes(line).expect("strategies make valid values");
        r.headers_mut().append(name.clone(), value);
    }
    r.extensions_mut().insert(SocketAddr::new(peer, 40000));
    r
}

fn xff() -> HeaderName {
    HeaderName::from_static("x-forwarded-for")
}

fn all_headers() -> [ProxyHeader; 3] {
    [
        ProxyHeader::Forwarded,
        ProxyHeader::XForwardedFor,
        ProxyHeader::XRealIp,
    ]
}

/// Trust configurations to run every input through.
fn configs(header: ProxyHeader) -> Vec<ClientIp> {
    let nets = ClientIp::new()
        .trust("10.0.0.0/8".parse().unwrap())
        .trust("2001:db8::/32".parse().unwrap())
        .trust("1.2.3.4/32".parse().unwrap());
    let hops = ClientIp::new().trusted_hops(3).unwrap();
    let mut out = Vec::new();
    for base in [ClientIp::new(), nets, hops] {
        for broken in [BrokenChain::UseLastTrusted, BrokenChain::Reject] {
            out.push(
                base.clone()
                    .proxy_header(header.clone())
                    .on_broken_chain(broken),
            );
        }
    }
    out
}

// --- strategies ---

/// Any byte a header value may hold.
fn header_byte() -> impl Strategy<Value = u8> {
    prop_oneof![Just(b'\t'), 0x20u8..0x7f, 0x80u8..=0xff]
}

const FRAGMENTS: &[&str] = &[
    "for=",
    "For=",
    "FOR",
    "=",
    "\"",
    "\\",
    "[",
    "]",
    ":",
    ",",
    ", ",
    ";",
    " ",
    "\t",
    "unknown",
    "_hidden",
    "_",
    "proto=https",
    "by=",
    "1.2.3.4",
    "10.0.0.9",
    "203.0.113.5",
    "2001:db8::1",
    "::ffff:1.2.3.4",
    "fe80::1%eth0",
    "65535",
    "65536",
    "99999",
    "0",
    "é",
];

/// Header bytes that look like proxy headers, broken in every way.
fn soup() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        4 => prop::sample::select(FRAGMENTS).prop_map(|s| s.as_bytes().to_vec()),
        1 => prop::collection::vec(header_byte(), 0..4),
    ];
    prop::collection::vec(fragment, 0..16).prop_map(|v| v.concat())
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![soup(), prop::collection::vec(header_byte(), 0..80)]
}

fn any_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<u32>().prop_map(|a| IpAddr::V4(Ipv4Addr::from(a))),
        any::<u128>().prop_map(|a| IpAddr::V6(Ipv6Addr::from(a))),
    ]
}

/// An address in 10.0.0.0/8 or `fd00::/8`: what the proxies use.
fn proxy_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<u32>().prop_map(|a| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (a & 0x00ff_ffff)))),
        any::<u128>().prop_map(|a| IpAddr::V6(Ipv6Addr::from((0xfd << 120) | (a >> 8)))),
    ]
}

/// An address in 203.0.113.0/24 or `2001:db8:c::/48`: the real client.
fn client_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<u8>().prop_map(|a| IpAddr::V4(Ipv4Addr::new(203, 0, 113, a))),
        any::<u128>().prop_map(|a| {
            let net = u128::from("2001:db8:c::".parse::<Ipv6Addr>().unwrap());
            IpAddr::V6(Ipv6Addr::from(net | (a >> 48)))
        }),
    ]
}

/// How a proxy writes an address into a header.
#[derive(Debug, Clone, Copy)]
struct Style {
    port: Option<u16>,
    brackets: bool,
    quoted: bool,
    upper: bool,
    extra: bool,
    pad: bool,
}

fn style() -> impl Strategy<Value = Style> {
    (
        prop::option::of(any::<u16>()),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(port, brackets, quoted, upper, extra, pad)| Style {
            port,
            brackets,
            quoted,
            upper,
            extra,
            pad,
        })
}

/// An `X-Forwarded-For` entry.
fn xff_entry(ip: IpAddr, s: Style) -> String {
    let addr = match (ip, s.port) {
        (IpAddr::V4(a), None) => a.to_string(),
        (IpAddr::V4(a), Some(p)) => format!("{a}:{p}"),
        (IpAddr::V6(a), None) if s.brackets => format!("[{a}]"),
        (IpAddr::V6(a), None) => a.to_string(),
        (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
    };
    if s.pad {
        format!(" \t{addr} ")
    } else {
        addr
    }
}

/// A `Forwarded` element (RFC 7239 forms: IPv6 and ports are quoted).
fn forwarded_element(ip: IpAddr, s: Style) -> String {
    let node = match (ip, s.port) {
        (IpAddr::V4(a), None) => a.to_string(),
        (IpAddr::V4(a), Some(p)) => format!("{a}:{p}"),
        (IpAddr::V6(a), None) => format!("[{a}]"),
        (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
    };
    let value = if s.quoted || node.contains(':') {
        format!("\"{node}\"")
    } else {
        node
    };
    let name = if s.upper { "For" } else { "for" };
    if s.extra {
        format!("proto=https;{name}={value};by=_lb")
    } else {
        format!("{name}={value}")
    }
}

/// Splits `entries` into header lines at the given cut points.
fn lines(entries: &[String], cuts: &[usize], sep: &str) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts
        .iter()
        .map(|c| c % (entries.len() + 1))
        .chain([0, entries.len()])
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts.windows(2)
        .map(|w| entries[w[0]..w[1]].join(sep).into_bytes())
        .collect()
}

fn is_mapped(a: u128) -> bool {
    Ipv6Addr::from(a).to_ipv4_mapped().is_some()
}

// --- properties ---

proptest! {
    #![proptest_config(ProptestConfig::default())]

    /// Arbitrary bytes in any proxy header: a key or a rejection, and a key
    /// is always an address or a network.
    #[test]
    fn no_panic_on_arbitrary_header_bytes(
        peer in prop_oneof![proxy_ip(), any_ip()],
        values in prop::collection::vec(value(), 0..4),
    ) {
        for header in all_headers() {
            let r = request(peer, header.name(), &values);
            for c in configs(header.clone()) {
                match c.extract(&r) {
                    Ok(key) => prop_assert!(
                        key.parse::<IpAddr>().is_ok() || key.parse::<IpNet>().is_ok(),
                        "{key}"
                    ),
                    Err(e) => prop_assert!(!e.reason().is_empty()),
                }
            }
        }
    }

    /// All addresses of one /64 have one key, and other /64s another.
    #[test]
    fn one_key_per_ipv6_64(a in any::<u128>(), low in any::<u64>(), other in any::<u128>()) {
        let b = (a & !u128::from(u64::MAX)) | u128::from(low);
        prop_assume!(!is_mapped(a) && !is_mapped(b) && !is_mapped(other));
        let key = |x: u128| {
            let r = request(IpAddr::V6(Ipv6Addr::from(x)), &xff(), &[]);
            PeerIp::new().extract(&r).unwrap().into_owned()
        };
        prop_assert_eq!(key(a), key(b));
        prop_assert_eq!(key(a) == key(other), a >> 64 == other >> 64);
        // The key is the canonical network, and holds the address.
        let net: IpNet = key(a).parse().unwrap();
        prop_assert_eq!(net.to_string(), key(a));
        prop_assert!(net.contains(&IpAddr::V6(Ipv6Addr::from(a))));
    }

    /// The same for any prefix length, through `ClientIp` too.
    #[test]
    fn one_key_per_ipv6_prefix(a in any::<u128>(), noise in any::<u128>(), len in 1u8..=128) {
        let host_bits = u128::MAX.checked_shr(u32::from(len)).unwrap_or(0);
        let b = (a & !host_bits) | (noise & host_bits);
        prop_assume!(!is_mapped(a) && !is_mapped(b));
        let c = ClientIp::new().trust_loopback().ipv6_prefix(len).unwrap();
        let key = |x: u128| {
            let entry = format!("[{}]:1", Ipv6Addr::from(x));
            let r = request("127.0.0.1".parse().unwrap(), &xff(), &[entry.into_bytes()]);
            c.extract(&r).unwrap().into_owned()
        };
        prop_assert_eq!(key(a), key(b));
    }

    /// IPv4-mapped IPv6 and IPv4 have the same key.
    #[test]
    fn mapped_is_ipv4(a in any::<u32>(), len in 1u8..=32) {
        let v4 = Ipv4Addr::from(a);
        let p = PeerIp::new().ipv4_prefix(len).unwrap();
        let key = |ip: IpAddr| p.extract(&request(ip, &xff(), &[])).unwrap().into_owned();
        prop_assert_eq!(key(IpAddr::V4(v4)), key(IpAddr::V6(v4.to_ipv6_mapped())));
    }

    /// `X-Forwarded-For` means the same in one line or over several.
    #[test]
    fn xff_is_invariant_to_line_splits(
        peer in prop_oneof![proxy_ip(), Just(IpAddr::from([1, 2, 3, 4])), any_ip()],
        entries in prop::collection::vec(
            prop_oneof![
                (prop_oneof![proxy_ip(), client_ip(), any_ip()], style())
                    .prop_map(|(ip, s)| xff_entry(ip, s)),
                soup().prop_map(|s| String::from_utf8_lossy(&s).replace(',', "")),
                Just(String::new()),
            ],
            0..12,
        ),
        cuts in prop::collection::vec(any::<usize>(), 0..5),
    ) {
        let joined = request(peer, &xff(), &[entries.join(",").into_bytes()]);
        let split = request(peer, &xff(), &lines(&entries, &cuts, ","));
        for c in configs(ProxyHeader::XForwardedFor) {
            prop_assert_eq!(c.extract(&joined), c.extract(&split));
        }
    }

    /// Whatever the client puts on the left of the chain, in any header form,
    /// the key is the first untrusted hop from the right: the real client.
    #[test]
    fn never_left_of_the_first_untrusted_hop(
        attacker in prop::collection::vec(soup(), 0..3),
        attacker_own_line in any::<bool>(),
        client in client_ip(),
        client_style in style(),
        proxies in prop::collection::vec((proxy_ip(), any_ip(), style()), 0..5),
        peer in proxy_ip(),
        cuts in prop::collection::vec(any::<usize>(), 0..3),
    ) {
        let by_network = ClientIp::new()
            .trust("10.0.0.0/8".parse().unwrap())
            .trust("fd00::/8".parse().unwrap());
        // By count the proxies may have any address.
        let by_count = ClientIp::new().trusted_hops(proxies.len() + 1).unwrap();
        let want = client.to_canonical();

        for (c, counted) in [(by_network, false), (by_count, true)] {
            let hops = |render: fn(IpAddr, Style) -> String| -> Vec<String> {
                std::iter::once(render(client, client_style))
                    .chain(proxies.iter().map(|&(net, any, s)| {
                        render(if counted { any } else { net }, s)
                    }))
                    .collect()
            };
            let forms = [
                (ProxyHeader::XForwardedFor, hops(xff_entry), ","),
                (ProxyHeader::Forwarded, hops(forwarded_element), ", "),
            ];
            for (header, hops, sep) in forms {
                let mut ls: Vec<Vec<u8>> = Vec::new();
                let mut hop_lines = lines(&hops, &cuts, sep);
                for a in &attacker {
                    if attacker_own_line || hop_lines.is_empty() {
                        ls.push(a.clone());
                    } else {
                        // The proxy appends to the client's line.
                        let mut first = a.clone();
                        first.extend_from_slice(sep.as_bytes());
                        first.extend_from_slice(&hop_lines[0]);
                        hop_lines[0] = first;
                    }
                }
                ls.extend(hop_lines);
                let r = request(peer, header.name(), &ls);
                for broken in [BrokenChain::UseLastTrusted, BrokenChain::Reject] {
                    let c = c.clone().proxy_header(header.clone()).on_broken_chain(broken);
                    prop_assert_eq!(c.client_ip(&r), Ok(want), "{:?} {:?}", header, ls);
                }
            }
        }
    }
}
