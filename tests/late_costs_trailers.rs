//! A cost a streamed response says in a trailer (`ActualCost::Trailer`),
//! over real HTTP/2 and HTTP/1.1 on the memory store and a real Redis: the
//! settlement waits for the body's end, the trailer reaches the client
//! untouched, and a body that ends without the trailer, or a client gone
//! mid-stream, keeps the estimate.

mod common;

use axum::body::Body;
use axum::extract::Request;
use axum::routing::get;
use axum::{Extension, Router};
use bytes::Bytes;
use common::http::{on_both_stores, serve};
use common::late_costs::{settles_at, tokens};
use common::T0;
use floodgate::algorithm::TokenBucket;
use floodgate::clock::ManualClock;
use floodgate::key::Header;
use floodgate::layer::{ActualCost, RateLimitLayer};
use floodgate::Limiter;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::{Body as _, Frame};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::convert::Infallible;
use std::future::Future as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::oneshot;

const TOKENS: HeaderName = HeaderName::from_static("x-tokens-used");

/// A streamed answer: two chunks, then (when it has one) a trailer, or
/// never an end (`stall`); with a `gate`, the trailer waits for it.
struct Streamed {
    chunks: Vec<Bytes>,
    trailer: Option<String>,
    stall: bool,
    gate: Option<oneshot::Receiver<()>>,
}

/// The gate the next `?gated` answer waits on before its trailer.
type Gate = Arc<Mutex<Option<oneshot::Receiver<()>>>>;

impl http_body::Body for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if !self.chunks.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(self.chunks.remove(0)))));
        }
        if self.stall {
            return Poll::Pending;
        }
        if let Some(gate) = &mut self.gate {
            let _ = std::task::ready!(Pin::new(gate).poll(cx));
            self.gate = None;
        }
        Poll::Ready(self.trailer.take().map(|used| {
            let mut trailers = HeaderMap::new();
            trailers.insert(TOKENS, HeaderValue::from_str(&used).unwrap());
            Ok(Frame::trailers(trailers))
        }))
    }
}

/// `?trailer=N`: N tokens said in the trailer; `?head=N`: in the head
/// (as a trailers-only gRPC answer does); `?stall`: a body that never ends;
/// nothing: no trailer; `&gated`: the trailer waits for the test's gate.
async fn llm(Extension(gate): Extension<Gate>, req: Request) -> http::Response<Body> {
    let query = req.uri().query().unwrap_or("").to_owned();
    let value = |name: &str| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_owned)
    };
    let body = Streamed {
        chunks: vec![Bytes::from_static(b"o"), Bytes::from_static(b"k")],
        trailer: value("trailer"),
        stall: query == "stall",
        gate: if query.contains("gated") {
            gate.lock().unwrap().take()
        } else {
            None
        },
    };
    let mut res = http::Response::new(Body::new(body));
    if let Some(used) = value("head") {
        res.headers_mut()
            .insert(TOKENS, HeaderValue::from_str(&used).unwrap());
    }
    res
}

/// The layer: 100 tokens estimated a request, the trailer settling it.
fn layer(limiter: Limiter<TokenBucket>) -> RateLimitLayer<Header, TokenBucket> {
    RateLimitLayer::new(limiter, Header::try_new("x-api-key").unwrap())
        .cost(100)
        .actual_cost(ActualCost::Trailer(TOKENS))
}

async fn app(limiter: Limiter<TokenBucket>) -> String {
    app_gated(limiter, Gate::default()).await
}

async fn app_gated(limiter: Limiter<TokenBucket>, gate: Gate) -> String {
    let routes = Router::new().route("/", get(llm)).layer(layer(limiter));
    serve(routes.layer(Extension(gate))).await
}

/// The same, counting only successful answers: a request is only tried
/// when admitted, and charged once its response says it counts.
async fn app_counting_successes(limiter: Limiter<TokenBucket>) -> String {
    let counting = layer(limiter).count_only_when(|s: http::StatusCode| s.is_success());
    let routes = Router::new().route("/", get(llm)).layer(counting);
    serve(routes.layer(Extension(Gate::default()))).await
}

