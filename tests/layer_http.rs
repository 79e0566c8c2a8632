//! The layer over real TCP: an axum server, a real HTTP client, both stores.
//! Headers are read back with the independent parser in `common::sf`.

mod common;

use common::http::{on_both_stores, serve};

#[allow(dead_code)]
#[path = "../examples/axum_costs.rs"]
mod axum_costs;

use axum::{routing::get, Router};
use common::sf;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::headers::HeaderStyle;
use floodgate::key::{Header, PeerIp};
use floodgate::layer::{Cost, RateLimitLayer, RejectionKind};
use floodgate::store::MemoryStore;
use floodgate::Limiter;
use reqwest::StatusCode;
use serde_json::Value;
use std::time::{Duration, Instant};

fn header<'a>(res: &'a reqwest::Response, name: &str) -> &'a str {
    res.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

fn one_item(res: &reqwest::Response, name: &str) -> sf::Item {
    let mut items = sf::parse_list(header(res, name)).unwrap();
    assert_eq!(items.len(), 1, "{name}: {items:?}");
    items.remove(0)
}

#[tokio::test]
async fn allowed_responses_carry_headers_and_the_next_is_429() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(1_000_000);
        let limiter = Limiter::builder(store, FixedWindow::new(3, Duration::from_secs(60)))
            .name("minute")
            .clock(clock.clone())
            .build()
            .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(limiter, PeerIp::new()));
        let base = serve(app).await;
        let client = reqwest::Client::new();
        // 1_000_000 ms is 40 s into a 60 s window: 20 s until it resets.
        for remaining in [2, 1, 0] {
            let res = client.get(&base).send().await.unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            let policy = one_item(&res, "ratelimit-policy");
            assert_eq!(policy.name(), "minute");
            assert_eq!((policy.int("q"), policy.int("w")), (3, 60));
            let rl = one_item(&res, "ratelimit");
            assert_eq!(rl.name(), "minute");
            assert_eq!((rl.int("r"), rl.int("t")), (remaining, 20));
            assert!(res.headers().get("retry-after").is_none());
            assert_eq!(res.text().await.unwrap(), "ok");
        }
        clock.set(1_000_500); // 19.5 s left: Retry-After rounds up to 20.
        let res = client.get(&base).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&res, "retry-after"), "20");
        assert_eq!(header(&res, "content-type"), "application/problem+json");
        assert_eq!(header(&res, "cache-control"), "no-store");
        let rl = one_item(&res, "ratelimit");
        assert_eq!((rl.int("r"), rl.int("t")), (0, 20));
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["status"], 429);
        assert_eq!(
            body["type"],
            "https://iana.org/assignments/http-problem-types#quota-exceeded"
        );
        assert_eq!(body["violated-policies"], serde_json::json!(["minute"]));
        // A new window: admitted again.
        clock.set(1_020_000);
        assert_eq!(
            client.get(&base).send().await.unwrap().status(),
            StatusCode::OK
        );
    })
    .await;
}

#[tokio::test]
async fn sub_second_waits_round_retry_after_up() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(0);
        let limiter = Limiter::builder(
            store,
            Gcra::new(10, Duration::from_secs(1)).try_burst(1).unwrap(),
        )
        .clock(clock.clone())
        .build()
        .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(limiter, PeerIp::new()));
        let base = serve(app).await;
        let client = reqwest::Client::new();
        assert_eq!(
            client.get(&base).send().await.unwrap().status(),
            StatusCode::OK
        );
        clock.set(99); // 1 ms to wait: never `Retry-After: 0`.
        let res = client.get(&base).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(header(&res, "retry-after"), "1");
    })
    .await;
}

#[tokio::test]
async fn a_request_without_a_key_gets_400_naming_why() {
    on_both_stores(|store| async move {
        let limiter = Limiter::new(store, TokenBucket::new(5, 1.0));
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(
                limiter,
                Header::try_new("x-api-key").unwrap(),
            ));
        let base = serve(app).await;
        let client = reqwest::Client::new();
        let res = client.get(&base).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert_eq!(header(&res, "content-type"), "application/problem+json");
        let body: Value = res.json().await.unwrap();
        assert!(
            body["detail"].as_str().unwrap().contains("x-api-key"),
            "{body}"
        );
        // An oversized key is a clear 400 too, and the service keeps working.
        let res = client
            .get(&base)
            .header("x-api-key", "k".repeat(10_000))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        let res = client
            .get(&base)
            .header("x-api-key", "good")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
    })
    .await;
}

