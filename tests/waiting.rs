//! `RateLimitLayer::wait_up_to` over real HTTP (axum, reqwest) and a real
//! tonic client, on the memory store and on a real Redis: requests over
//! the limit are held until their booked time; one that would wait too
//! long is refused at once and charged nothing; a client that goes away
//! while waiting gives its reservation back; a gRPC call never waits past
//! its deadline; the requests waiting are bounded and shown in the
//! metrics. Real clocks: the waits are real time, so the bounds checked
//! are lower bounds (a loaded machine is only slower).
#![cfg(feature = "grpc")]

mod common;

#[allow(clippy::pedantic)]
mod pb {
    include!("../examples/pb/helloworld.rs");
}

use axum::routing::get;
use axum::Router;
use common::http::{eventually, on_both_stores, serve};
use floodgate::algorithm::{FixedWindow, Gcra, LeakyBucket};
use floodgate::key::{Header, PeerIp};
use floodgate::layer::RateLimitLayer;
use floodgate::store::{MemoryStore, Store};
use floodgate::Limiter;
use metrics_exporter_prometheus::PrometheusBuilder;
use pb::greeter_client::GreeterClient;
use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};
use std::time::{Duration, Instant};
use tonic::transport::server::TcpIncoming;
use tonic::transport::Server;
use tonic::Code;

/// One every 100 ms, no burst beyond one.
fn every_100ms(store: Store) -> Limiter<Gcra> {
    let gcra = Gcra::new(10, Duration::from_secs(1)).try_burst(1).unwrap();
    Limiter::builder(store, gcra).name("paced").build().unwrap()
}

/// The key: the `x-key` header.
fn key_header() -> Header {
    Header::try_new("x-key").unwrap()
}

fn app(layer: RateLimitLayer<Header, Gcra>) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
}

/// `n` requests of key `key` sent at once; each one's status and when it
/// was answered (from the start).
async fn burst(base: &str, key: &str, n: usize) -> Vec<(u16, Duration)> {
    let client = reqwest::Client::new();
    let start = Instant::now();
    let calls: Vec<_> = (0..n)
        .map(|_| {
            let req = client.get(base).header("x-key", key).send();
            tokio::spawn(async move { (req.await.unwrap().status().as_u16(), start.elapsed()) })
        })
        .collect();
    let mut out = Vec::new();
    for call in calls {
        out.push(call.await.unwrap());
    }
    out.sort_by_key(|(_, t)| *t);
    out
}

