//! The forwarding chain: the headers proxies write it in, what to do when
//! it is broken, and the walk from the peer leftwards through it.

use std::net::IpAddr;

use http::header::GetAll;
use http::{HeaderName, HeaderValue};

use super::ip::{parse_node, Node};

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");

/// A header in which proxies pass on the address they received a request
/// from.
///
/// Read only headers that your nearest proxy *sets or appends to* on every
/// request. A header it passes through untouched is whatever the client
/// wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyHeader {
    /// RFC 7239 `Forwarded: for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`.
    /// Each element's `for` is one hop.
    Forwarded,
    /// `X-Forwarded-For: client, proxy1, proxy2`: a comma-separated list
    /// that each proxy appends to.
    XForwardedFor,
    /// `X-Real-IP: client`: one address, set (not appended) by the proxy.
    XRealIp,
    /// A custom header in the `X-Forwarded-For` format.
    List(HeaderName),
    /// A custom header with one address in the `X-Real-IP` format, such as
    /// `CF-Connecting-IP` or `True-Client-IP`.
    Single(HeaderName),
}

impl ProxyHeader {
    /// The header's name.
    pub fn name(&self) -> &HeaderName {
        match self {
            ProxyHeader::Forwarded => &http::header::FORWARDED,
            ProxyHeader::XForwardedFor => &X_FORWARDED_FOR,
            ProxyHeader::XRealIp => &X_REAL_IP,
            ProxyHeader::List(name) | ProxyHeader::Single(name) => name,
        }
    }
}

/// What [`ClientIp`](super::ClientIp) does when the walk meets an entry that is not an
/// address (garbage, RFC 7239 `unknown` or `_obfuscated`), or more than 64
/// trusted proxies.
///
/// Such entries are only reached when a *trusted* proxy wrote them (the walk
/// stops at the first untrusted address before), so they are a proxy that
/// hides or lost the client, or a misconfiguration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BrokenChain {
    /// Use the address of the trusted proxy that wrote the entry: the
    /// furthest address the chain vouches for. All such requests share that
    /// proxy's bucket: limited, never unlimited. This is what nginx's
    /// `real_ip_recursive` does, and what Go's `realclientip` does when
    /// chained with its remote-address fallback.
    #[default]
    UseLastTrusted,
    /// Reject the request: no key.
    Reject,
}

/// At most this many header entries are examined per request, so a huge
/// header costs bounded work. More trusted hops than this is a broken chain.
pub(crate) const MAX_ENTRIES: usize = 64;

/// Where the walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// The first untrusted hop, or the furthest one if all are trusted.
    Client(IpAddr),
    /// A hop that is not an address (garbage, `unknown`, obfuscated), or more
    /// than [`MAX_ENTRIES`] trusted hops. `last` is the nearest trusted hop
    /// before it: the furthest address the chain vouches for.
    Broken { last: IpAddr, too_long: bool },
}

/// Walks from `peer` (hop 1) through `nodes`, given right to left (hop 2,
/// 3, ...). `trusted(ip, hop)` says whether that hop is a proxy of ours.
pub(crate) fn walk(
    peer: IpAddr,
    nodes: impl Iterator<Item = Node>,
    trusted: impl Fn(IpAddr, usize) -> bool,
) -> Walk {
    if !trusted(peer, 1) {
        return Walk::Client(peer);
    }
    let mut last = peer;
    for (i, node) in nodes.take(MAX_ENTRIES + 1).enumerate() {
        if i == MAX_ENTRIES {
            return Walk::Broken {
                last,
                too_long: true,
            };
        }
        match node {
            Node::Ip(ip) if !trusted(ip, i + 2) => return Walk::Client(ip),
            Node::Ip(ip) => last = ip,
            Node::Unknown | Node::Obfuscated | Node::Invalid => {
                return Walk::Broken {
                    last,
                    too_long: false,
                }
            }
        }
    }
    // Every hop was a trusted proxy: the furthest one is all we know.
    Walk::Client(last)
}

