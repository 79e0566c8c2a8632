//! `OutboundLimitLayer`: eight workers (each its own hyper client and its
//! own store connection to one Redis, as eight app servers) share one
//! partner's quota, over real HTTP to a local upstream that records when
//! each request arrives. The upstream never sees more than its limit in
//! any second, and one 429 with `Retry-After: 2` pauses all eight.

mod common;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use common::RedisServer;
use floodgate::algorithm::Gcra;
use floodgate::layer::{OutboundError, OutboundLimitLayer};
use floodgate::store::RedisStore;
use floodgate::Limiter;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tower::{Service, ServiceBuilder, ServiceExt};

/// What the upstream saw: each request's arrival, and when it refused one.
#[derive(Default)]
struct Seen {
    arrivals: Vec<Instant>,
    refused_at: Option<Instant>,
}

/// The partner: answers 200, except its 21st request, which gets a 429
/// with `Retry-After: 2`.
async fn partner(State(seen): State<Arc<Mutex<Seen>>>) -> axum::response::Response {
    let mut seen = seen.lock().unwrap();
    let now = Instant::now();
    seen.arrivals.push(now);
    if seen.arrivals.len() == 21 {
        seen.refused_at = Some(now);
        return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "2")]).into_response();
    }
    "ok".into_response()
}

const WORKERS: usize = 8;
/// The partner's quota: 20 a second. The fleet asks for 18 (a margin for
/// the network between the booked time and the arrival).
const PARTNER_LIMIT: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_share_a_partners_quota_and_its_pause() {
    let redis = RedisServer::start();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = Router::new()
        .route("/", get(partner))
        .with_state(seen.clone());
    let url = common::http::serve(app).await;

    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        let store = RedisStore::from_url(&redis.url()).unwrap();
        let gcra = Gcra::new(18, Duration::from_secs(1)).try_burst(1).unwrap();
        // The store's clock (Redis `TIME`): every worker books on one clock.
        let limiter = Limiter::builder(store, gcra)
            .name("partner")
            .build()
            .unwrap();
        let client = Client::builder(TokioExecutor::new()).build_http::<axum::body::Body>();
        let mut service = ServiceBuilder::new()
            .layer(OutboundLimitLayer::new(limiter, "api.partner").max_wait(Duration::from_secs(5)))
            .service(client);
        let url = url.clone();
        workers.push(tokio::spawn(async move {
            let mut sent = 0;
            while started.elapsed() < Duration::from_millis(4500) {
                let req = http::Request::get(&url)
                    .body(axum::body::Body::empty())
                    .unwrap();
                match service.ready().await.unwrap().call(req).await {
                    Ok(_) => sent += 1,
                    // Would wait more than 5 s: not sent.
                    Err(OutboundError::Limited(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            sent
        }));
    }
    let mut sent = 0;
    for w in workers {
        sent += w.await.unwrap();
    }
    let seen = seen.lock().unwrap();
    let arrivals = &seen.arrivals;
    assert_eq!(arrivals.len(), sent);
    // Never more than the partner's limit in any second.
    for (i, first) in arrivals.iter().enumerate() {
        let in_second = arrivals[i..]
            .iter()
            .take_while(|t| t.duration_since(*first) < Duration::from_secs(1))
            .count();
        assert!(
            in_second <= PARTNER_LIMIT,
            "{in_second} in the second after arrival {i}"
        );
    }
    // The 429 paused every worker: nothing arrived for the rest of its two
    // seconds once the requests already on their way had arrived (those
    // booked before it, up to 8 × 56 ms ahead, read the pause before they
    // go: they book again after it), and requests came again after.
    let refused = seen.refused_at.expect("the partner refused one request");
    let quiet_from = refused + Duration::from_millis(100);
    let quiet_until = refused + Duration::from_millis(1950);
    let during: Vec<_> = arrivals
        .iter()
        .filter(|t| **t > quiet_from && **t < quiet_until)
        .map(|t| t.duration_since(refused))
        .collect();
    assert!(during.is_empty(), "arrivals during the pause: {during:?}");
    assert!(
        arrivals
            .iter()
            .any(|t| *t > refused + Duration::from_secs(2)),
        "requests resumed after the pause"
    );
}

/// A partner whose first answer is a 429 with `Retry-After: 1`.
async fn refuses_first(State(seen): State<Arc<Mutex<Seen>>>) -> axum::response::Response {
    let mut seen = seen.lock().unwrap();
    seen.arrivals.push(Instant::now());
    if seen.arrivals.len() == 1 {
        return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response();
    }
    "ok".into_response()
}

/// A window keeps no schedule a pause could push: the pause is read before
/// each request goes, so a window-limited client obeys a 429 too (waiting
/// when the pause ends within its `max_wait`, refused at once otherwise).
#[tokio::test]
async fn a_window_limited_client_obeys_a_pause_too() {
    use floodgate::algorithm::FixedWindow;
    use floodgate::store::MemoryStore;

    let seen = Arc::new(Mutex::new(Seen::default()));
    let app = Router::new()
        .route("/", get(refuses_first))
        .with_state(seen.clone());
    let url = common::http::serve(app).await;
    let limiter = Limiter::new(
        MemoryStore::new(),
        FixedWindow::new(100, Duration::from_secs(60)),
    );
    let client = Client::builder(TokioExecutor::new()).build_http::<axum::body::Body>();
    let layer = OutboundLimitLayer::new(limiter, "api.partner");
    let mut patient = ServiceBuilder::new()
        .layer(layer.clone().max_wait(Duration::from_secs(5)))
        .service(client.clone());
    let mut hasty = ServiceBuilder::new()
        .layer(layer.max_wait(Duration::from_millis(200)))
        .service(client);
    let get = || {
        http::Request::get(&url)
            .body(axum::body::Body::empty())
            .unwrap()
    };
    let first = patient.ready().await.unwrap().call(get()).await.unwrap();
    assert_eq!(first.status(), 429);
    // The pause is written in the background: give it a moment.
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Paused for longer than it may wait: refused, nothing sent.
    match hasty.ready().await.unwrap().call(get()).await {
        Err(OutboundError::Limited(d)) => {
            assert!(
                d.retry_after().unwrap() > Duration::from_millis(700),
                "{d:?}"
            );
        }
        other => panic!("expected a refusal, got {:?}", other.map(|r| r.status())),
    }
    // Paused for less than it may wait: sent once the pause is over.
    let second = patient.ready().await.unwrap().call(get()).await.unwrap();
    assert_eq!(second.status(), 200);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.arrivals.len(), 2);
    let gap = seen.arrivals[1].duration_since(seen.arrivals[0]);
    assert!(gap >= Duration::from_secs(1), "sent {gap:?} after the 429");
}
