//! floodgate's metrics for Prometheus: an axum app limited per client IP,
//! with `/metrics` in the Prometheus text format.
//!
//! ```text
//! cargo run --example prometheus                                   # in-memory store
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example prometheus  # Redis
//! for i in $(seq 15); do curl -s -o /dev/null http://127.0.0.1:3000/; done
//! curl -s http://127.0.0.1:3000/metrics | grep floodgate
//! ```
//!
//! `ADDR` (default `127.0.0.1:3000`) sets the address it listens on.

use axum::{routing::get, Router};
use floodgate::algorithm::Gcra;
use floodgate::key::PeerIp;
use floodgate::layer::RateLimitLayer;
use floodgate::store::Store;

/// `store_from_env`: Redis when `REDIS_URL` is set, probed at start-up.
#[allow(dead_code)] // only its store is used here
#[path = "axum_quickstart.rs"]
mod quickstart;
use floodgate::Limiter;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::time::Duration;

/// Buckets of `floodgate_decision_seconds`, in seconds: a Redis round trip
/// from 0.1 ms up to the limiter's timeout (100 ms by default) and past it.
pub const DECISION_BUCKETS: [f64; 11] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
];

/// Install the Prometheus recorder. Do it before building limiters: each
/// registers its counters once, when built.
///
/// Without buckets this exporter renders a histogram as a summary
/// (quantiles computed in this process), which Prometheus cannot add up
/// across app servers; with buckets it is a Prometheus histogram, and
/// `histogram_quantile(0.99, sum by (le) (rate(floodgate_decision_seconds_bucket[5m])))`
/// is the latency over all of them.
///
/// # Panics
/// When another metrics recorder is installed already.
pub fn install() -> PrometheusHandle {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("floodgate_decision_seconds".into()),
            &DECISION_BUCKETS,
        )
        .expect("buckets are not empty")
        .install_recorder()
        .expect("no other metrics recorder installed")
}

/// The app: `/` limited per client IP, `/metrics` not limited.
///
/// # Panics
/// Never: the limiter's settings are valid.
pub fn app(store: Store, metrics: PrometheusHandle) -> Router {
    let limiter = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1)))
        .name("per-ip")
        .build()
        .expect("valid limiter");
    Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(RateLimitLayer::new(limiter, PeerIp::new()))
        .route("/metrics", get(move || async move { metrics.render() }))
}

#[allow(dead_code)] // the test includes this file.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let metrics = install();
    // Redis when REDIS_URL is set, probed at start-up; else in memory.
    let store = quickstart::store_from_env().await?;
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}; metrics at http://{addr}/metrics");
    axum::serve(
        listener,
        app(store, metrics).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