#[tokio::test]
async fn axum_costs_spends_the_budget_exactly_as_costs_say() {
    on_both_stores(|store| async move {
        // The example's own router; a free key's bucket holds 100 and
        // refills 10/s, far slower than these requests take.
        let base = serve(axum_costs::app(store).unwrap()).await;
        let client = reqwest::Client::new();
        let req = |method: reqwest::Method, path: &str, key: &str| {
            client
                .request(method, format!("{base}{path}"))
                .header("x-api-key", key)
        };
        let remaining = |res: &reqwest::Response| one_item(res, "ratelimit").int("r");
        // 4 exports (80) + 3 searches (15) + 5 items (5) = 100.
        let mut spent = 0;
        for _ in 0..4 {
            let res = req(reqwest::Method::GET, "/export", "ana")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
            spent += 20;
            assert!(
                (100 - spent..=100 - spent + 1).contains(&remaining(&res)),
                "{}",
                remaining(&res)
            );
        }
        for _ in 0..3 {
            let res = req(reqwest::Method::POST, "/search", "ana")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
        }
        // The budget is now 5 (plus what refilled meanwhile, well under 5):
        // an export (20) no longer fits, and a denial consumes nothing.
        let res = req(reqwest::Method::GET, "/export", "ana")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        let res = req(reqwest::Method::POST, "/search", "ana")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "5 tokens left fit one search");
        let res = req(reqwest::Method::POST, "/search", "ana")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        // Another key has its own budget; both of its limits are listed.
        let res = req(reqwest::Method::GET, "/export", "bob")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(remaining(&res), 80);
        let policies = sf::parse_list(header(&res, "ratelimit-policy")).unwrap();
        let quotas: Vec<(&str, i64, i64)> = policies
            .iter()
            .map(|p| (p.name(), p.int("q"), p.int("w")))
            .collect();
        assert_eq!(quotas, [("budget", 100, 10), ("day", 5000, 86_400)]);
        // A key on the pro plan gets ten times the budget from the same limiter.
        for _ in 0..10 {
            let res = req(reqwest::Method::GET, "/export", "pro_carol")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK);
        }
        let res = req(reqwest::Method::GET, "/export", "pro_carol")
            .send()
            .await
            .unwrap();
        // 11 exports spent 220 of 1000; the refill (100/s) adds what the calls took.
        assert!((780..900).contains(&remaining(&res)), "{}", remaining(&res));
        let policies = sf::parse_list(header(&res, "ratelimit-policy")).unwrap();
        assert_eq!(policies[0].int("q"), 1000);
        // Login: 5 per minute per IP, whatever the key.
        for _ in 0..5 {
            assert_eq!(
                req(reqwest::Method::POST, "/login", "x")
                    .send()
                    .await
                    .unwrap()
                    .status(),
                StatusCode::OK
            );
        }
        let res = req(reqwest::Method::POST, "/login", "y")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    })
    .await;
}

#[tokio::test]
async fn cost_fn_and_cost_extension_price_requests() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(0);
        let limiter = Limiter::builder(store, FixedWindow::new(10, Duration::from_secs(60)))
            .clock(clock)
            .build()
            .unwrap();
        let layer = RateLimitLayer::new(limiter, PeerIp::new()).cost_fn(|req| {
            if req.method() == http::Method::GET {
                1
            } else {
                4
            }
        });
        let app = Router::new()
            .route("/", get(|| async { "ok" }).post(|| async { "posted" }))
            .route(
                "/batch",
                get(|| async { "batch" }).layer(axum::Extension(Cost(3))),
            )
            .layer(layer);
        let base = serve(app).await;
        let client = reqwest::Client::new();
        let r = |res: &reqwest::Response| one_item(res, "ratelimit").int("r");
        assert_eq!(r(&client.get(&base).send().await.unwrap()), 9);
        assert_eq!(r(&client.post(&base).send().await.unwrap()), 5);
        // The route's extension is set after the layer ran: it does not apply.
        assert_eq!(
            r(&client.get(format!("{base}/batch")).send().await.unwrap()),
            4
        );
        let res = client.post(&base).send().await.unwrap();
        assert_eq!(r(&res), 0);
        let res = client.post(&base).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    })
    .await;
}

#[tokio::test]
async fn a_cost_extension_set_before_the_layer_wins() {
    let limiter = Limiter::new(
        MemoryStore::new(),
        FixedWindow::new(10, Duration::from_secs(60)),
    );
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, PeerIp::new()))
        // Outer layers run first: this one prices the request at 7.
        .layer(axum::Extension(Cost(7)));
    let base = serve(app).await;
    let res = reqwest::get(&base).await.unwrap();
    assert_eq!(one_item(&res, "ratelimit").int("r"), 3);
}

