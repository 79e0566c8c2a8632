//! Cost-weighted endpoints sharing one budget per API key, plus a per-IP
//! limit on `/login`.
//!
//! Every API key has a token bucket of 100 tokens refilled at 10 per second:
//! `GET /items` costs 1, `POST /search` costs 5, `GET /export` costs 20.
//! `POST /login` allows 5 attempts per minute per client IP, exactly
//! (sliding log), whatever the API key.
//!
//! ```text
//! cargo run --example axum_costs
//! curl -i -H 'x-api-key: demo' http://127.0.0.1:3000/export
//! ```

use axum::routing::{get, post};
use axum::Router;
use floodgate::algorithm::{SlidingLog, TokenBucket};
use floodgate::key::{Header, PeerIp};
use floodgate::layer::RateLimitLayer;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{ConfigError, Limiter};
use std::net::SocketAddr;
use std::time::Duration;

/// The app over `store`; the tests build it too.
pub fn app(store: Store) -> Result<Router, ConfigError> {
    let budget = Limiter::builder(store.clone(), TokenBucket::new(100, 10.0))
        .name("api-key")
        .build()?;
    let per_key = RateLimitLayer::new(budget, Header::try_new("x-api-key")?);
    let logins = Limiter::builder(store, SlidingLog::new(5, Duration::from_secs(60)))
        .name("login")
        .build()?;
    Ok(Router::new()
        .route(
            "/items",
            get(|| async { "items\n" }).layer(per_key.clone().cost(1)),
        )
        .route(
            "/search",
            post(|| async { "results\n" }).layer(per_key.clone().cost(5)),
        )
        .route(
            "/export",
            get(|| async { "export\n" }).layer(per_key.cost(20)),
        )
        .route(
            "/login",
            post(|| async { "welcome\n" }).layer(RateLimitLayer::new(logins, PeerIp::new())),
        ))
}

#[allow(dead_code)] // the tests include this file and have their own entry points.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store: Store = match std::env::var("REDIS_URL") {
        Ok(url) => RedisStore::from_url(&url)?.into(),
        Err(_) => MemoryStore::new().into(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://127.0.0.1:3000");
    println!("try: curl -i -H 'x-api-key: demo' http://127.0.0.1:3000/export   (5 of these spend the budget)");
    axum::serve(
        listener,
        app(store)?.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
