//! The layers under tonic: real TCP, the real generated `GreeterClient`, on
//! the in-memory store and on a real Redis. Both layers answer through one
//! rejection path, and one test checks them side by side. Denials must reach the client as
//! gRPC statuses with decodable `google.rpc` details, both under tonic's own
//! server and with the tonic routes mounted in an axum `Router`; rate-limit
//! fields are read back with the independent parser in `common::sf`.
#![cfg(feature = "grpc")]

mod common;

// Generated code, left as generated: not held to the crate\'s lints.
#[allow(clippy::pedantic)]
mod pb {
    include!("../examples/pb/helloworld.rs");
}

use common::{sf, RedisServer, T0};
use floodgate::algorithm::{Gcra, LeakyBucket, TokenBucket};
use floodgate::clock::ManualClock;
use floodgate::key::{Header, PeerIp};
use floodgate::layer::RateLimitLayer;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::Limiter;
use pb::greeter_client::GreeterClient;
use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tonic::metadata::MetadataMap;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic::{Code, Request, Response, Status};
use tonic_types::StatusExt;

/// Answers `Hello, <name>!`.
struct Hello;

#[tonic::async_trait]
impl Greeter for Hello {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let name = request.into_inner().name;
        Ok(Response::new(HelloReply {
            message: format!("Hello, {name}!"),
        }))
    }
}

/// Serve the greeter with tonic's own server, built by `$server` (a
/// `Server` with its layers), on a free loopback port; evaluates to the
/// address. A macro: the bounds of a generic helper would be longer than it.
macro_rules! serve_tonic {
    ($server:expr) => {{
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = $server
            .add_service(GreeterServer::new(Hello))
            .serve_with_incoming(TcpIncoming::from(listener));
        tokio::spawn(async move { server.await.unwrap() });
        addr
    }};
}

async fn connect(addr: SocketAddr) -> GreeterClient<Channel> {
    GreeterClient::connect(format!("http://{addr}"))
        .await
        .expect("connect to the test server")
}

/// Run `test` on a memory store, then on a fresh Redis, each bounded in
/// time so a hang fails instead of blocking the suite.
async fn on_both_stores<F, Fut>(test: F)
where
    F: Fn(Store, &'static str) -> Fut,
    Fut: Future<Output = ()>,
{
    let bounded = |fut: Fut, label: &'static str| async move {
        tokio::time::timeout(Duration::from_secs(10), fut)
            .await
            .unwrap_or_else(|_| panic!("{label}: the test took over 10 s"));
    };
    bounded(test(MemoryStore::new().into(), "memory"), "memory").await;
    let redis = RedisServer::start();
    let store = RedisStore::from_url(&redis.url()).unwrap().into();
    bounded(test(store, "redis"), "redis").await;
}

/// One `SayHello` call, with `x-api-key` metadata when `key` is given.
async fn hello(
    client: &mut GreeterClient<Channel>,
    key: Option<&str>,
) -> Result<Response<HelloReply>, Status> {
    let mut request = Request::new(HelloRequest { name: "ana".into() });
    if let Some(key) = key {
        request
            .metadata_mut()
            .insert("x-api-key", key.parse().unwrap());
    }
    client.say_hello(request).await
}

/// A call that must succeed; returns its response metadata.
async fn allowed(
    client: &mut GreeterClient<Channel>,
    key: Option<&str>,
    what: &str,
) -> MetadataMap {
    let response = hello(client, key)
        .await
        .unwrap_or_else(|s| panic!("{what}: expected OK, got {s:?}"));
    let metadata = response.metadata().clone();
    assert_eq!(response.into_inner().message, "Hello, ana!", "{what}");
    metadata
}

/// A call that must be denied with `code`; returns the status.
async fn denied(
    client: &mut GreeterClient<Channel>,
    key: Option<&str>,
    code: Code,
    what: &str,
) -> Status {
    match hello(client, key).await {
        Ok(r) => panic!("{what}: expected {code:?}, got OK with {:?}", r.metadata()),
        Err(status) => {
            assert_eq!(status.code(), code, "{what}: {status:?}");
            status
        }
    }
}

