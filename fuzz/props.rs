//! The properties floodgate is fuzzed for, shared by two drivers:
//!
//! * the libFuzzer targets in `fuzz/fuzz_targets/` (`cargo fuzz run …`,
//!   see `fuzz/README.md`), and
//! * `tests/fuzz_props.rs`, the same properties under proptest, run by
//!   `cargo test` on every CI run.
//!
//! Each property takes raw bytes. To reach the interesting parts of the
//! parsers quickly, bytes from [`TOKEN`] up stand for whole pieces of proxy
//! headers or keys (addresses, `for=`, quotes, braces…), [`NEWLINE`] starts a
//! new header line, and every other byte is itself (so non-UTF-8, controls
//! and obs-text are all reachable).
//!
//! Included with `#[path]` by both drivers; it depends only on floodgate,
//! `http` and `tokio`.

use floodgate::algorithm::TokenBucket;
use floodgate::clock::ManualClock;
use floodgate::key::{BrokenChain, ClientIp, Header, KeyExtractor, PeerIp, ProxyHeader};
use floodgate::store::MemoryStore;
use floodgate::Limiter;
use http::{HeaderName, HeaderValue, Request};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

/// Bytes from here up are tokens.
pub const TOKEN: u8 = 0xE0;
/// This byte starts a new header line.
pub const NEWLINE: u8 = 0xDF;

/// What header tokens stand for.
const HEADER_TOKENS: [&str; 32] = [
    "127.0.0.1",
    "10.0.0.7",
    "203.0.113.9",
    "192.0.2.1:80",
    "::1",
    "[::1]:443",
    "2001:db8:cafe::17",
    "[2001:db8::1]",
    "::ffff:10.1.2.3",
    "::ffff:198.51.100.1",
    "fd00::5",
    "unknown",
    "_hidden",
    "for=",
    "For=",
    "proto=https",
    "by=10.0.0.1",
    "\"",
    "\\",
    ", ",
    ",",
    ";",
    " ",
    "\t",
    "[",
    "]",
    ":",
    ":_p1",
    "for=\"[2001:db8::1]:4711\"",
    "for=192.0.2.60;proto=http",
    "999.1.1.1",
    "1.2.3.4.5",
];

/// What key tokens stand for.
const KEY_TOKENS: [&str; 16] = [
    "{",
    "}",
    "%",
    "#",
    "%7B",
    "%7D",
    "%25",
    "%23",
    "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk",
    "é",
    "\0",
    " ",
    ":",
    "{}",
    "}{",
    "\u{10ffff}",
];

/// Expands fuzz bytes into lines of bytes (see the module docs).
pub fn expand(data: &[u8], tokens: &[&str]) -> Vec<Vec<u8>> {
    let mut lines = vec![Vec::new()];
    for &b in data {
        if b == NEWLINE {
            lines.push(Vec::new());
        } else if b >= TOKEN {
            let t = tokens[(b - TOKEN) as usize % tokens.len()];
            lines.last_mut().unwrap().extend_from_slice(t.as_bytes());
        } else {
            lines.last_mut().unwrap().push(b);
        }
    }
    lines
}

const PEERS: [Option<&str>; 12] = [
    None,
    Some("127.0.0.1:1"),
    Some("127.0.0.9:2"),
    Some("10.1.2.3:3"),
    Some("192.168.0.1:4"),
    Some("[::1]:5"),
    Some("[::ffff:10.0.0.1]:6"),
    Some("[::ffff:203.0.113.5]:7"),
    Some("203.0.113.1:8"),
    Some("[2001:db8::1]:9"),
    Some("[fd00::1]:10"),
    Some("172.16.0.1:11"),
];

