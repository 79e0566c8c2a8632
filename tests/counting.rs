//! Counting by the response, over real HTTP: a request charged only when
//! its response matches is still a decision (its denial is counted in the
//! metrics), and the rate-limit fields of a response that is not charged say
//! what remains without it. Refunds by composed predicates.

mod common;

use axum::{http::StatusCode, routing::get, Router};
use common::http::{eventually, login, serve};
use floodgate::algorithm::SlidingLog;
use floodgate::key::Global;
use floodgate::layer::predicate::{ServerErrors, Status, StatusPredicate};
use floodgate::store::MemoryStore;
use floodgate::{Limiter, RateLimitLayer};
use metrics_exporter_prometheus::PrometheusBuilder;
use std::time::Duration;

const MIN: Duration = Duration::from_secs(60);

/// The `r` of the `RateLimit` field: what remains.
fn remaining(res: &reqwest::Response) -> u64 {
    let field = res.headers()["ratelimit"].to_str().unwrap();
    let r = field.split(';').find_map(|p| p.strip_prefix("r=")).unwrap();
    r.parse().unwrap()
}

#[tokio::test]
async fn failed_logins_only_are_charged_and_every_denial_is_counted() {
    let prometheus = PrometheusBuilder::new().install_recorder().unwrap();
    let limiter = Limiter::builder(MemoryStore::new(), SlidingLog::new(3, MIN))
        .name("login")
        .build()
        .unwrap();
    let app = Router::new().route("/login", login()).route_layer(
        RateLimitLayer::new(limiter.clone(), Global::new())
            .count_only_when(Status(StatusCode::UNAUTHORIZED).or(Status(StatusCode::FORBIDDEN))),
    );
    let base = serve(app).await;
    let login = |pw: &'static str| reqwest::get(format!("{base}/login?password={pw}"));

    // A successful login is not charged: its fields say all 3 remain.
    let ok = login("right").await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        remaining(&ok),
        3,
        "an uncharged response reports what remains"
    );
    assert_eq!(limiter.peek("global").await.unwrap().remaining(), 3);

    // A failed one is: its fields say 2 remain, and so does the store.
    let failed = login("wrong").await.unwrap();
    assert_eq!(failed.status(), 401);
    assert_eq!(remaining(&failed), 2);
    eventually(async || limiter.peek("global").await.unwrap().remaining() == 2).await;
    for left in [1, 0] {
        assert_eq!(login("wrong").await.unwrap().status(), 401);
        eventually(async || limiter.peek("global").await.unwrap().remaining() == left).await;
    }

    // Locked out: denied three times, each denial counted.
    for _ in 0..3 {
        assert_eq!(login("right").await.unwrap().status(), 429);
    }
    let text = prometheus.render();
    let count = |labels: &str| -> f64 {
        let start = format!("floodgate_decisions_total{{limiter=\"login\",{labels}}}");
        let line = text.lines().find(|l| l.starts_with(&start));
        let line = line.unwrap_or_else(|| panic!("no `{start}` in:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(count(r#"outcome="denied",reason="over_limit""#), 3.0);
    // The four admitted trials, each counted once (the later charges of the
    // failed ones are settlements, not decisions).
    assert_eq!(count(r#"outcome="allowed",reason="within_limit""#), 4.0);
}

#[tokio::test]
async fn a_refund_predicate_composes() {
    let limiter = Limiter::new(MemoryStore::new(), SlidingLog::new(10, MIN));
    let app = Router::new()
        .route("/fail", get(|| async { StatusCode::INTERNAL_SERVER_ERROR }))
        .route("/shed", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
        .route_layer(
            RateLimitLayer::new(limiter.clone(), Global::new())
                .refund_when(ServerErrors.and(Status(StatusCode::SERVICE_UNAVAILABLE).not())),
        );
    let base = serve(app).await;
    // A 500 is given back, a 503 is not.
    assert_eq!(
        reqwest::get(format!("{base}/fail")).await.unwrap().status(),
        500
    );
    eventually(async || limiter.peek("global").await.unwrap().remaining() == 10).await;
    assert_eq!(
        reqwest::get(format!("{base}/shed")).await.unwrap().status(),
        503
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(limiter.peek("global").await.unwrap().remaining(), 9);
    // A route that does not exist is not charged: the layer is a route layer.
    assert_eq!(
        reqwest::get(format!("{base}/nowhere"))
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(limiter.peek("global").await.unwrap().remaining(), 9);
}