/// The items of a list field sent as metadata. Each stacked layer appends
/// its own line; lines of a list field combine with ", " (RFC 9110 §5.3).
fn list(metadata: &MetadataMap, name: &str) -> Vec<sf::Item> {
    let lines: Vec<&str> = metadata
        .get_all(name)
        .iter()
        .map(|v| v.to_str().expect("visible ASCII"))
        .collect();
    assert!(!lines.is_empty(), "no {name} metadata in {metadata:?}");
    let joined = lines.join(", ");
    sf::parse_list(&joined).unwrap_or_else(|e| panic!("{name}: {joined:?}: {e}"))
}

/// The item of `list` naming `policy`.
fn item<'a>(items: &'a [sf::Item], policy: &str) -> &'a sf::Item {
    items
        .iter()
        .find(|i| i.name() == policy)
        .unwrap_or_else(|| panic!("no policy {policy:?} in {items:?}"))
}

/// The `ratelimit` remaining (`r`) and reset (`t`) of `policy`, after
/// checking that `ratelimit-policy` says `q` per `w` seconds.
fn remaining_reset(metadata: &MetadataMap, policy: &str, q: i64, w: i64) -> (i64, i64) {
    let policies = list(metadata, "ratelimit-policy");
    let p = item(&policies, policy);
    assert_eq!(p.keys(), ["q", "w"], "{policy}: {p:?}");
    assert_eq!((p.int("q"), p.int("w")), (q, w), "{policy}: {p:?}");
    let limits = list(metadata, "ratelimit");
    let l = item(&limits, policy);
    assert_eq!(l.keys(), ["r", "t"], "{policy}: {l:?}");
    (l.int("r"), l.int("t"))
}

/// Checks the `google.rpc` details of a `RESOURCE_EXHAUSTED`: exactly one
/// `QuotaFailure` violation, for `policy` with quota `quota`, and returns
/// the `RetryInfo` delay.
fn retry_delay(status: &Status, policy: &str, quota: i64, what: &str) -> Duration {
    let details = status
        .check_error_details()
        .unwrap_or_else(|e| panic!("{what}: undecodable grpc-status-details-bin: {e}"));
    let quota_failure = details
        .quota_failure()
        .unwrap_or_else(|| panic!("{what}: no QuotaFailure in {details:?}"));
    assert_eq!(
        quota_failure.violations.len(),
        1,
        "{what}: {quota_failure:?}"
    );
    let v = &quota_failure.violations[0];
    assert_eq!(v.subject, format!("policy:{policy}"), "{what}");
    assert_eq!(v.quota_id, policy, "{what}");
    assert_eq!(v.quota_value, quota, "{what}");
    // The shortcut accessor agrees with the full decode.
    let retry = status
        .get_details_retry_info()
        .unwrap_or_else(|| panic!("{what}: no RetryInfo in {details:?}"))
        .retry_delay
        .unwrap_or_else(|| panic!("{what}: RetryInfo without a delay"));
    assert_eq!(
        details.retry_info().and_then(|r| r.retry_delay),
        Some(retry),
        "{what}"
    );
    let message = status.message();
    assert!(
        message.starts_with("Rate limit exceeded") && message.contains(&format!("\"{policy}\"")),
        "{what}: grpc-message {message:?}"
    );
    retry
}