/// A fuzzed `ClientIp` configuration: (extractor, header names, whether the
/// peer is trusted by address, trusted hops).
fn client_ip_config(c: u8, p: u8) -> (ClientIp, Vec<HeaderName>, u8) {
    let custom_list = HeaderName::from_static("x-client-chain");
    let custom_single = HeaderName::from_static("cf-connecting-ip");
    let headers: Vec<ProxyHeader> = match c & 7 {
        0 => vec![ProxyHeader::XForwardedFor],
        1 => vec![ProxyHeader::Forwarded],
        2 => vec![ProxyHeader::XRealIp],
        3 => vec![ProxyHeader::List(custom_list)],
        4 => vec![ProxyHeader::Single(custom_single)],
        5 => vec![ProxyHeader::Forwarded, ProxyHeader::XForwardedFor],
        6 => vec![ProxyHeader::XRealIp, ProxyHeader::XForwardedFor],
        _ => vec![],
    };
    let names = headers.iter().map(|h| h.name().clone()).collect();
    let mut key = ClientIp::new().proxy_headers(headers);
    if c & 8 != 0 {
        key = key.trust_loopback();
    }
    if c & 16 != 0 {
        key = key.trust_private();
    }
    if c & 32 != 0 {
        key = key.on_broken_chain(BrokenChain::Reject);
    }
    let hops = c >> 6;
    key = key.trusted_hops(hops as usize).unwrap();
    let v4 = [32, 24, 16, 8, 1, 31][(p & 15) as usize % 6];
    let v6 = [64, 128, 48, 56, 1, 127][(p >> 4) as usize % 6];
    key = key.ipv4_prefix(v4).unwrap().ipv6_prefix(v6).unwrap();
    (key, names, p)
}

fn grouping(p: u8) -> PeerIp {
    let v4 = [32, 24, 16, 8, 1, 31][(p & 15) as usize % 6];
    let v6 = [64, 128, 48, 56, 1, 127][(p >> 4) as usize % 6];
    PeerIp::new()
        .ipv4_prefix(v4)
        .unwrap()
        .ipv6_prefix(v6)
        .unwrap()
}

/// `ip` or `network/len` in canonical form.
fn assert_key_shape(key: &str) {
    match key.split_once('/') {
        None => {
            let ip: IpAddr = key.parse().unwrap_or_else(|_| panic!("key {key:?}"));
            assert_eq!(ip.to_string(), key);
        }
        Some((net, len)) => {
            let ip: IpAddr = net.parse().unwrap_or_else(|_| panic!("key {key:?}"));
            let len: u8 = len.parse().unwrap_or_else(|_| panic!("key {key:?}"));
            let max = if ip.is_ipv4() { 32 } else { 128 };
            assert!((1..max).contains(&len), "key {key:?}");
            assert_eq!(ip.to_string(), net);
        }
    }
}

fn request(peer: Option<&str>, headers: &[(HeaderName, HeaderValue)]) -> Request<()> {
    let mut r = Request::new(());
    for (n, v) in headers {
        r.headers_mut().append(n.clone(), v.clone());
    }
    if let Some(p) = peer {
        r.extensions_mut().insert(p.parse::<SocketAddr>().unwrap());
    }
    r
}

fn trusted_by_address(ip: IpAddr, loopback: bool, private: bool) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    };
    let private_net = match ip {
        IpAddr::V4(v4) => v4.is_private(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) == 0xfc00,
    };
    (loopback && ip.is_loopback()) || (private && private_net)
}

