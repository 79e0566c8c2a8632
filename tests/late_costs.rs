//! Costs known late, over real HTTP on the memory store and a real Redis:
//! a request is charged an estimate, and its response says what it cost
//! (a header, or a `Cost` in its extensions); the difference is given back
//! or charged, into debt when the key has no room left. A response that
//! says nothing, says nonsense, or is dropped before its head keeps the
//! estimate. `Limiter::debit` and `Limiter::settle` directly too.

mod common;

use axum::extract::Request;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Extension, Router};
use common::http::{eventually, on_both_stores, serve};
use common::late_costs::{settles_at, tokens};
use common::T0;
use floodgate::algorithm::{FixedWindow, TokenBucket};
use floodgate::clock::ManualClock;
use floodgate::key::Header;
use floodgate::layer::{ActualCost, Cost, RateLimitLayer};
use floodgate::Limiter;
use http::HeaderName;
use std::time::Duration;

/// Answers with the tokens the query asks for (`?used=N`) as the header
/// `x-tokens-used` and as a `Cost` extension; `?used=forever` never answers.
async fn llm(req: Request) -> axum::response::Response {
    let used = req
        .uri()
        .query()
        .and_then(|q| q.strip_prefix("used="))
        .unwrap_or("");
    if used == "forever" {
        std::future::pending::<()>().await;
    }
    let cost = used.parse().map(Cost).ok();
    let mut res = ([("x-tokens-used", used.to_owned())], "ok").into_response();
    if let Some(cost) = cost {
        res = (Extension(cost), res).into_response();
    }
    res
}

async fn app_with(limiter: Limiter<TokenBucket>, source: ActualCost) -> String {
    let layer = RateLimitLayer::new(limiter, Header::try_new("x-api-key").unwrap())
        .cost(100)
        .actual_cost(source);
    serve(Router::new().route("/", get(llm)).layer(layer)).await
}

fn header_source() -> ActualCost {
    ActualCost::Header(HeaderName::from_static("x-tokens-used"))
}

#[tokio::test]
async fn a_smaller_actual_cost_gives_the_rest_back_and_a_larger_one_is_charged() {
    for source in [header_source(), ActualCost::Extension] {
        on_both_stores(|store| {
            let source = source.clone();
            async move {
                let clock = ManualClock::new(T0);
                let limiter = tokens(store, &clock);
                let base = app_with(limiter.clone(), source).await;
                let client = reqwest::Client::new();
                let get = |used: &str| {
                    client
                        .get(format!("{base}/?used={used}"))
                        .header("x-api-key", "ana")
                        .send()
                };
                // Estimated 100, used 30: 970 left.
                assert_eq!(get("30").await.unwrap().status(), 200);
                settles_at(&limiter, "ana", 970).await;
                // Estimated 100, used 250: 150 more, 720 left.
                assert_eq!(get("250").await.unwrap().status(), 200);
                settles_at(&limiter, "ana", 720).await;
                // Says nothing, or nonsense: the estimate stays.
                assert_eq!(get("").await.unwrap().status(), 200);
                settles_at(&limiter, "ana", 620).await;
                assert_eq!(get("lots").await.unwrap().status(), 200);
                settles_at(&limiter, "ana", 520).await;
            }
        })
        .await;
    }
}

#[tokio::test]
async fn a_cost_beyond_what_remains_is_a_debt_paid_back_by_time() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(T0);
        let limiter = tokens(store, &clock);
        let base = app_with(limiter.clone(), header_source()).await;
        let client = reqwest::Client::new();
        let get = |used: &str| {
            client
                .get(format!("{base}/?used={used}"))
                .header("x-api-key", "bo")
                .send()
        };
        // Estimated 100, used 1 500: 500 tokens of debt (30 s of refill).
        assert_eq!(get("1500").await.unwrap().status(), 200);
        eventually(async || {
            limiter.peek("bo").await.unwrap().reset_after() == Duration::from_secs(90)
        })
        .await;
        // Refused while in debt, for as long as the debt and the next
        // request's estimate take to refill: 30 s + 6 s.
        let refused = get("1").await.unwrap();
        assert_eq!(refused.status(), 429);
        assert_eq!(refused.headers()["retry-after"], "36");
        clock.advance(Duration::from_secs(35));
        assert_eq!(get("1").await.unwrap().status(), 429);
        clock.advance(Duration::from_secs(1));
        assert_eq!(get("100").await.unwrap().status(), 200);
    })
    .await;
}

#[tokio::test]
async fn a_response_dropped_before_its_head_keeps_its_estimate() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(T0);
        let limiter = tokens(store, &clock);
        let base = app_with(limiter.clone(), header_source()).await;
        let impatient = reqwest::Client::builder()
            .timeout(Duration::from_millis(100))
            .build()
            .unwrap();
        let gone = impatient
            .get(format!("{base}/?used=forever"))
            .header("x-api-key", "cy")
            .send()
            .await;
        assert!(gone.unwrap_err().is_timeout());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(limiter.peek("cy").await.unwrap().remaining(), 900);
    })
    .await;
}

#[tokio::test]
async fn debit_and_settle_without_a_layer() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(T0);
        let limiter = tokens(store.clone(), &clock);
        // Estimated 200 by a check, used 50: 150 back.
        assert!(limiter.check("di", 200).await.unwrap().allowed());
        assert_eq!(
            limiter.settle("di", 200, 50).await.unwrap().remaining(),
            950
        );
        // Used 5 000 against a limit of 1 000: in parts, all of it kept:
        // 4 050 tokens of debt after the 950 left, 243 s of refill.
        let d = limiter.settle("di", 0, 5_000).await.unwrap();
        assert!(d.allowed() && d.remaining() == 0, "{d:?}");
        assert_eq!(d.reset_after(), Duration::from_secs(303));
        // A window is charged up to its limit, and full until it ends.
        let window = Limiter::builder(store, FixedWindow::new(10, Duration::from_secs(60)))
            .clock(clock.clone())
            .build()
            .unwrap();
        assert_eq!(window.debit("di", 25).await.unwrap().remaining(), 0);
        assert!(window.check("di", 1).await.unwrap().denied());
        clock.advance(Duration::from_secs(60));
        assert_eq!(window.peek("di").await.unwrap().remaining(), 10);
        // A debit is never refused, and a huge one is bounded (64 parts).
        let huge = limiter.debit("huge", u64::MAX).await.unwrap();
        assert_eq!(huge.reset_after(), Duration::from_secs(3840));
    })
    .await;
}