/// Ask `base` for a body that never ends, read its first chunk and go.
async fn leave_mid_stream(base: &str, key: &str) {
    let h2 = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<String>();
    let req = http::Request::get(format!("{base}/?stall"))
        .header("x-api-key", key)
        .body(String::new())
        .unwrap();
    let mut body = h2.request(req).await.unwrap().into_body();
    let first = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
    assert!(first.unwrap().unwrap().is_data());
    drop(body);
    drop(h2);
}

/// The body's data and trailers, as an HTTP/2 client reads them.
async fn read_all<B>(mut body: B) -> (Vec<u8>, Option<HeaderMap>)
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    let (mut data, mut trailers) = (Vec::new(), None);
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        match frame.unwrap().into_data() {
            Ok(d) => data.extend_from_slice(&d),
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    (data, trailers)
}

#[tokio::test]
async fn a_trailer_settles_the_cost_when_the_body_ends() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(T0);
        let limiter = tokens(store, &clock);
        let (open, gate) = oneshot::channel();
        let base = app_gated(limiter.clone(), Arc::new(Mutex::new(Some(gate)))).await;
        let h2 = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http::<String>();
        let get = |query: &str| {
            let req = http::Request::get(format!("{base}/?{query}"))
                .header("x-api-key", "ana")
                .body(String::new())
                .unwrap();
            h2.request(req)
        };
        // Estimated 100 and charged at once: the head says nothing, and the
        // body holds its trailer until the gate opens.
        let res = get("trailer=30&gated").await.unwrap();
        assert_eq!(res.status(), 200);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(limiter.peek("ana").await.unwrap().remaining(), 900);
        // The body ends with its trailer, which the client gets as sent:
        // 70 back, 970 left.
        open.send(()).unwrap();
        let (data, trailers) = read_all(res.into_body()).await;
        assert_eq!(data, b"ok");
        assert_eq!(trailers.unwrap()[&TOKENS], "30");
        settles_at(&limiter, "ana", 970).await;
        // More than estimated: 150 more, 720 left.
        read_all(get("trailer=250").await.unwrap().into_body()).await;
        settles_at(&limiter, "ana", 720).await;
        // Said in the head: settled from it, 700 left.
        read_all(get("head=20").await.unwrap().into_body()).await;
        settles_at(&limiter, "ana", 700).await;
        // No trailer, or nonsense in it: the estimate stays.
        read_all(get("").await.unwrap().into_body()).await;
        settles_at(&limiter, "ana", 600).await;
        read_all(get("trailer=lots").await.unwrap().into_body()).await;
        settles_at(&limiter, "ana", 500).await;
    })
    .await;
}

#[tokio::test]
async fn over_http1_the_body_is_settled_as_well() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(T0);
        let limiter = tokens(store, &clock);
        let base = app(limiter.clone()).await;
        // reqwest asks for no trailers: the server still reads them from
        // the body it sends.
        let res = reqwest::Client::new()
            .get(format!("{base}/?trailer=10"))
            .header("x-api-key", "bo")
            .send()
            .await
            .unwrap();
        assert_eq!(res.text().await.unwrap(), "ok");
        settles_at(&limiter, "bo", 990).await;
    })
    .await;
}

#[tokio::test]
async fn a_client_gone_mid_stream_keeps_the_estimate() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(T0);
        let limiter = tokens(store, &clock);
        // Charged at admission: nothing given back.
        let base = app(limiter.clone()).await;
        leave_mid_stream(&base, "cy").await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(limiter.peek("cy").await.unwrap().remaining(), 900);
        // Only tried at admission, and counting: the estimate is charged
        // when the body is dropped.
        let base = app_counting_successes(limiter.clone()).await;
        leave_mid_stream(&base, "di").await;
        settles_at(&limiter, "di", 900).await;
        // The same layer, a body that ends with its trailer: what it says.
        let res = reqwest::Client::new()
            .get(format!("{base}/?trailer=40"))
            .header("x-api-key", "ed")
            .send()
            .await
            .unwrap();
        assert_eq!(res.text().await.unwrap(), "ok");
        settles_at(&limiter, "ed", 960).await;
    })
    .await;
}
