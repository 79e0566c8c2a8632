//! Which requests a layer charges depends on where axum puts it, over real
//! TCP. On a method router (`post(handler)`), `route_layer` charges only the
//! methods it routes, `layer` also its 405 answer. On a `Router`,
//! `route_layer` leaves the 404 fallback out, `layer` charges it too; both
//! wrap each method router whole, 405 included. A charged 404 or 405 is
//! answered 429 once the budget is spent. `examples/axum_costs.rs` uses
//! `route_layer` on its method routers; its answers are checked here too.

mod common;

#[allow(dead_code)]
#[path = "../examples/axum_costs.rs"]
mod axum_costs;

use axum::routing::{get, post};
use axum::Router;
use common::http::serve;
use floodgate::algorithm::Gcra;
use floodgate::key::Global;
use floodgate::layer::RateLimitLayer;
use floodgate::store::MemoryStore;
use floodgate::Limiter;
use reqwest::{Method, StatusCode};
use std::time::Duration;

/// One request per hour for everybody: the first request a layer charges
/// spends the whole budget.
fn one_per_hour() -> RateLimitLayer<Global, Gcra> {
    let limiter = Limiter::new(MemoryStore::new(), Gcra::new(1, Duration::from_secs(3600)));
    RateLimitLayer::new(limiter, Global::new())
}

/// The status of `method path` on `base`.
async fn status(client: &reqwest::Client, base: &str, method: Method, path: &str) -> StatusCode {
    client
        .request(method, format!("{base}{path}"))
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn route_layer_on_a_method_router_charges_no_unrouted_method() {
    let app = Router::new().route(
        "/login",
        post(|| async { "welcome" }).route_layer(one_per_hour()),
    );
    let base = serve(app).await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let s = status(&client, &base, Method::GET, "/login").await;
        assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    }
    // The budget is whole: the first POST gets through, the second is over it.
    let s = status(&client, &base, Method::POST, "/login").await;
    assert_eq!(s, StatusCode::OK);
    let s = status(&client, &base, Method::POST, "/login").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn layer_on_a_method_router_charges_unrouted_methods_too() {
    // The contrast: `.layer` wraps the method router's 405 answer as well.
    let app = Router::new().route("/login", post(|| async { "welcome" }).layer(one_per_hour()));
    let base = serve(app).await;
    let client = reqwest::Client::new();
    // Charged, then answered 405 ...
    let s = status(&client, &base, Method::GET, "/login").await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    // ... so the next GET is 429 instead of 405, and the POST has no budget left.
    let s = status(&client, &base, Method::GET, "/login").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    let s = status(&client, &base, Method::POST, "/login").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn route_layer_on_a_router_charges_no_path_without_a_route() {
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route_layer(one_per_hour());
    let base = serve(app).await;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let s = status(&client, &base, Method::GET, "/wp-admin").await;
        assert_eq!(s, StatusCode::NOT_FOUND);
    }
    let s = status(&client, &base, Method::GET, "/").await;
    assert_eq!(s, StatusCode::OK);
    let s = status(&client, &base, Method::GET, "/").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn route_layer_on_a_router_still_charges_unrouted_methods() {
    // axum's `Router::route_layer` leaves the 404 fallback out but puts the
    // layer on each method router whole, 405 included: to charge only the
    // methods a route answers, use `route_layer` on the method router.
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .route_layer(one_per_hour());
    let base = serve(app).await;
    let client = reqwest::Client::new();
    let s = status(&client, &base, Method::POST, "/").await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    let s = status(&client, &base, Method::GET, "/").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn layer_on_a_router_charges_paths_without_a_route() {
    // The contrast, as the guide describes it ("a scanner probing for
    // `/wp-admin` is charged too"): `Router::layer` wraps the 404 fallback.
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(one_per_hour());
    let base = serve(app).await;
    let client = reqwest::Client::new();
    let s = status(&client, &base, Method::GET, "/wp-admin").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let s = status(&client, &base, Method::GET, "/wp-admin").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    let s = status(&client, &base, Method::GET, "/").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn axum_costs_charges_no_method_its_routes_do_not_answer() {
    let base = serve(axum_costs::app(MemoryStore::new().into()).unwrap()).await;
    let client = reqwest::Client::new();
    // `/login` allows 5 POSTs per minute per client IP: GETs are not
    // among them, however many.
    for _ in 0..8 {
        let s = status(&client, &base, Method::GET, "/login").await;
        assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    }
    for _ in 0..5 {
        let s = status(&client, &base, Method::POST, "/login").await;
        assert_eq!(s, StatusCode::OK);
    }
    let s = status(&client, &base, Method::POST, "/login").await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);

    // `POST /export` is answered 405 and costs nothing: the first export
    // then leaves 80 of the budget of 100 (81 if a token refilled meanwhile),
    // not 60.
    let export = |method: Method| {
        client
            .request(method, format!("{base}/export"))
            .header("x-api-key", "ana")
    };
    for _ in 0..3 {
        let res = export(Method::POST).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    }
    let res = export(Method::GET).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let field = res.headers()["ratelimit"].to_str().unwrap();
    let items = common::sf::parse_list(field).unwrap();
    let budget = items
        .iter()
        .find(|item| item.name() == "budget")
        .unwrap_or_else(|| panic!("no budget item in {field}"));
    let remaining = budget.int("r");
    assert!((80..=81).contains(&remaining), "{field}");
}