#[tokio::test]
async fn tonic_server_answers_resource_exhausted_with_exact_retry_info() {
    on_both_stores(|store, label| async move {
        let clock = ManualClock::new(T0);
        let limiter = Limiter::builder(store, Gcra::new(5, Duration::from_secs(1)))
            .name("per-ip")
            .clock(clock.clone())
            .build()
            .unwrap();
        let addr =
            serve_tonic!(Server::builder().layer(RateLimitLayer::new(limiter, PeerIp::new())));
        let mut client = connect(addr).await;

        // 5 allowed, each with the fields as response metadata: GCRA 5/s
        // at a frozen clock, so the reset is 200 ms per call, rounded up.
        for r in (0..5).rev() {
            let what = format!("{label}: call with {r} left");
            let metadata = allowed(&mut client, None, &what).await;
            assert_eq!(remaining_reset(&metadata, "per-ip", 5, 1), (r, 1), "{what}");
        }

        // The 6th: RESOURCE_EXHAUSTED, to retry after one emission interval.
        let what = format!("{label}: 6th call");
        let status = denied(&mut client, None, Code::ResourceExhausted, &what).await;
        let retry = retry_delay(&status, "per-ip", 5, &what);
        assert_eq!(retry, Duration::from_millis(200), "{what}");
        let metadata = status.metadata();
        assert_eq!(
            metadata.get("grpc-retry-pushback-ms").unwrap(),
            "200",
            "{what}"
        );
        assert_eq!(remaining_reset(metadata, "per-ip", 5, 1), (0, 1), "{what}");

        // The delay is exact: 1 ms early is still too early (and says so),
        // on time is admitted.
        clock.advance(Duration::from_millis(199));
        let what = format!("{label}: 1 ms early");
        let status = denied(&mut client, None, Code::ResourceExhausted, &what).await;
        assert_eq!(
            retry_delay(&status, "per-ip", 5, &what),
            Duration::from_millis(1)
        );
        clock.advance(Duration::from_millis(1));
        allowed(&mut client, None, &format!("{label}: on time")).await;
    })
    .await;
}

#[tokio::test]
async fn axum_router_with_tonic_routes_answers_a_grpc_status_not_429() {
    on_both_stores(|store, label| async move {
        let clock = ManualClock::new(T0);
        let limiter = Limiter::builder(store, TokenBucket::new(3, 1.0))
            .name("per-ip")
            .clock(clock.clone())
            .build()
            .unwrap();
        // The layer on the axum side: tonic's server, which turns a layer's
        // `Err(Status)` into a gRPC response, is not involved.
        let app = tonic::service::Routes::new(GreeterServer::new(Hello))
            .into_axum_router()
            .layer(RateLimitLayer::new(limiter, PeerIp::new()));
        let addr = common::http::serve_at(app).await;
        let mut client = connect(addr).await;

        for (r, t) in [(2, 1), (1, 2), (0, 3)] {
            let what = format!("{label}: call with {r} left");
            let metadata = allowed(&mut client, None, &what).await;
            assert_eq!(remaining_reset(&metadata, "per-ip", 3, 3), (r, t), "{what}");
        }
        // An HTTP 429 would reach a tonic client as UNAVAILABLE (no body)
        // or INTERNAL (a problem+json body read as a gRPC frame).
        let what = format!("{label}: 4th call");
        let status = denied(&mut client, None, Code::ResourceExhausted, &what).await;
        assert_eq!(
            retry_delay(&status, "per-ip", 3, &what),
            Duration::from_secs(1)
        );

        // On the wire: a Trailers-Only response, HTTP 200.
        let (status, headers) = raw_grpc_call(addr).await;
        let what = format!("{label}: raw HTTP/2 call");
        assert_eq!(status, 200, "{what}: {headers:?}");
        assert_eq!(headers["content-type"], "application/grpc", "{what}");
        assert_eq!(headers["grpc-status"], "8", "{what}");
        assert!(headers.contains_key("grpc-status-details-bin"), "{what}");
        assert!(!headers.contains_key("retry-after"), "{what}: {headers:?}");

        clock.advance(Duration::from_secs(1));
        allowed(&mut client, None, &format!("{label}: after the delay")).await;
    })
    .await;
}

