//! Cost-weighted endpoints sharing one budget per API key, with plans
//! (tiers), two limits per key checked at once, and a per-IP limit on
//! `/login`.
//!
//! Every API key has two limits, checked all or nothing:
//! - `budget`: a token bucket of 100 tokens refilled at 10 per second;
//! - `day`: at most 5 000 tokens per day.
//!
//! A key on the pro plan (here: keys starting with `pro_`; in a real app, an
//! auth layer sets the plan) gets 1 000 tokens at 100 per second and 100 000
//! per day, from the same limiter. `GET /items` costs 1, `POST /search` costs
//! 5, `GET /export` costs 20. `POST /login` allows 5 attempts per minute per
//! client IP, exactly (sliding log), whatever the API key.
//!
//! ```text
//! cargo run --example axum_costs                                   # in-memory store
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example axum_costs  # Redis
//! curl -i -H 'x-api-key: demo' http://127.0.0.1:3000/export
//! curl -i -H 'x-api-key: pro_demo' http://127.0.0.1:3000/export
//! ```
//!
//! `ADDR` (default `127.0.0.1:3000`) sets the address it listens on.

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::routing::{get, post};
use axum::Router;
use floodgate::algorithm::{FixedWindow, Limits, SlidingLog, TokenBucket};
use floodgate::key::{Header, PeerIp};
use floodgate::layer::RateLimitLayer;
use floodgate::store::Store;

/// `store_from_env`: Redis when `REDIS_URL` is set, probed at start-up.
#[allow(dead_code)] // only its store is used here
#[path = "axum_quickstart.rs"]
mod quickstart;
use floodgate::{ConfigError, Limiter};
use std::net::SocketAddr;
use std::time::Duration;

const DAY: Duration = Duration::from_secs(86_400);

/// A customer's plan, put in the request's extensions by [`auth`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// The default limits.
    Free,
    /// Ten times as much.
    Pro,
}

/// The limits of a plan: a budget with bursts, and a daily quota.
///
/// # Errors
/// None with these names and numbers; `try_with` checks them.
pub fn limits(plan: Plan) -> Result<Limits, ConfigError> {
    let (burst, per_sec, day) = match plan {
        Plan::Free => (100, 10.0, 5_000),
        Plan::Pro => (1_000, 100.0, 100_000),
    };
    Limits::new("budget", TokenBucket::new(burst, per_sec))
        .try_with("day", FixedWindow::new(day, DAY))
}

/// A stand-in for an authentication layer: it finds the customer's plan.
async fn auth(mut req: Request, next: Next) -> axum::response::Response {
    let pro = req
        .headers()
        .get("x-api-key")
        .is_some_and(|k| k.as_bytes().starts_with(b"pro_"));
    req.extensions_mut()
        .insert(if pro { Plan::Pro } else { Plan::Free });
    next.run(req).await
}

/// The app over `store`; the tests build it too.
///
/// # Errors
/// None with these settings; the builders check them.
pub fn app(store: Store) -> Result<Router, ConfigError> {
    let budget = Limiter::builder(store.clone(), limits(Plan::Free)?)
        .name("api-key")
        .build()?;
    // The limits are resolved per request from the plan: no limiter per tier.
    let pro = limits(Plan::Pro)?;
    let per_key =
        RateLimitLayer::new(budget, Header::try_new("x-api-key")?).limits_for(move |req| match req
            .extensions()
            .get::<Plan>()?
        {
            Plan::Free => None,
            Plan::Pro => Some(pro.clone()),
        });
    let logins = Limiter::builder(store, SlidingLog::new(5, Duration::from_secs(60)))
        .name("login")
        .build()?;
    // `route_layer`, not `layer`: a method router's `.layer` also wraps its
    // "405 Method Not Allowed" answer, so `GET /login` would be charged (and
    // answered 429 once over the limit, instead of 405), and `POST /items`
    // would be charged before being answered 405. `route_layer` charges
    // only the requests a handler answers.
    Ok(Router::new()
        .route(
            "/items",
            get(|| async { "items\n" }).route_layer(per_key.clone().cost(1)),
        )
        .route(
            "/search",
            post(|| async { "results\n" }).route_layer(per_key.clone().cost(5)),
        )
        .route(
            "/export",
            get(|| async { "export\n" }).route_layer(per_key.cost(20)),
        )
        .route(
            "/login",
            post(|| async { "welcome\n" }).route_layer(RateLimitLayer::new(logins, PeerIp::new())),
        )
        // Outermost: the plan is known before any limit is checked.
        .layer(middleware::from_fn(auth)))
}

#[allow(dead_code)] // the tests include this file and have their own entry points.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Redis when REDIS_URL is set, probed at start-up; else in memory.
    let store = quickstart::store_from_env().await?;
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}");
    println!(
        "try: curl -i -H 'x-api-key: demo' http://{addr}/export   (5 of these spend the budget)"
    );
    println!("     curl -i -H 'x-api-key: pro_demo' http://{addr}/export   (the pro plan: 10x)");
    axum::serve(
        listener,
        app(store)?.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
