//! Key extractors on requests as servers build them.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use floodgate::key::{
    from_fn, BrokenChain, ClientIp, ExtensionKey, Global, Header, KeyExtractor, KeyRejection,
    PeerIp, ProxyHeader, RequestView,
};
use http::{HeaderName, HeaderValue, Request};

/// A request from `peer` with `headers`, in order (repeats allowed).
fn req(peer: &str, headers: &[(&str, &str)]) -> Request<()> {
    let mut r = Request::new(());
    for (name, value) in headers {
        r.headers_mut().append(
            HeaderName::try_from(*name).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    r.extensions_mut()
        .insert(peer.parse::<SocketAddr>().unwrap());
    r
}

fn xff(peer: &str, values: &[&str]) -> Request<()> {
    let headers: Vec<_> = values.iter().map(|v| ("x-forwarded-for", *v)).collect();
    req(peer, &headers)
}

fn behind_lb() -> ClientIp {
    ClientIp::new().trust("10.0.0.0/8".parse().unwrap())
}

// --- ClientIp: X-Forwarded-For ---

#[test]
fn spoofed_left_most_xff_is_ignored() {
    // The client sent "6.6.6.6"; the load balancer appended the real address.
    let r = xff("10.0.0.1:443", &["6.6.6.6, 203.0.113.5"]);
    assert_eq!(behind_lb().extract(&r).unwrap(), "203.0.113.5");
    // However many entries the client invents.
    let r = xff("10.0.0.1:443", &["1.1.1.1, 2.2.2.2, 3.3.3.3, 203.0.113.5"]);
    assert_eq!(behind_lb().extract(&r).unwrap(), "203.0.113.5");
    // Even entries claiming to be trusted proxies.
    let r = xff("10.0.0.1:443", &["10.0.0.9, 203.0.113.5"]);
    assert_eq!(behind_lb().extract(&r).unwrap(), "203.0.113.5");
}

#[test]
fn untrusted_peer_ignores_headers() {
    let r = req(
        "198.51.100.7:5000",
        &[
            ("x-forwarded-for", "1.2.3.4"),
            ("x-real-ip", "1.2.3.4"),
            ("forwarded", "for=1.2.3.4"),
        ],
    );
    for header in [
        ProxyHeader::XForwardedFor,
        ProxyHeader::XRealIp,
        ProxyHeader::Forwarded,
    ] {
        let key = behind_lb().proxy_header(header).extract(&r).unwrap();
        assert_eq!(key, "198.51.100.7");
    }
    // Nothing trusted at all: ClientIp is PeerIp.
    assert_eq!(ClientIp::new().extract(&r).unwrap(), "198.51.100.7");
}

#[test]
fn chain_of_trusted_networks() {
    let c = ClientIp::new()
        .trust("10.0.0.0/8".parse().unwrap())
        .trust("2001:db8:ffff::/48".parse().unwrap());
    let r = xff(
        "10.0.0.1:443",
        &["6.6.6.6, 203.0.113.5, 2001:db8:ffff::2, 10.9.9.9"],
    );
    assert_eq!(c.extract(&r).unwrap(), "203.0.113.5");
    // Every hop trusted: the furthest one.
    let r = xff("10.0.0.1:443", &["10.1.1.1, 10.2.2.2"]);
    assert_eq!(c.extract(&r).unwrap(), "10.1.1.1");
    // A trusted peer without the header is the client (e.g. a health check).
    let r = xff("10.0.0.1:443", &[]);
    assert_eq!(c.extract(&r).unwrap(), "10.0.0.1");
}

#[test]
fn chain_of_counted_hops() {
    let r = xff("192.0.2.200:443", &["6.6.6.6, 203.0.113.5, 192.0.2.100"]);
    let hops = |n| ClientIp::new().trusted_hops(n).unwrap();
    assert_eq!(hops(0).extract(&r).unwrap(), "192.0.2.200");
    assert_eq!(hops(1).extract(&r).unwrap(), "192.0.2.100");
    assert_eq!(hops(2).extract(&r).unwrap(), "203.0.113.5");
    // Fewer entries than hops: the furthest entry.
    assert_eq!(hops(5).extract(&r).unwrap(), "6.6.6.6");
    // Counted hops and networks together: the first untrusted by both.
    let c = hops(1).trust("192.0.2.0/24".parse().unwrap());
    let r = xff(
        "198.51.100.1:443",
        &["203.0.113.5, 192.0.2.1, 192.0.2.2, 198.51.100.2"],
    );
    assert_eq!(c.extract(&r).unwrap(), "198.51.100.2");
    let c = hops(2).trust("192.0.2.0/24".parse().unwrap());
    assert_eq!(c.extract(&r).unwrap(), "203.0.113.5");
}

#[test]
fn several_xff_headers_are_one_list() {
    let one = xff("10.0.0.1:1", &["6.6.6.6, 203.0.113.5, 10.0.0.2"]);
    let three = xff("10.0.0.1:1", &["6.6.6.6", "203.0.113.5", "10.0.0.2"]);
    let odd = xff("10.0.0.1:1", &["6.6.6.6, 203.0.113.5,", " , 10.0.0.2"]);
    for r in [&one, &three, &odd] {
        assert_eq!(behind_lb().extract(r).unwrap(), "203.0.113.5");
    }
    // The last line holds the right-most entries.
    let r = xff("10.0.0.1:1", &["203.0.113.5", "6.6.6.6"]);
    assert_eq!(behind_lb().extract(&r).unwrap(), "6.6.6.6");
}

#[test]
fn xff_entries_with_ports_brackets_and_whitespace() {
    let c = behind_lb().ipv6_prefix(128).unwrap();
    for (entry, want) in [
        ("  203.0.113.5  ", "203.0.113.5"),
        ("203.0.113.5:8080", "203.0.113.5"),
        ("\t2001:db8::5", "2001:db8::5"),
        ("[2001:db8::5]", "2001:db8::5"),
        ("[2001:db8::5]:443", "2001:db8::5"),
        ("::ffff:203.0.113.5", "203.0.113.5"),
    ] {
        let r = xff("10.0.0.1:1", &[&format!("6.6.6.6,{entry},10.0.0.2")]);
        assert_eq!(c.extract(&r).unwrap(), want, "{entry:?}");
    }
}

// --- ClientIp: broken chains ---

#[test]
fn garbage_right_of_the_client_uses_the_last_trusted_proxy() {
    for garbage in [
        "unknown",
        "_hidden",
        "not-an-ip",
        "203.0.113.5:99999",
        "[2001:db8::1",
        "300.1.1.1",
        "1.2.3.4.5",
        "fe80::1%eth0",
    ] {
        let r = xff(
            "10.0.0.1:443",
            &[&format!("6.6.6.6, {garbage}, 10.0.0.2, 10.0.0.3")],
        );
        assert_eq!(behind_lb().extract(&r).unwrap(), "10.0.0.2", "{garbage}");
        let err = behind_lb()
            .on_broken_chain(BrokenChain::Reject)
            .extract(&r)
            .unwrap_err();
        assert!(err.reason().contains("x-forwarded-for"), "{err}");
    }
    // Right at the peer: the peer.
    let r = xff("10.0.0.1:443", &["6.6.6.6, garbage"]);
    assert_eq!(behind_lb().extract(&r).unwrap(), "10.0.0.1");
}

#[test]
fn garbage_left_of_the_client_is_never_read() {
    let r = xff("10.0.0.1:443", &["garbage, unknown, 203.0.113.5"]);
    let c = behind_lb().on_broken_chain(BrokenChain::Reject);
    assert_eq!(c.extract(&r).unwrap(), "203.0.113.5");
}

#[test]
fn non_utf8_header_bytes_are_garbage() {
    let mut r = xff("10.0.0.1:443", &[]);
    r.headers_mut().append(
        "x-forwarded-for",
        HeaderValue::from_bytes(b"\xff\xfe, 203.0.113.5").unwrap(),
    );
    assert_eq!(behind_lb().extract(&r).unwrap(), "203.0.113.5");
    let mut r = xff("10.0.0.1:443", &[]);
    r.headers_mut().append(
        "x-forwarded-for",
        HeaderValue::from_bytes(b"203.0.113.5, \xc3\xa9").unwrap(),
    );
    assert_eq!(behind_lb().extract(&r).unwrap(), "10.0.0.1");
}

#[test]
fn huge_chains_cost_bounded_work() {
    // A megabyte of trusted hops: examined only 64 deep.
    let mut list = "203.0.113.5".to_string();
    for i in 0..70_000 {
        let _ = write!(list, ", 10.{}.{}.1", i / 256 % 256, i % 256);
    }
    let r = xff("10.0.0.1:443", &[&list]);
    let start = Instant::now();
    let key = behind_lb().extract(&r).unwrap();
    assert!(
        key.starts_with("10."),
        "the last trusted hop examined: {key}"
    );
    let err = behind_lb()
        .on_broken_chain(BrokenChain::Reject)
        .extract(&r)
        .unwrap_err();
    assert!(err.reason().contains("more than 64"), "{err}");
    // One huge entry is rejected by its length, not parsed.
    let r = xff("10.0.0.1:443", &[&"9".repeat(1 << 20)]);
    assert_eq!(behind_lb().extract(&r).unwrap(), "10.0.0.1");
    assert!(start.elapsed().as_secs() < 2, "{:?}", start.elapsed());

    // Forwarded is read from the left, but keeps only the right end.
    let list = list.replace(", ", ", for=");
    let r = req("10.0.0.1:443", &[("forwarded", &format!("for={list}"))]);
    let c = behind_lb().proxy_header(ProxyHeader::Forwarded);
    assert!(c.extract(&r).unwrap().starts_with("10."));
    let c = c.on_broken_chain(BrokenChain::Reject);
    assert!(c.extract(&r).is_err());
}

#[test]
fn sixty_four_hops_are_fine() {
    let mut list = "203.0.113.5".to_string();
    for i in 0..63 {
        let _ = write!(list, ", 10.0.0.{i}");
    }
    let r = xff("10.0.0.1:443", &[&list]);
    let c = behind_lb().on_broken_chain(BrokenChain::Reject);
    assert_eq!(c.extract(&r).unwrap(), "203.0.113.5");
}

// --- ClientIp: Forwarded ---

fn forwarded(values: &[&str]) -> Request<()> {
    let headers: Vec<_> = values.iter().map(|v| ("forwarded", *v)).collect();
    req("10.0.0.1:443", &headers)
}

fn fwd() -> ClientIp {
    behind_lb()
        .ipv6_prefix(128)
        .unwrap()
        .proxy_header(ProxyHeader::Forwarded)
}

#[test]
fn forwarded_quoted_ipv6_and_ports() {
    for (element, want) in [
        (r#"for="[2001:db8:cafe::17]:4711""#, "2001:db8:cafe::17"),
        (r#"for="[2001:db8:cafe::17]""#, "2001:db8:cafe::17"),
        (r#"for="192.0.2.43:47011""#, "192.0.2.43"),
        ("for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60"),
        ("proto=https;For=192.0.2.60", "192.0.2.60"),
        ("FOR=192.0.2.60", "192.0.2.60"),
        (r#"for="\1\92.0.2.60""#, "192.0.2.60"),
        (r#"for="[::ffff:192.0.2.60]:1""#, "192.0.2.60"),
    ] {
        let r = forwarded(&[&format!("for=6.6.6.6, {element}, for=10.0.0.2")]);
        assert_eq!(fwd().extract(&r).unwrap(), want, "{element}");
    }
}

#[test]
fn several_forwarded_headers_are_one_list() {
    let r = forwarded(&[
        "for=6.6.6.6",
        r#"for="[2001:db8::1]:1", for=10.0.0.3"#,
        "for=10.0.0.2;proto=https",
    ]);
    assert_eq!(fwd().extract(&r).unwrap(), "2001:db8::1");
}

#[test]
fn forwarded_unknown_and_obfuscated_break_the_chain() {
    for element in ["for=unknown", r#"for="_gazonk""#, "for=_x:_y", "proto=http"] {
        let r = forwarded(&[&format!("for=6.6.6.6, {element}, for=10.0.0.2")]);
        assert_eq!(fwd().extract(&r).unwrap(), "10.0.0.2", "{element}");
        let c = fwd().on_broken_chain(BrokenChain::Reject);
        let err = c.extract(&r).unwrap_err();
        assert!(err.reason().contains("forwarded"), "{err}");
    }
}

#[test]
fn malformed_forwarded_never_hides_the_proxies_elements() {
    // Whatever the client wrote, the elements appended after it are read.
    for client_part in [
        r#"for="6.6.6.6"#,
        r#"for="6.6.6.6\"#,
        "for",
        "for=",
        "=6.6.6.6",
        "for=[2001:db8::1",
        "for=6.6.6.6;for=7.7.7.7",
        "for=6.6.6.6:99999",
        r#"x="a;b"#,
        "for=\"é\"",
        ";;;",
        r#"""#,
    ] {
        let r = forwarded(&[&format!(
            r#"{client_part}, for="203.0.113.5:1", for=10.0.0.2"#
        )]);
        let key = fwd().extract(&r).unwrap();
        assert_eq!(key, "203.0.113.5", "{client_part}");
    }
}

#[test]
fn malformed_forwarded_right_of_the_client() {
    for bad in [r#"for="203.0.113.5"#, "for=203.0.113.5 x", "for=999.0.0.1"] {
        let r = forwarded(&[&format!("for=6.6.6.6, {bad}")]);
        assert_eq!(fwd().extract(&r).unwrap(), "10.0.0.1", "{bad}");
        let c = fwd().on_broken_chain(BrokenChain::Reject);
        assert!(c.extract(&r).is_err(), "{bad}");
    }
}

// --- ClientIp: single-address headers ---

#[test]
fn x_real_ip_only_from_a_trusted_peer() {
    let c = behind_lb().proxy_header(ProxyHeader::XRealIp);
    let r = req("10.0.0.1:443", &[("x-real-ip", " 203.0.113.5 ")]);
    assert_eq!(c.extract(&r).unwrap(), "203.0.113.5");
    let r = req("198.51.100.1:443", &[("x-real-ip", "203.0.113.5")]);
    assert_eq!(c.extract(&r).unwrap(), "198.51.100.1");
    // Two values or a list are ambiguous: the trusted peer.
    let r = req(
        "10.0.0.1:443",
        &[("x-real-ip", "203.0.113.5"), ("x-real-ip", "6.6.6.6")],
    );
    assert_eq!(c.extract(&r).unwrap(), "10.0.0.1");
    let r = req("10.0.0.1:443", &[("x-real-ip", "6.6.6.6, 203.0.113.5")]);
    assert_eq!(c.extract(&r).unwrap(), "10.0.0.1");
    let c = c.on_broken_chain(BrokenChain::Reject);
    assert!(c.extract(&r).is_err());
}

#[test]
fn custom_headers() {
    let cf = behind_lb().proxy_header(ProxyHeader::Single(HeaderName::from_static(
        "cf-connecting-ip",
    )));
    let r = req("10.0.0.1:443", &[("cf-connecting-ip", "2001:db8:1:2::9")]);
    assert_eq!(cf.extract(&r).unwrap(), "2001:db8:1:2::/64");
    let list = behind_lb().proxy_header(ProxyHeader::List(HeaderName::from_static(
        "x-original-forwarded-for",
    )));
    let r = req(
        "10.0.0.1:443",
        &[("x-original-forwarded-for", "6.6.6.6, 203.0.113.5")],
    );
    assert_eq!(list.extract(&r).unwrap(), "203.0.113.5");
}

#[test]
fn client_ip_is_ungrouped() {
    let r = xff("10.0.0.1:1", &["2001:db8:1:2::77"]);
    let c = behind_lb();
    assert_eq!(c.extract(&r).unwrap(), "2001:db8:1:2::/64");
    let ip: IpAddr = "2001:db8:1:2::77".parse().unwrap();
    assert_eq!(c.client_ip(&r).unwrap(), ip);
}

#[test]
fn helpers_trust_loopback_and_private() {
    let r = xff(
        "[::1]:1",
        &["203.0.113.5, 192.168.1.1, 172.16.0.1, [fd00::1]"],
    );
    assert_eq!(
        ClientIp::new().trust_loopback().extract(&r).unwrap(),
        "fd00::/64"
    );
    let c = ClientIp::new().trust_loopback().trust_private();
    assert_eq!(c.extract(&r).unwrap(), "203.0.113.5");
    // 172.32/16 is not private.
    let r = xff("127.0.0.1:1", &["203.0.113.5, 172.32.0.1"]);
    assert_eq!(c.extract(&r).unwrap(), "172.32.0.1");
}

#[test]
fn client_ip_needs_a_peer() {
    let r = Request::builder()
        .header("x-forwarded-for", "203.0.113.5")
        .body(())
        .unwrap();
    let err = behind_lb().extract(&r).unwrap_err();
    assert!(err.reason().starts_with("no peer address"), "{err}");
}

// --- Grouping ---

#[test]
fn ipv6_addresses_in_one_64_share_a_key() {
    let keys: Vec<_> = [
        "[2001:db8:aa:bb::1]:1",
        "[2001:db8:aa:bb:ffff:ffff:ffff:ffff]:2",
        "[2001:0db8:00aa:00bb:1:2:3:4]:3",
    ]
    .iter()
    .map(|peer| PeerIp::new().extract(&req(peer, &[])).unwrap().into_owned())
    .collect();
    assert_eq!(keys, ["2001:db8:aa:bb::/64"; 3]);
    let other = PeerIp::new()
        .extract(&req("[2001:db8:aa:bc::1]:1", &[]))
        .unwrap()
        .into_owned();
    assert_eq!(other, "2001:db8:aa:bc::/64");
}

#[test]
fn prefixes_are_configurable() {
    let p = PeerIp::new()
        .ipv4_prefix(24)
        .unwrap()
        .ipv6_prefix(48)
        .unwrap();
    assert_eq!(
        p.extract(&req("192.0.2.77:1", &[])).unwrap(),
        "192.0.2.0/24"
    );
    assert_eq!(
        p.extract(&req("[2001:db8:aa:bb::1]:1", &[])).unwrap(),
        "2001:db8:aa::/48"
    );
    let full = PeerIp::new().ipv6_prefix(128).unwrap();
    assert_eq!(
        full.extract(&req("[2001:db8::1]:1", &[])).unwrap(),
        "2001:db8::1"
    );
}

#[test]
fn invalid_prefixes_name_the_field() {
    for (err, field) in [
        (PeerIp::new().ipv4_prefix(0).unwrap_err(), "ipv4_prefix"),
        (PeerIp::new().ipv4_prefix(33).unwrap_err(), "ipv4_prefix"),
        (PeerIp::new().ipv6_prefix(0).unwrap_err(), "ipv6_prefix"),
        (ClientIp::new().ipv6_prefix(129).unwrap_err(), "ipv6_prefix"),
        (
            ClientIp::new().trusted_hops(65).unwrap_err(),
            "trusted_hops",
        ),
    ] {
        assert_eq!(err.field(), field);
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn ipv4_mapped_is_ipv4() {
    let r = req("[::ffff:192.0.2.1]:1", &[]);
    assert_eq!(PeerIp::new().extract(&r).unwrap(), "192.0.2.1");
    // A mapped peer matches an IPv4 trusted network.
    let r = req("[::ffff:10.0.0.1]:1", &[("x-forwarded-for", "203.0.113.5")]);
    assert_eq!(behind_lb().extract(&r).unwrap(), "203.0.113.5");
    let r = req("10.0.0.1:1", &[("x-forwarded-for", "::ffff:203.0.113.5")]);
    assert_eq!(behind_lb().extract(&r).unwrap(), "203.0.113.5");
}

// --- PeerIp sources ---

#[test]
fn peer_ip_needs_connect_info() {
    let err = PeerIp::new().extract(&Request::new(())).unwrap_err();
    assert!(
        err.reason()
            .contains("into_make_service_with_connect_info::<SocketAddr>()"),
        "{err}"
    );
}

#[cfg(feature = "axum")]
#[test]
fn peer_ip_from_axum_connect_info() {
    let mut r = Request::new(());
    r.extensions_mut().insert(axum::extract::ConnectInfo(
        "192.0.2.9:1".parse::<SocketAddr>().unwrap(),
    ));
    assert_eq!(PeerIp::new().extract(&r).unwrap(), "192.0.2.9");
}

#[cfg(feature = "grpc")]
#[test]
fn peer_ip_from_tonic_connect_info() {
    let mut r = Request::new(());
    r.extensions_mut()
        .insert(tonic::transport::server::TcpConnectInfo {
            local_addr: None,
            remote_addr: Some("[2001:db8::9]:1".parse().unwrap()),
        });
    assert_eq!(PeerIp::new().extract(&r).unwrap(), "2001:db8::/64");
}

#[cfg(feature = "axum")]
#[tokio::test]
async fn axum_server_with_connect_info() {
    use axum::{extract::Request as AxumRequest, routing::get, Router};

    async fn key(req: AxumRequest) -> String {
        PeerIp::new()
            .extract(&req)
            .map_or_else(|e| e.to_string(), std::borrow::Cow::into_owned)
    }

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/", get(key));
    let server = tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    let body = reqwest::get(format!("http://{addr}/"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, "127.0.0.1");
    server.abort();
}

#[cfg(feature = "grpc")]
#[tokio::test]
async fn tonic_server_inserts_tcp_connect_info() {
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use std::convert::Infallible;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let svc = tower::service_fn(|req: Request<tonic::body::Body>| async move {
        let key = PeerIp::new()
            .extract(&req)
            .map_or_else(|e| e.to_string(), std::borrow::Cow::into_owned);
        Ok::<_, Infallible>(http::Response::new(key))
    });
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .serve_with_incoming(svc, tonic::transport::server::TcpIncoming::from(listener)),
    );
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<String>();
    let res = client
        .request(
            Request::post(format!("http://{addr}/test.Echo/Key"))
                .body(String::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let body = body_text(res.into_body()).await;
    assert_eq!(body, "127.0.0.1");
    server.abort();
}

/// The whole body as text (no http-body-util here).
#[cfg(feature = "grpc")]
async fn body_text<B>(mut body: B) -> String
where
    B: http_body::Body + Unpin,
    B::Error: std::fmt::Debug,
{
    use bytes::Buf;
    let mut out = Vec::new();
    while let Some(frame) =
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await
    {
        if let Ok(mut data) = frame.unwrap().into_data() {
            while data.has_remaining() {
                let chunk = data.chunk();
                out.extend_from_slice(chunk);
                let n = chunk.len();
                data.advance(n);
            }
        }
    }
    String::from_utf8(out).unwrap()
}

// --- Header, Extension, Global, from_fn, tuples ---

#[test]
fn header_key() {
    let h = Header::try_new("x-api-key").unwrap().prefix("key:");
    let r = req("192.0.2.1:1", &[("x-api-key", "s3cr3t")]);
    assert_eq!(h.extract(&r).unwrap(), "key:s3cr3t");
    let r = req("192.0.2.1:1", &[]);
    assert_eq!(
        h.extract(&r).unwrap_err().reason(),
        "missing `x-api-key` header"
    );
}

#[test]
fn header_garbage_is_rejected() {
    let h = Header::try_new("x-api-key").unwrap();
    let long = "k".repeat(257);
    for value in [
        &b"\xff\xfe"[..],
        b"caf\xc3\xa9",
        b"a\tb",
        b"",
        long.as_bytes(),
    ] {
        let mut r = Request::new(());
        r.headers_mut()
            .insert("x-api-key", HeaderValue::from_bytes(value).unwrap());
        let err = h.extract(&r).unwrap_err();
        assert!(err.reason().contains("x-api-key"), "{err}");
        // The value is never echoed.
        if !value.is_empty() {
            assert!(!err.reason().contains(&*String::from_utf8_lossy(value)));
        }
    }
    let r = req("192.0.2.1:1", &[("x-api-key", &"k".repeat(256))]);
    assert!(h.extract(&r).is_ok());
    let h = h.max_len(8).unwrap();
    assert!(h.extract(&r).is_err());
}

#[derive(Clone)]
struct UserId(u64);

impl std::fmt::Display for UserId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "user:{}", self.0)
    }
}

#[test]
fn extension_key() {
    let mut r = req("192.0.2.1:1", &[]);
    let e = ExtensionKey::<UserId>::new();
    let err = e.extract(&r).unwrap_err();
    assert!(err.reason().contains("UserId"), "{err}");
    r.extensions_mut().insert(UserId(42));
    assert_eq!(e.extract(&r).unwrap(), "user:42");
    let mapped = ExtensionKey::with(|u: &UserId| format!("tier:{}", u.0 % 2));
    assert_eq!(mapped.extract(&r).unwrap(), "tier:0");
}

#[test]
fn global_key() {
    let r = req("192.0.2.1:1", &[]);
    assert_eq!(Global::new().extract(&r).unwrap(), "global");
    assert_eq!(Global::named("api").extract(&r).unwrap(), "api");
}

#[test]
fn closure_key() {
    let by_path = from_fn(|req: RequestView<'_>| {
        let path = req.uri().path();
        if path.starts_with("/admin") {
            Err(KeyRejection::new("admin is not limited here"))
        } else {
            Ok(format!("{} {}", req.method(), path))
        }
    });
    let mut r = req("192.0.2.1:1", &[]);
    *r.uri_mut() = "/search?q=x".parse().unwrap();
    assert_eq!(by_path.extract(&r).unwrap(), "GET /search");
    *r.uri_mut() = "/admin".parse().unwrap();
    assert_eq!(
        by_path.extract(&r).unwrap_err().reason(),
        "admin is not limited here"
    );
    // Closures can reach the peer too.
    let peer = from_fn(|req: RequestView<'_>| {
        floodgate::key::peer_addr(req.extensions())
            .map(|a| a.port().to_string())
            .ok_or_else(|| KeyRejection::new("no peer"))
    });
    assert_eq!(peer.extract(&r).unwrap(), "1");
}

#[test]
fn tuples_combine_keys() {
    let mut r = req("192.0.2.1:1", &[("x-api-key", "k|1")]);
    r.extensions_mut().insert(UserId(7));
    let both = (ExtensionKey::<UserId>::new(), PeerIp::new());
    assert_eq!(both.extract(&r).unwrap(), "user:7|192.0.2.1");
    let three = (
        Global::named("api"),
        Header::try_new("x-api-key").unwrap(),
        PeerIp::new(),
    );
    assert_eq!(three.extract(&r).unwrap(), r"api|k\|1|192.0.2.1");
    // Either part missing: rejected.
    let r = req("192.0.2.1:1", &[]);
    assert!(both.extract(&r).is_err());
}

#[test]
fn extractors_are_clone_send_sync() {
    fn check<K: KeyExtractor + std::fmt::Debug>(_: &K) {}
    check(&PeerIp::new());
    check(&ClientIp::new());
    check(&Header::try_new("x").unwrap());
    check(&ExtensionKey::<UserId>::new());
    check(&Global::new());
    check(&from_fn(|_: RequestView<'_>| Ok(String::new())));
    check(&(Global::new(), PeerIp::new()));
}
