//! Starts the quickstart server on a free port, fires a burst of 14 requests
//! at it with a real HTTP client, prints what came back, and exits.
//!
//! ```text
//! cargo run --example demo                                   # in-memory store
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example demo  # Redis
//! ```
//!
//! `ADDR` (default `127.0.0.1:0`, a free port) sets the address of its server.

#[path = "axum_quickstart.rs"]
mod quickstart;

use std::net::SocketAddr;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = quickstart::store_from_env().await?;
    let backend = if std::env::var("REDIS_URL").is_ok() {
        "Redis"
    } else {
        "in-memory"
    };
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:0".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let addr = listener.local_addr()?;
    let app = quickstart::app(store);
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });

    println!("floodgate demo: GCRA, 10 requests/s per client IP, burst 10, {backend} store");
    println!("server on http://{addr}; 14 requests at once, then one more after 250 ms\n");
    println!("  #  status RateLimit                RateLimit-Policy                   Retry-After");
    let client = reqwest::Client::new();
    for i in 1..=15 {
        if i == 15 {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let res = client.get(format!("http://{addr}/")).send().await?;
        let h = |name: &str| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("-")
                .to_string()
        };
        println!(
            "{i:>3}  {:<6} {:<24} {:<34} {}",
            res.status().as_u16(),
            h("ratelimit"),
            h("ratelimit-policy"),
            h("retry-after")
        );
    }
    println!("\nThe first 10 pass (the burst), the next are answered 429 at once with");
    println!("Retry-After rounded up; after 250 ms, 2 more have been earned (one per 100 ms).");
    Ok(())
}