#[tokio::test]
async fn requests_over_the_limit_are_served_at_their_booked_times() {
    on_both_stores(|store| async move {
        let layer = RateLimitLayer::new(every_100ms(store), key_header())
            .wait_up_to(Duration::from_secs(2))
            .unwrap();
        let base = serve(app(layer)).await;
        let answers = burst(&base, "ana", 5).await;
        // All served; the k-th no sooner than k × 100 ms after the first
        // decision (10 ms of slack: a request's timer starts at its
        // decision, the test's clock before sending).
        for (k, (status, at)) in answers.iter().enumerate() {
            assert_eq!(*status, 200, "{answers:?}");
            let earliest =
                Duration::from_millis(100 * k as u64).saturating_sub(Duration::from_millis(10));
            assert!(*at >= earliest, "request {k} at {at:?}: {answers:?}");
        }
        assert!(answers[4].1 < Duration::from_secs(3), "{answers:?}");
        // Each after the one booked before it: 100 ms apart (less the
        // slack of when each was sent).
        for pair in answers.windows(2) {
            assert!(
                pair[1].1.saturating_sub(pair[0].1) >= Duration::from_millis(70),
                "{answers:?}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn a_request_that_would_wait_too_long_is_refused_at_once_and_charged_nothing() {
    on_both_stores(|store| async move {
        let limiter = Limiter::builder(
            store,
            Gcra::new(1, Duration::from_secs(1)).try_burst(1).unwrap(),
        )
        .name("slow")
        .build()
        .unwrap();
        let layer = RateLimitLayer::new(limiter.clone(), key_header())
            .wait_up_to(Duration::from_millis(300))
            .unwrap();
        let base = serve(app(layer)).await;
        let client = reqwest::Client::new();
        let get = || client.get(&base).header("x-key", "bo").send();
        assert_eq!(get().await.unwrap().status(), 200);
        let before = limiter.peek("bo").await.unwrap().reset_after();
        let started = Instant::now();
        let refused = get().await.unwrap();
        assert_eq!(refused.status(), 429);
        assert!(
            started.elapsed() < Duration::from_millis(300),
            "held before refusing"
        );
        // A request held at most 300 ms is served in 1 s - 300 ms: 0.7 s,
        // said in whole seconds.
        assert_eq!(refused.headers()["retry-after"], "1");
        let after = limiter.peek("bo").await.unwrap().reset_after();
        assert!(after <= before, "charged: {before:?} then {after:?}");
    })
    .await;
}

#[tokio::test]
async fn a_client_that_goes_away_while_waiting_gives_its_reservation_back() {
    on_both_stores(|store| async move {
        // One a second.
        let gcra = Gcra::new(1, Duration::from_secs(1)).try_burst(1).unwrap();
        let limiter = Limiter::builder(store, gcra).name("slow").build().unwrap();
        let layer = RateLimitLayer::new(limiter.clone(), key_header())
            .wait_up_to(Duration::from_secs(10))
            .unwrap();
        let base = serve(app(layer)).await;
        let client = reqwest::Client::new();
        // One served now, then five booked 1 to 5 s ahead whose clients
        // give up after 30 ms.
        let get = |c: &reqwest::Client| c.get(&base).header("x-key", "cy").send();
        assert_eq!(get(&client).await.unwrap().status(), 200);
        let impatient = reqwest::Client::builder()
            .timeout(Duration::from_millis(30))
            .build()
            .unwrap();
        for _ in 0..5 {
            assert!(get(&impatient).await.unwrap_err().is_timeout());
        }
        // Each gave its booking back: the key holds the first request's
        // second at most, not six.
        eventually(async || {
            limiter.peek("cy").await.unwrap().reset_after() <= Duration::from_secs(1)
        })
        .await;
        // The next request is booked where the first left it, within the
        // second.
        let started = Instant::now();
        assert_eq!(get(&client).await.unwrap().status(), 200);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    })
    .await;
}

#[tokio::test]
async fn waiting_requests_are_bounded_per_key_and_in_all_and_counted() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    // The layer registers its metrics when built: with this recorder.
    let layer = metrics::with_local_recorder(&recorder, || {
        RateLimitLayer::new(every_100ms(MemoryStore::new().into()), key_header())
            .wait_up_to(Duration::from_secs(10))
            .unwrap()
            .max_waiting(2, 3)
    });
    let base = serve(app(layer)).await;
    // Per key: one served now, two waiting, the other two find no seat and
    // are refused (their wait is longer than none).
    let statuses: Vec<u16> = burst(&base, "dee", 5)
        .await
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        2,
        "{statuses:?}"
    );
    // In all: three keys with two each waiting would be six; three seats.
    let keys = ["e1", "e2", "e3"];
    let mut first = Vec::new();
    for key in keys {
        first.extend(burst(&base, key, 1).await);
    }
    let client = reqwest::Client::new();
    let start = Instant::now();
    let waits: Vec<_> = keys
        .iter()
        .flat_map(|k| [k, k])
        .map(|k| {
            let req = client.get(&base).header("x-key", *k).send();
            tokio::spawn(async move { req.await.unwrap().status().as_u16() })
        })
        .collect();
    // While they wait, the gauge shows three.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let text = handle.render();
    assert!(
        text.contains(r#"floodgate_waiting_requests{limiter="paced"} 3"#),
        "{text}"
    );
    let mut served = 0;
    for w in waits {
        served += usize::from(w.await.unwrap() == 200);
    }
    assert_eq!(served, 3, "three seats");
    assert!(start.elapsed() >= Duration::from_millis(90));
    let text = handle.render();
    assert!(
        text.contains(r#"floodgate_waiting_requests{limiter="paced"} 0"#),
        "{text}"
    );
    // Two of "dee" and three of e1..e3 waited and were served.
    assert!(
        text.contains(r#"floodgate_waits_total{limiter="paced",end="served"} 5"#),
        "{text}"
    );
}

#[tokio::test]
async fn windows_cannot_wait_and_the_error_names_the_setting() {
    let window = Limiter::new(
        MemoryStore::new(),
        FixedWindow::new(10, Duration::from_secs(1)),
    );
    let e = RateLimitLayer::new(window, PeerIp::new())
        .wait_up_to(Duration::from_secs(1))
        .unwrap_err();
    assert_eq!(e.field(), "wait_up_to");
}

/// Answers `Hello, <name>!`.
struct Hello;

#[tonic::async_trait]
impl Greeter for Hello {
    async fn say_hello(
        &self,
        request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<HelloReply>, tonic::Status> {
        let name = request.into_inner().name;
        Ok(tonic::Response::new(HelloReply {
            message: format!("Hello, {name}!"),
        }))
    }
}

/// tonic's own server with `layer`, on a free port; a client to it.
async fn grpc<A: floodgate::algorithm::Algorithm>(
    layer: RateLimitLayer<PeerIp, A>,
) -> GreeterClient<tonic::transport::Channel> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Server::builder()
        .layer(layer)
        .add_service(GreeterServer::new(Hello))
        .serve_with_incoming(TcpIncoming::from(listener));
    tokio::spawn(async move { server.await.unwrap() });
    GreeterClient::connect(format!("http://{addr}"))
        .await
        .unwrap()
}

fn hello(timeout: Option<Duration>) -> tonic::Request<HelloRequest> {
    let mut req = tonic::Request::new(HelloRequest { name: "ana".into() });
    if let Some(t) = timeout {
        req.set_timeout(t);
    }
    req
}

#[tokio::test]
async fn grpc_calls_wait_for_their_time_but_never_past_their_deadline() {
    on_both_stores(|store| async move {
        let limiter = every_100ms(store);
        let layer = RateLimitLayer::new(limiter.clone(), PeerIp::new())
            .wait_up_to(Duration::from_secs(5))
            .unwrap();
        let mut client = grpc(layer).await;
        let start = Instant::now();
        client.say_hello(hello(None)).await.unwrap();
        // Held 100 ms, within its 2 s deadline.
        client
            .say_hello(hello(Some(Duration::from_secs(2))))
            .await
            .unwrap();
        assert!(start.elapsed() >= Duration::from_millis(90));
        // Booked 100 ms ahead, but its deadline is 50 ms: refused at once,
        // RESOURCE_EXHAUSTED (not DEADLINE_EXCEEDED), nothing booked.
        let before = limiter.peek("127.0.0.1").await.unwrap().reset_after();
        let status = client
            .say_hello(hello(Some(Duration::from_millis(50))))
            .await
            .unwrap_err();
        // Held until its deadline, the client would have seen
        // DEADLINE_EXCEEDED or CANCELLED.
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        let after = limiter.peek("127.0.0.1").await.unwrap().reset_after();
        assert!(after <= before, "booked: {before:?} then {after:?}");
    })
    .await;
}

#[tokio::test]
async fn a_leaky_bucket_queue_never_holds_a_grpc_call_past_its_deadline() {
    on_both_stores(|store| async move {
        // No wait_up_to: the leaky bucket delays as it always has, but
        // not past a call's deadline.
        let limiter = Limiter::builder(store, LeakyBucket::new(5, 10.0))
            .name("queue")
            .build()
            .unwrap();
        let mut client = grpc(RateLimitLayer::new(limiter.clone(), PeerIp::new())).await;
        client.say_hello(hello(None)).await.unwrap();
        let before = limiter.peek("127.0.0.1").await.unwrap();
        // Its place is 100 ms back in the queue; its deadline 30 ms.
        let status = client
            .say_hello(hello(Some(Duration::from_millis(30))))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        let after = limiter.peek("127.0.0.1").await.unwrap();
        assert!(
            after.remaining() >= before.remaining(),
            "{before:?} then {after:?}"
        );
        // With a longer deadline it queues.
        client
            .say_hello(hello(Some(Duration::from_secs(2))))
            .await
            .unwrap();
    })
    .await;
}
