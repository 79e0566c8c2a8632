//! An LLM gateway: an axum proxy in front of an upstream model service.
//!
//! - Per API key, **requests per minute** (GCRA) and **tokens per
//!   minute** (a token bucket). A call is charged an estimate of 500
//!   tokens when it comes in; the upstream's answer says what it used
//!   (`x-tokens-used`), and the difference is given back or charged (into
//!   debt when the key has no room left: its next calls wait their turn).
//! - **Outbound**, one limit shared by every gateway server towards the
//!   upstream (20 calls a second): a call waits for its booked time
//!   instead of failing, and the upstream's 429 pauses every server.
//!
//! The upstream runs in this process (a random latency and a token count
//! per answer, and its own 25-a-second limit answering 429). Run it:
//!
//! ```text
//! cargo run --example llm_gateway                                   # in-memory store
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example llm_gateway  # Redis
//! ```
//!
//! It sends a few calls for two API keys, prints what came back, and
//! exits; `SERVE=1` keeps the gateway running on `ADDR` (default
//! `127.0.0.1:3000`) instead:
//!
//! ```text
//! curl -si -X POST -H 'x-api-key: alice' -d 'Tell me a story' http://127.0.0.1:3000/v1/complete
//! ```

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use floodgate::algorithm::{Gcra, TokenBucket};
use floodgate::key::Header;
use floodgate::layer::{ActualCost, Cost, OutboundError, OutboundLimitLayer, RateLimitLayer};
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::Limiter;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::future::IntoFuture;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceBuilder, ServiceExt};

/// The estimate a call is charged before its answer says what it used.
pub const ESTIMATE: u64 = 500;

/// The store: Redis when `REDIS_URL` is set, else in memory.
///
/// # Errors
/// A `REDIS_URL` that is not a Redis URL.
pub fn store_from_env() -> Result<Store, floodgate::ConfigError> {
    Ok(match std::env::var("REDIS_URL") {
        Ok(url) => RedisStore::from_url(&url)?.into(),
        Err(_) => MemoryStore::new().into(),
    })
}

// ---- The upstream model service (stands in for a provider's API) ----

/// The upstream's own limit, as a provider enforces it: 25 calls in any
/// second, then 429 with `Retry-After: 1`.
#[derive(Default)]
pub struct Upstream {
    recent: Mutex<Vec<Instant>>,
    /// Calls answered.
    pub served: AtomicU64,
    /// Calls refused with 429.
    pub refused: AtomicU64,
}

async fn complete_upstream(State(up): State<Arc<Upstream>>, prompt: String) -> Response {
    {
        let mut recent = up
            .recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        recent.retain(|t| now.duration_since(*t) < Duration::from_secs(1));
        if recent.len() >= 25 {
            up.refused.fetch_add(1, Ordering::Relaxed);
            return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "1")]).into_response();
        }
        recent.push(now);
    }
    // A latency and a token count that grow with the prompt.
    let words = prompt.split_whitespace().count() as u64;
    tokio::time::sleep(Duration::from_millis(20 + 5 * words.min(40))).await;
    let used = 100 + 60 * words;
    up.served.fetch_add(1, Ordering::Relaxed);
    let text = format!("{{\"text\":\"...\",\"usage\":{{\"total_tokens\":{used}}}}}");
    ([("x-tokens-used", used.to_string())], text).into_response()
}

/// The upstream's router.
pub fn upstream(state: Arc<Upstream>) -> Router {
    Router::new()
        .route("/v1/complete", post(complete_upstream))
        .with_state(state)
}

// ---- The gateway ----

/// The client towards the upstream, behind the outbound limit.
type UpstreamClient = BoxCloneSyncService<
    Request<Body>,
    Response<Body>,
    OutboundError<hyper_util::client::legacy::Error>,
>;

#[derive(Clone)]
struct Gateway {
    client: UpstreamClient,
    upstream: String,
}

/// Forward the call; copy the tokens the upstream used onto the answer
/// (as a header for the client, as a `Cost` for the tokens limit).
async fn complete(State(gw): State<Gateway>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let mut out = Request::post(format!("{}/v1/complete", gw.upstream));
    if let Some(ct) = parts.headers.get("content-type") {
        out = out.header("content-type", ct);
    }
    let Ok(out) = out.body(body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let mut client = gw.client.clone();
    let answer = match client.ready().await {
        Ok(c) => c.call(out).await,
        Err(e) => Err(e),
    };
    match answer {
        Ok(res) => {
            let (parts, body) = res.into_parts();
            let used = tokens_used(&parts.headers);
            let mut res = Response::from_parts(parts, body);
            if let Some(used) = used {
                res.extensions_mut().insert(Cost(used));
            }
            res
        }
        // The shared upstream limit would make this call wait too long.
        Err(OutboundError::Limited(d)) => {
            let secs = d.retry_after().map_or(1, |t| t.as_secs().max(1));
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [("retry-after", secs.to_string())],
                "upstream busy\n",
            )
                .into_response()
        }
        Err(e) => (StatusCode::BAD_GATEWAY, format!("{e}\n")).into_response(),
    }
}