/// A `SayHello` with an empty body over a plain HTTP/2 (h2c) connection,
/// to see the HTTP status and headers a gRPC client gets.
async fn raw_grpc_call(addr: SocketAddr) -> (http::StatusCode, http::HeaderMap) {
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<String>();
    let request = http::Request::post(format!("http://{addr}/helloworld.Greeter/SayHello"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(String::new())
        .unwrap();
    let response = client.request(request).await.expect("HTTP/2 call");
    (response.status(), response.headers().clone())
}

#[tokio::test]
async fn api_keys_have_separate_budgets_and_a_missing_key_is_invalid_argument() {
    on_both_stores(|store, label| async move {
        let clock = ManualClock::new(T0);
        let per_ip = Limiter::builder(store.clone(), Gcra::new(100, Duration::from_secs(1)))
            .name("per-ip")
            .clock(clock.clone())
            .build()
            .unwrap();
        let per_key = Limiter::builder(store, TokenBucket::new(2, 1.0))
            .name("per-key")
            .clock(clock.clone())
            .build()
            .unwrap();
        // Two layers stacked with tower's ServiceBuilder: the IP limit
        // outside, the API key limit inside. A call the inner one denies is
        // not charged to the outer one.
        let ip_probe = per_ip.clone();
        let layers = tower::ServiceBuilder::new()
            .layer(RateLimitLayer::new(per_ip, PeerIp::new()))
            .layer(RateLimitLayer::new(
                per_key,
                Header::try_new("x-api-key").unwrap(),
            ))
            .into_inner();
        let addr = serve_tonic!(Server::builder().layer(layers));
        let mut client = connect(addr).await;

        let mut ip_left = 100;
        for key in ["alpha", "beta"] {
            for r in [1, 0] {
                let what = format!("{label}: {key} with {r} left");
                let metadata = allowed(&mut client, Some(key), &what).await;
                // Both layers report: one field line each.
                assert_eq!(metadata.get_all("ratelimit").iter().count(), 2, "{what}");
                ip_left -= 1;
                assert_eq!(remaining_reset(&metadata, "per-key", 2, 2).0, r, "{what}");
                assert_eq!(
                    remaining_reset(&metadata, "per-ip", 100, 1).0,
                    ip_left,
                    "{what}"
                );
            }
            let what = format!("{label}: {key} over its budget");
            let status = denied(&mut client, Some(key), Code::ResourceExhausted, &what).await;
            assert_eq!(
                retry_delay(&status, "per-key", 2, &what),
                Duration::from_secs(1)
            );
            // The outer layer admitted it, then gave its charge back when
            // the inner one denied (after the response, on a task).
            let mut refunded = false;
            for _ in 0..200 {
                if ip_probe.check("127.0.0.1", 0).await.unwrap().remaining() as i64 == ip_left {
                    refunded = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            assert!(refunded, "{what}: the per-IP charge was not refunded");
        }

        // No key, or an empty one: INVALID_ARGUMENT naming the header, never
        // a shared bucket.
        let what = format!("{label}: no key");
        let status = denied(&mut client, None, Code::InvalidArgument, &what).await;
        assert!(
            status.message().contains("missing `x-api-key` header"),
            "{what}: {:?}",
            status.message()
        );
        let what = format!("{label}: empty key");
        let status = denied(&mut client, Some(""), Code::InvalidArgument, &what).await;
        assert!(
            status.message().contains("empty `x-api-key` header"),
            "{what}: {:?}",
            status.message()
        );

        // A third key still has its whole budget; after 1 s alpha has a
        // token again.
        allowed(&mut client, Some("gamma"), &format!("{label}: gamma")).await;
        clock.advance(Duration::from_secs(1));
        allowed(
            &mut client,
            Some("alpha"),
            &format!("{label}: alpha refilled"),
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn leaky_bucket_delays_admitted_calls_under_tonic() {
    on_both_stores(|store, label| async move {
        // A real clock: the delay is real time. 10/s: 100 ms per call ahead
        // in the queue.
        let limiter = Limiter::builder(store, LeakyBucket::new(5, 10.0))
            .name("smooth")
            .build()
            .unwrap();
        let addr =
            serve_tonic!(Server::builder().layer(RateLimitLayer::new(limiter, PeerIp::new())));
        let client = connect(addr).await;

        // Three calls at once on one HTTP/2 connection: all admitted, the
        // second and third served after the calls ahead of them drained.
        // Each is served no earlier than the first decision plus 100 ms per
        // call ahead, so these lower bounds hold however slow the machine.
        let start = Instant::now();
        let calls: Vec<_> = (0..3)
            .map(|_| {
                let mut client = client.clone();
                tokio::spawn(async move {
                    let result = hello(&mut client, None).await;
                    (result.map(|r| r.into_inner().message), start.elapsed())
                })
            })
            .collect();
        let mut elapsed = Vec::new();
        for call in calls {
            let (result, took) = call.await.unwrap();
            let message = result.unwrap_or_else(|s| panic!("{label}: a queued call failed: {s:?}"));
            assert_eq!(message, "Hello, ana!", "{label}");
            elapsed.push(took);
        }
        elapsed.sort();
        assert!(
            elapsed[1] >= Duration::from_millis(90),
            "{label}: {elapsed:?}"
        );
        assert!(
            elapsed[2] >= Duration::from_millis(190),
            "{label}: {elapsed:?}"
        );
        assert!(elapsed[2] < Duration::from_secs(3), "{label}: {elapsed:?}");
    })
    .await;
}

/// Answers at once, except `hold`, which waits for a permit of its gate.
struct Gated(std::sync::Arc<tokio::sync::Semaphore>);

#[tonic::async_trait]
impl Greeter for Gated {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let name = request.into_inner().name;
        if name == "hold" {
            self.0.acquire().await.unwrap().forget();
        }
        Ok(Response::new(HelloReply {
            message: format!("Hello, {name}!"),
        }))
    }
}

/// A `SayHello` for `name`.
async fn hello_to(client: &mut GreeterClient<Channel>, name: &str) -> Result<String, Status> {
    let request = Request::new(HelloRequest { name: name.into() });
    Ok(client.say_hello(request).await?.into_inner().message)
}

/// Both layers answer a gRPC client the same way, through their one
/// rejection path, with the tonic routes inside an axum `Router`: a limit
/// reached is `RESOURCE_EXHAUSTED` naming the limit in `QuotaFailure`, with
/// `RetryInfo`; a store that is down under a fail-closed limiter is
/// `UNAVAILABLE` with `RetryInfo`, never an HTTP status.
#[tokio::test]
async fn both_layers_answer_resource_exhausted_and_unavailable() {
    use floodgate::concurrency::ConcurrencyLimiter;
    use floodgate::failure::FailurePolicy;
    use floodgate::layer::ConcurrencyLimitLayer;
    use std::sync::Arc;
    use tokio::sync::Semaphore;

    on_both_stores(|store, label| async move {
        // A Redis that is not there, for the fail-closed limiters.
        let gone = || RedisStore::from_url("redis://127.0.0.1:1").unwrap();
        let routes = |gate: &Arc<Semaphore>| {
            tonic::service::Routes::new(GreeterServer::new(Gated(gate.clone()))).into_axum_router()
        };

        // The rate limit: one call per second at a frozen clock.
        let gate = Arc::new(Semaphore::new(0));
        let clock = ManualClock::new(T0);
        let limiter = Limiter::builder(store.clone(), Gcra::new(1, Duration::from_secs(1)))
            .name("per-ip")
            .clock(clock)
            .build()
            .unwrap();
        let app = routes(&gate).layer(RateLimitLayer::new(limiter, PeerIp::new()));
        let mut client = connect(common::http::serve_at(app).await).await;
        hello_to(&mut client, "ana").await.unwrap();
        let what = format!("{label}: rate limit reached");
        let status = hello_to(&mut client, "ana").await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{what}: {status:?}");
        assert_eq!(
            retry_delay(&status, "per-ip", 1, &what),
            Duration::from_secs(1)
        );

        // The concurrency limit: one call in flight, held at the gate.
        let leases = ConcurrencyLimiter::builder(store, 1)
            .name("in-flight")
            .build()
            .unwrap();
        let app = routes(&gate).layer(ConcurrencyLimitLayer::new(leases.clone(), PeerIp::new()));
        let client = connect(common::http::serve_at(app).await).await;
        let held = tokio::spawn({
            let mut client = client.clone();
            async move { hello_to(&mut client, "hold").await }
        });
        while leases.in_flight("127.0.0.1").await.unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let what = format!("{label}: concurrency limit reached");
        let status = hello_to(&mut client.clone(), "ana").await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{what}: {status:?}");
        assert_eq!(
            retry_delay(&status, "in-flight", 1, &what),
            Duration::from_secs(1)
        );
        gate.add_permits(1);
        assert_eq!(held.await.unwrap().unwrap(), "Hello, hold!", "{label}");

        // Both, failing closed with their store down.
        let limiter = Limiter::builder(gone(), Gcra::new(1, Duration::from_secs(1)))
            .on_store_failure(FailurePolicy::FailClosed)
            .build()
            .unwrap();
        let leases = ConcurrencyLimiter::builder(gone(), 1)
            .on_store_failure(FailurePolicy::FailClosed)
            .build()
            .unwrap();
        let rate = routes(&gate).layer(RateLimitLayer::new(limiter, PeerIp::new()));
        let lease = routes(&gate).layer(ConcurrencyLimitLayer::new(leases, PeerIp::new()));
        for (which, app) in [("rate", rate), ("concurrency", lease)] {
            let what = format!("{label}: {which} limiter failing closed");
            let mut client = connect(common::http::serve_at(app).await).await;
            let status = hello_to(&mut client, "ana").await.unwrap_err();
            assert_eq!(status.code(), Code::Unavailable, "{what}: {status:?}");
            let retry = status.get_details_retry_info().and_then(|r| r.retry_delay);
            assert!(retry.is_some_and(|d| !d.is_zero()), "{what}: {status:?}");
        }
    })
    .await;
}

/// Exemptions under tonic: a key on the allow list (by key, or in an IPv4
/// or IPv6 network) is served with no rate-limit fields and no Redis call;
/// one on the deny list gets `PERMISSION_DENIED`; the lists change while
/// the server runs.
#[tokio::test]
async fn exempt_keys_are_served_and_blocked_keys_get_permission_denied() {
    let redis = RedisServer::start();
    let stores: [(Store, Option<&RedisServer>); 2] = [
        (MemoryStore::new().into(), None),
        (
            RedisStore::from_url(&redis.url()).unwrap().into(),
            Some(&redis),
        ),
    ];
    for (store, redis) in stores {
        let exemptions = floodgate::Exemptions::new();
        exemptions.allow_network("10.0.0.0/8".parse().unwrap());
        exemptions.allow_network("2001:db8:a::/48".parse().unwrap());
        exemptions.allow_key("monitor");
        exemptions.deny_key("mallory");
        exemptions.deny_network("192.0.2.0/24".parse().unwrap());
        exemptions.deny_network("2001:db8:bad::/48".parse().unwrap());
        let limiter = Limiter::builder(store, Gcra::new(1, Duration::from_secs(60)))
            .name("grpc-exempt")
            .clock(ManualClock::new(T0))
            .exemptions(exemptions.clone())
            .build()
            .unwrap();
        let layer = RateLimitLayer::new(limiter, Header::try_new("x-api-key").unwrap());
        let addr = serve_tonic!(Server::builder().layer(layer));
        let mut client = connect(addr).await;
        let calls = || redis.map(|r| r.command_calls("fcall").unwrap_or(0));
        let before = calls();
        for key in ["10.9.8.7", "2001:db8:a::1", "monitor"] {
            for _ in 0..3 {
                let metadata = allowed(&mut client, Some(key), key).await;
                assert!(metadata.get("ratelimit").is_none(), "{key}");
                assert!(metadata.get("ratelimit-policy").is_none(), "{key}");
            }
        }
        for key in ["mallory", "192.0.2.1", "2001:db8:bad::7"] {
            let status = denied(&mut client, Some(key), Code::PermissionDenied, key).await;
            assert!(status.get_details_retry_info().is_none(), "{key}");
        }
        assert_eq!(calls(), before, "exempt and blocked calls asked Redis");
        // A key on no list: limited, through the store.
        allowed(&mut client, Some("198.51.100.1"), "first").await;
        denied(
            &mut client,
            Some("198.51.100.1"),
            Code::ResourceExhausted,
            "second",
        )
        .await;
        // Changed at run time.
        exemptions.remove_allowed_network("2001:db8:a::/48".parse().unwrap());
        allowed(&mut client, Some("2001:db8:a::1"), "now limited").await;
        denied(
            &mut client,
            Some("2001:db8:a::1"),
            Code::ResourceExhausted,
            "over",
        )
        .await;
        exemptions.remove_denied_network("192.0.2.0/24".parse().unwrap());
        allowed(&mut client, Some("192.0.2.1"), "no longer blocked").await;
        exemptions.deny_key("monitor");
        denied(
            &mut client,
            Some("monitor"),
            Code::PermissionDenied,
            "denied wins",
        )
        .await;
    }
}