/// `ClientIp` over arbitrary proxy headers, peers and configurations:
/// never panics, answers the same twice, keys are canonical addresses or
/// networks, the key is the grouping of `client_ip`, an untrusted peer is
/// always the client, and what a client writes left of the entry our proxy
/// appends never changes the key.
pub fn client_ip(data: &[u8]) {
    let [c, p, peer_byte, rest @ ..] = data else {
        return;
    };
    let (key, names, p) = client_ip_config(*c, *p);
    let peer = PEERS[*peer_byte as usize % PEERS.len()];
    let lines = expand(rest, &HEADER_TOKENS);
    let mut headers = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Ok(v) = HeaderValue::from_bytes(line) else {
            continue;
        };
        if let Some(name) = names.get(i % names.len().max(1)) {
            headers.push((name.clone(), v));
        }
    }
    let req = request(peer, &headers);
    let got = key.extract(&req);
    assert_eq!(got, key.extract(&req), "not deterministic");
    let ip = key.client_ip(&req);
    match (&got, &ip) {
        (Ok(k), Ok(ip)) => {
            assert_key_shape(k);
            let at = request(Some(&SocketAddr::new(*ip, 0).to_string()), &[]);
            assert_eq!(*k, grouping(p).extract(&at).unwrap(), "key of {ip}");
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("extract {got:?} but client_ip {ip:?}"),
    }
    let Some(peer) = peer else {
        assert!(got.is_err(), "a key without a peer");
        return;
    };
    let peer_ip = peer.parse::<SocketAddr>().unwrap().ip();
    let hops = c >> 6;
    if hops == 0 && !trusted_by_address(peer_ip, c & 8 != 0, c & 16 != 0) {
        assert_eq!(got, grouping(p).extract(&req), "untrusted peer {peer}");
    }
    // Anti-spoofing: behind our proxy on loopback, which appends the real
    // client, whatever the client wrote before stays irrelevant.
    let Some(line) = lines.first() else { return };
    let client = "203.0.113.77";
    for (header, appended) in [
        (ProxyHeader::XForwardedFor, format!(", {client}")),
        (ProxyHeader::Forwarded, format!(", for={client}")),
        (
            ProxyHeader::Forwarded,
            format!(",for=\"{client}:5\";proto=http"),
        ),
    ] {
        let key = ClientIp::new()
            .trust_loopback()
            .proxy_header(header.clone());
        let name = header.name().clone();
        // Appended to the client's line, or as a line of its own.
        let mut joined = line.clone();
        joined.extend_from_slice(appended.as_bytes());
        let own_line = appended.trim_start_matches([',', ' ']);
        let cases = [
            vec![joined],
            vec![line.clone(), own_line.as_bytes().to_vec()],
        ];
        for values in cases {
            let Ok(values) = values
                .iter()
                .map(|v| HeaderValue::from_bytes(v))
                .collect::<Result<Vec<_>, _>>()
            else {
                continue;
            };
            let hs: Vec<_> = values.into_iter().map(|v| (name.clone(), v)).collect();
            let req = request(Some("127.0.0.1:1"), &hs);
            assert_eq!(
                key.extract(&req).as_deref(),
                Ok(client),
                "{name} {:?}",
                String::from_utf8_lossy(line)
            );
        }
    }
}

/// The `Header` extractor against an independent oracle: exactly one value,
/// trimmed, 1 to `max_len` bytes of visible ASCII and spaces, else the
/// rejection naming the header (never the value).
pub fn header_key(data: &[u8]) {
    let [m, pre, rest @ ..] = data else {
        return;
    };
    let max_len = [1usize, 2, 8, 256, 1000][*m as usize % 5];
    let prefix = ["", "key:", "{}:"][*pre as usize % 3];
    let key = Header::try_new("x-api-key")
        .unwrap()
        .max_len(max_len)
        .unwrap()
        .prefix(prefix);
    let mut req = Request::new(());
    let mut values = Vec::new();
    if !rest.is_empty() {
        for line in expand(rest, &HEADER_TOKENS) {
            if let Ok(v) = HeaderValue::from_bytes(&line) {
                req.headers_mut().append("x-api-key", v);
                values.push(line);
            }
        }
    }
    let want: Result<String, &str> = match values.as_slice() {
        [] => Err("missing `x-api-key` header"),
        [v] => {
            let v = v.trim_ascii();
            if v.is_empty() {
                Err("empty `x-api-key` header")
            } else if v.len() > max_len {
                Err("longer")
            } else if !v.iter().all(|&b| b.is_ascii_graphic() || b == b' ') {
                Err("`x-api-key` header has bytes that are not visible ASCII")
            } else {
                Ok(format!("{prefix}{}", std::str::from_utf8(v).unwrap()))
            }
        }
        _ => Err("`x-api-key` header sent more than once"),
    };
    let got = key.extract(&req);
    match (&got, want) {
        (Ok(g), Ok(w)) => assert_eq!(*g, w),
        (Err(g), Err("longer")) => assert_eq!(
            g.reason(),
            format!("`x-api-key` header is longer than {max_len} bytes")
        ),
        (Err(g), Err(w)) => assert_eq!(g.reason(), w),
        (g, w) => panic!("got {g:?}, want {w:?}"),
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    })
}

