//! The smallest real server: 10 requests per second per client IP, with a
//! burst of 10.
//!
//! ```text
//! cargo run --example axum_quickstart                                   # in-memory store
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example axum_quickstart  # Redis
//! ```
//!
//! `ADDR` (default `127.0.0.1:3000`) sets the address it listens on.

use axum::{routing::get, Router};
use floodgate::algorithm::Gcra;
use floodgate::key::PeerIp;
use floodgate::layer::RateLimitLayer;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::Limiter;
use std::net::SocketAddr;
use std::time::Duration;

/// The store: Redis when `REDIS_URL` is set (`redis://`, `rediss://`,
/// `redis+sentinel://`), else in memory.
///
/// Redis is probed at start-up, not at the first request: with the default
/// fail-open policy a store that cannot decide would admit every request,
/// and the app would run without limits. What the probe found is printed.
///
/// # Errors
/// When `REDIS_URL` is not a Redis URL, or floodgate cannot work there
/// (unreachable, TLS, a password or ACL that does not allow it).
pub async fn store_from_env() -> Result<Store, Box<dyn std::error::Error>> {
    let Ok(url) = std::env::var("REDIS_URL") else {
        return Ok(MemoryStore::new().into());
    };
    let redis = RedisStore::from_url(&url)?;
    let report = redis
        .probe()
        .await
        .map_err(|e| format!("REDIS_URL: floodgate cannot work there: {e}"))?;
    for node in report.nodes() {
        let tls = if node.tls() { ", TLS" } else { "" };
        eprintln!(
            "floodgate: {} {} at {} ({}{tls})",
            node.server(),
            node.version(),
            node.address(),
            node.role()
        );
    }
    for warning in report.warnings() {
        eprintln!("floodgate: warning: {warning}");
    }
    Ok(redis.into())
}

/// The app: one route, limited per client IP.
///
/// # Panics
/// Never: the limiter's settings are valid.
pub fn app(store: Store) -> Router {
    let limiter = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1)))
        .name("per-ip")
        .build()
        .expect("valid limiter name");
    Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(RateLimitLayer::new(limiter, PeerIp::new()))
}

#[allow(dead_code)] // `demo` includes this file and has its own main.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let app = app(store_from_env().await?);
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    println!("try: for i in $(seq 12); do curl -s -o /dev/null -w '%{{http_code}}\\n' http://{addr}/; done");
    println!("or:  curl -i http://{addr}/");
    // The peer address is what PeerIp keys on: serve with connect info.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