/// The entries of comma-separated lists (`X-Forwarded-For`), right to left
/// over all the header's lines. Lazy: the walk parses only what it needs.
pub(crate) fn list_rev(values: GetAll<'_, HeaderValue>) -> impl Iterator<Item = Node> + '_ {
    values
        .into_iter()
        .rev()
        .flat_map(|v| v.as_bytes().rsplit(|&b| b == b','))
        .map(trim_ows)
        // HTTP list syntax: empty elements are ignored.
        .filter(|e| !e.is_empty())
        .map(parse_node)
}

/// A header holding one address (`X-Real-IP`). Several lines are ambiguous,
/// so they are one invalid entry.
pub(crate) fn single(values: &GetAll<'_, HeaderValue>) -> Node {
    let mut it = values.iter();
    match (it.next(), it.next()) {
        (Some(v), None) => parse_node(trim_ows(v.as_bytes())),
        _ => Node::Invalid,
    }
}

fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn nodes(list: &[&str]) -> Vec<Node> {
        list.iter()
            .rev()
            .map(|s| parse_node(s.as_bytes()))
            .collect()
    }

    #[test]
    fn untrusted_peer_is_the_client() {
        let w = walk(ip("1.1.1.1"), nodes(&["2.2.2.2"]).into_iter(), |_, _| false);
        assert_eq!(w, Walk::Client(ip("1.1.1.1")));
    }

    #[test]
    fn first_untrusted_from_the_right() {
        let trusted = |a: IpAddr, _| a.to_string().starts_with("10.");
        let list = nodes(&["6.6.6.6", "3.3.3.3", "10.0.0.2"]);
        assert_eq!(
            walk(ip("10.0.0.1"), list.into_iter(), trusted),
            Walk::Client(ip("3.3.3.3"))
        );
    }

    #[test]
    fn hop_counts() {
        let list = nodes(&["6.6.6.6", "3.3.3.3", "4.4.4.4"]);
        let by_count = |n| move |_, hop| hop <= n;
        assert_eq!(
            walk(ip("5.5.5.5"), list.clone().into_iter(), by_count(0)),
            Walk::Client(ip("5.5.5.5"))
        );
        assert_eq!(
            walk(ip("5.5.5.5"), list.clone().into_iter(), by_count(1)),
            Walk::Client(ip("4.4.4.4"))
        );
        assert_eq!(
            walk(ip("5.5.5.5"), list.clone().into_iter(), by_count(2)),
            Walk::Client(ip("3.3.3.3"))
        );
        // More hops than entries: the furthest one.
        assert_eq!(
            walk(ip("5.5.5.5"), list.into_iter(), by_count(9)),
            Walk::Client(ip("6.6.6.6"))
        );
    }

    #[test]
    fn garbage_breaks_the_chain() {
        let list = nodes(&["3.3.3.3", "garbage", "10.0.0.2"]);
        let trusted = |a: IpAddr, _| a.to_string().starts_with("10.");
        assert_eq!(
            walk(ip("10.0.0.1"), list.into_iter(), trusted),
            Walk::Broken {
                last: ip("10.0.0.2"),
                too_long: false
            }
        );
    }

    #[test]
    fn bounded() {
        let list = std::iter::repeat(Node::Ip(ip("10.0.0.2")));
        assert_eq!(
            walk(ip("10.0.0.1"), list, |_, _| true),
            Walk::Broken {
                last: ip("10.0.0.2"),
                too_long: true
            }
        );
        let exactly = std::iter::repeat_n(Node::Ip(ip("10.0.0.2")), MAX_ENTRIES);
        assert_eq!(
            walk(ip("10.0.0.1"), exactly, |_, _| true),
            Walk::Client(ip("10.0.0.2"))
        );
    }

    #[test]
    fn lists_over_lines() {
        let mut h = http::HeaderMap::new();
        h.append("x", HeaderValue::from_static(" 1.1.1.1 ,, 2.2.2.2"));
        h.append("x", HeaderValue::from_static(""));
        h.append("x", HeaderValue::from_static("3.3.3.3,\t[::1]:80 "));
        let got: Vec<_> = list_rev(h.get_all("x")).collect();
        let want: Vec<_> = ["::1", "3.3.3.3", "2.2.2.2", "1.1.1.1"]
            .iter()
            .map(|s| Node::Ip(ip(s)))
            .collect();
        assert_eq!(got, want);
        assert_eq!(single(&h.get_all("x")), Node::Invalid);
        assert_eq!(single(&h.get_all("y")), Node::Invalid);
    }
}