/// The shape every storage key must have: `prefix:name:tag:{…}`, exactly
/// one `{` and one `}`, the `}` last, and bounded length.
fn assert_storage_key_shape(k: &str, head: &str) {
    assert!(k.starts_with(head), "{k:?}");
    assert_eq!(k.matches('{').count(), 1, "{k:?}");
    assert_eq!(k.matches('}').count(), 1, "{k:?}");
    assert!(k.ends_with('}'), "{k:?}");
    assert!(k.len() <= head.len() + 128 + 1, "{} bytes: {k:?}", k.len());
}

/// Building storage keys from arbitrary user keys (`storage_key` is
/// `src/store/key.rs`'s, compiled into the driver): one hash tag, bounded,
/// injective; and through `Limiter::check` on a `MemoryStore`, no panic and
/// distinct keys never share state.
pub fn storage_key(data: &[u8], storage_key: fn(&str, &str, &str, &str) -> String) {
    let [cut, rest @ ..] = data else {
        return;
    };
    let lines = expand(rest, &KEY_TOKENS);
    let all: Vec<u8> = lines.join(&b'\n');
    let cut = (*cut as usize).min(all.len());
    let a = String::from_utf8_lossy(&all[..cut]).into_owned();
    let b = String::from_utf8_lossy(&all[cut..]).into_owned();
    // Percent-encoded, the way the escaping writes bytes: must not collide.
    let c = a.bytes().fold(String::new(), |mut c, x| {
        let _ = write!(c, "%{x:02X}");
        c
    });
    let head = "fz:n:tb:{";
    let keys: Vec<String> = [&a, &b, &c]
        .iter()
        .map(|u| storage_key("fz", "n", "tb", u))
        .collect();
    for k in &keys {
        assert_storage_key_shape(k, head);
    }
    assert_eq!(a == b, keys[0] == keys[1], "{a:?} {b:?}");
    assert_eq!(a == c, keys[0] == keys[2], "{a:?} {c:?}");
    assert_eq!(
        keys[0],
        storage_key("fz", "n", "tb", &a),
        "not deterministic"
    );

    // One store for all runs (a new one per run would dominate the time),
    // emptied first: every state expires by `u64::MAX`.
    static LIMITER: std::sync::OnceLock<(MemoryStore, Limiter<TokenBucket>)> =
        std::sync::OnceLock::new();
    let (store, limiter) = LIMITER.get_or_init(|| {
        let store = MemoryStore::new();
        let limiter = Limiter::builder(store.clone(), TokenBucket::new(3, 1.0))
            .prefix("fz")
            .clock(ManualClock::new(1_791_860_000_000))
            .build()
            .unwrap();
        (store, limiter)
    });
    store.sweep(u64::MAX);
    assert!(store.is_empty());
    runtime().block_on(async {
        assert!(limiter.check(&a, 3).await.unwrap().allowed());
        assert!(limiter.check(&a, 1).await.unwrap().denied());
        let left = limiter.check(&b, 0).await.unwrap().remaining();
        assert_eq!(left, if a == b { 0 } else { 3 }, "{a:?} {b:?}");
        let left = limiter.check(&c, 0).await.unwrap().remaining();
        assert_eq!(left, if a == c { 0 } else { 3 }, "{a:?} {c:?}");
    });
}