#[tokio::test]
async fn route_layer_limits_only_matched_routes() {
    let limiter = Limiter::new(
        MemoryStore::new(),
        FixedWindow::new(1, Duration::from_secs(60)),
    );
    let app = Router::new()
        .route("/limited", get(|| async { "ok" }))
        .route_layer(RateLimitLayer::new(limiter, PeerIp::new()))
        .route("/free", get(|| async { "ok" }));
    let base = serve(app).await;
    let client = reqwest::Client::new();
    assert_eq!(
        client
            .get(format!("{base}/limited"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        client
            .get(format!("{base}/limited"))
            .send()
            .await
            .unwrap()
            .status(),
        429
    );
    let free = client.get(format!("{base}/free")).send().await.unwrap();
    assert_eq!(free.status(), 200);
    assert!(free.headers().get("ratelimit").is_none());
    // Unmatched paths are 404, not charged.
    assert_eq!(
        client
            .get(format!("{base}/nope"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test]
async fn leaky_bucket_delays_admitted_requests() {
    // A real clock: the delay is real time. 10/s: 100 ms per queued request.
    let limiter = Limiter::new(MemoryStore::new(), LeakyBucket::new(5, 10.0));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, PeerIp::new()));
    let base = serve(app).await;
    let client = reqwest::Client::new();
    let first = Instant::now();
    assert_eq!(client.get(&base).send().await.unwrap().status(), 200);
    let first = first.elapsed();
    let second = Instant::now();
    assert_eq!(client.get(&base).send().await.unwrap().status(), 200);
    let second = second.elapsed();
    assert!(
        second >= Duration::from_millis(80),
        "queued request served after {second:?}"
    );
    assert!(first < second, "{first:?} vs {second:?}");
}

#[tokio::test]
async fn shadow_mode_serves_denied_requests_with_true_headers() {
    let limiter = Limiter::new(
        MemoryStore::new(),
        FixedWindow::new(1, Duration::from_secs(60)),
    );
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, PeerIp::new()).shadow(true));
    let base = serve(app).await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let res = client.get(&base).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(one_item(&res, "ratelimit").int("r"), 0);
    }
}

#[tokio::test]
async fn rejections_can_be_replaced_and_header_styles_chosen() {
    let limiter = Limiter::new(
        MemoryStore::new(),
        FixedWindow::new(1, Duration::from_secs(60)),
    );
    let layer = RateLimitLayer::new(limiter, PeerIp::new())
        .headers(HeaderStyle::Legacy {
            reset: floodgate::headers::ResetUnit::DeltaSeconds,
        })
        .on_rejection(|rejection| {
            let mut res = rejection.default_response();
            if let RejectionKind::Limited { .. } = rejection.kind {
                *res.body_mut() = bytes::Bytes::from_static(b"slow down");
                res.headers_mut()
                    .insert("content-type", "text/plain".parse().unwrap());
            }
            res
        });
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);
    let base = serve(app).await;
    let client = reqwest::Client::new();
    let res = client.get(&base).send().await.unwrap();
    assert_eq!(header(&res, "x-ratelimit-limit"), "1");
    assert_eq!(header(&res, "x-ratelimit-remaining"), "0");
    assert!(res.headers().get("ratelimit").is_none());
    let res = client.get(&base).send().await.unwrap();
    assert_eq!(res.status(), 429);
    assert!(res.headers().get("retry-after").is_some());
    assert_eq!(res.text().await.unwrap(), "slow down");
}

#[tokio::test]
async fn clients_behind_a_trusted_proxy_are_told_apart() {
    use floodgate::key::ClientIp;
    let limiter = Limiter::new(
        MemoryStore::new(),
        FixedWindow::new(1, Duration::from_secs(60)),
    );
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(
            limiter,
            ClientIp::new().trust_loopback(),
        ));
    let base = serve(app).await;
    let client = reqwest::Client::new();
    let get = |xff: &'static str| client.get(&base).header("x-forwarded-for", xff).send();
    assert_eq!(get("203.0.113.7").await.unwrap().status(), 200);
    assert_eq!(get("203.0.113.7").await.unwrap().status(), 429);
    // A spoofed left-most entry does not buy a fresh bucket.
    assert_eq!(get("1.2.3.4, 203.0.113.7").await.unwrap().status(), 429);
    assert_eq!(get("198.51.100.1").await.unwrap().status(), 200);
    // Same /64: same bucket.
    assert_eq!(get("2001:db8:1:2::1").await.unwrap().status(), 200);
    assert_eq!(get("2001:db8:1:2:ffff::9").await.unwrap().status(), 429);
}