fn tokens_used(headers: &HeaderMap) -> Option<u64> {
    headers.get("x-tokens-used")?.to_str().ok()?.parse().ok()
}

/// The gateway's router over `store`, forwarding to `upstream_url`.
///
/// # Panics
/// Never: the limits are valid constants.
pub fn gateway(store: Store, upstream_url: String) -> Router {
    let api_key = || Header::try_new("x-api-key").expect("a valid header name");
    // Per API key: 60 calls a minute, bursts of 10.
    let calls = Limiter::builder(
        store.clone(),
        Gcra::new(60, Duration::from_secs(60))
            .try_burst(10)
            .expect("valid"),
    )
    .name("calls")
    .build()
    .expect("valid");
    // Per API key: 10 000 tokens a minute.
    let tokens = Limiter::builder(store.clone(), TokenBucket::new(10_000, 10_000.0 / 60.0))
        .name("tokens")
        .build()
        .expect("valid");
    // Towards the upstream, shared by every gateway server: 20 a second,
    // waiting up to 2 s for a turn; its 429s pause every server.
    let upstream_limit = Limiter::builder(
        store,
        Gcra::new(20, Duration::from_secs(1))
            .try_burst(5)
            .expect("valid"),
    )
    .name("upstream")
    .build()
    .expect("valid");
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let client = ServiceBuilder::new()
        .layer(
            OutboundLimitLayer::new(upstream_limit, "model-provider")
                .max_wait(Duration::from_secs(2)),
        )
        .map_response(|res: Response<_>| res.map(Body::new))
        .service(client);
    let gw = Gateway {
        client: BoxCloneSyncService::new(client),
        upstream: upstream_url,
    };
    Router::new()
        .route("/v1/complete", post(complete))
        .with_state(gw)
        // Inner: tokens, estimated then settled with what the answer says.
        .layer(
            RateLimitLayer::new(tokens, api_key())
                .cost(ESTIMATE)
                .actual_cost(ActualCost::Extension)
                .headers(floodgate::headers::HeaderStyle::None),
        )
        // Outer: calls (its headers are the ones the client sees).
        .layer(RateLimitLayer::new(calls, api_key()))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = store_from_env()?;
    let backend = if std::env::var("REDIS_URL").is_ok() {
        "Redis"
    } else {
        "in-memory"
    };
    let up = Arc::new(Upstream::default());
    let up_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let upstream_url = format!("http://{}", up_listener.local_addr()?);
    tokio::spawn(axum::serve(up_listener, upstream(up.clone())).into_future());

    let serve = std::env::var("SERVE").is_ok();
    let addr = std::env::var("ADDR").unwrap_or_else(|_| {
        if serve {
            "127.0.0.1:3000"
        } else {
            "127.0.0.1:0"
        }
        .into()
    });
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let base = format!("http://{}", listener.local_addr()?);
    let app = gateway(store, upstream_url);
    let server = tokio::spawn(axum::serve(listener, app).into_future());
    println!(
        "LLM gateway on {base} ({backend} store): 60 calls and 10 000 tokens a minute per API key"
    );
    if serve {
        server.await??;
        return Ok(());
    }
    let client = reqwest::Client::new();
    let long = "word ".repeat(150);
    // alice: a short call (160 tokens, 340 of its estimate given back),
    // two long ones (9 100 tokens each: the second leaves 8 360 in debt),
    // then a short one, refused until the debt is paid back; bob is apart.
    let calls = [
        ("alice", "Hello"),
        ("alice", long.as_str()),
        ("alice", long.as_str()),
        ("alice", "Hello again"),
        ("bob", "Hi there"),
    ];
    for (key, prompt) in calls {
        let res = client
            .post(format!("{base}/v1/complete"))
            .header("x-api-key", key)
            .body(prompt.to_owned())
            .send()
            .await?;
        let header = |name: &str| {
            let value = res.headers().get(name).and_then(|v| v.to_str().ok());
            value.unwrap_or("-").to_owned()
        };
        let (used, retry) = (header("x-tokens-used"), header("retry-after"));
        let words = prompt.split_whitespace().count();
        println!(
            "  {key:<6} {words:>4} words  {}  tokens used {used:>5}  retry-after {retry}",
            res.status()
        );
    }
    println!(
        "upstream: {} served, {} refused",
        up.served.load(Ordering::Relaxed),
        up.refused.load(Ordering::Relaxed)
    );
    Ok(())
}
