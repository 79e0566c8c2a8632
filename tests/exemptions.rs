//! Exemptions (allow and deny lists) over real HTTP on both stores, limits
//! in shadow mode, and the near-limit count: what the client gets, what the
//! store is asked (Redis' own command counts), and what the metrics say
//! (rendered by the Prometheus exporter, installed once for this binary).
//! gRPC's answers are in `layer_grpc.rs`.

mod common;

use axum::{routing::get, Router};
use common::{http::serve, RedisServer};
use floodgate::algorithm::{FixedWindow, Limits};
use floodgate::clock::ManualClock;
use floodgate::key::{Header, IpNet};
use floodgate::layer::RateLimitLayer;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Exemptions, Limiter, Reason};
use http::HeaderName;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use reqwest::StatusCode;
use serde_json::Value;
use std::sync::OnceLock;
use std::time::Duration;

/// The recorder of this test binary: installed before any limiter is built.
fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| PrometheusBuilder::new().install_recorder().unwrap())
}

/// The value of the one metric line that starts with `start`, 0 if none.
fn metric(start: &str) -> f64 {
    let text = recorder().render();
    text.lines()
        .find(|l| l.starts_with(start))
        .map_or(0.0, |l| l.rsplit(' ').next().unwrap().parse().unwrap())
}

fn decisions(limiter: &str, outcome: &str, reason: &str) -> f64 {
    metric(&format!(
        r#"floodgate_decisions_total{{limiter="{limiter}",outcome="{outcome}",reason="{reason}"}}"#
    ))
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// Decisions Redis was asked for: every way floodgate calls its code.
fn redis_calls(redis: &RedisServer) -> u64 {
    ["fcall", "evalsha", "eval"]
        .iter()
        .map(|c| redis.command_calls(c).unwrap_or(0))
        .sum()
}

/// `test` on a memory store (no call counts), then on a fresh Redis (its
/// decisions counted by the server).
async fn on_both_stores<F, Fut>(test: F)
where
    F: Fn(Store, &'static str, Option<RedisServer>) -> Fut,
    Fut: std::future::Future<Output = Option<RedisServer>>,
{
    test(MemoryStore::new().into(), "memory", None).await;
    let redis = RedisServer::start();
    let store = RedisStore::from_url(&redis.url()).unwrap().into();
    test(store, "redis", Some(redis)).await;
}

/// An app answering "ok" behind `limiter`, keyed by `x-client`, served
/// over TCP: its base URL.
async fn serve_by_client<A: floodgate::algorithm::Algorithm>(limiter: Limiter<A>) -> String {
    let key = Header::new(HeaderName::from_static("x-client"));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, key));
    serve(app).await
}

async fn get_as(client: &reqwest::Client, base: &str, who: &str) -> reqwest::Response {
    client
        .get(base)
        .header("x-client", who)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn http_allow_and_deny_by_key_and_by_ipv4_and_ipv6_network_changed_at_run_time() {
    recorder();
    on_both_stores(|store, label, redis| async move {
        let name = format!("exempt-{label}");
        let exemptions = Exemptions::new();
        let limiter = Limiter::builder(store, FixedWindow::new(1, Duration::from_secs(60)))
            .name(name.clone())
            .clock(ManualClock::new(1_000))
            .exemptions(exemptions.clone())
            .build()
            .unwrap();
        let base = serve_by_client(limiter).await;
        let client = reqwest::Client::new();

        exemptions.allow_network(net("10.0.0.0/8"));
        exemptions.allow_network(net("2001:db8:a::/48"));
        exemptions.allow_key("monitor");
        exemptions.deny_key("mallory");
        exemptions.deny_network(net("192.0.2.0/24"));
        exemptions.deny_network(net("2001:db8:bad::/48"));

        let calls = || redis.as_ref().map(redis_calls);
        let before = calls();
        // Exempt: never limited (the limit is 1), no rate-limit fields.
        for who in ["10.1.2.3", "2001:db8:a::5", "monitor"] {
            for _ in 0..3 {
                let res = get_as(&client, &base, who).await;
                assert_eq!(res.status(), StatusCode::OK, "{label} {who}");
                for field in ["ratelimit", "ratelimit-policy", "retry-after"] {
                    assert!(res.headers().get(field).is_none(), "{label} {who}: {field}");
                }
                assert_eq!(res.text().await.unwrap(), "ok");
            }
        }
        // Blocked: 403 with a problem+json body, whatever the limit.
        for who in ["mallory", "192.0.2.9", "2001:db8:bad::1"] {
            let res = get_as(&client, &base, who).await;
            assert_eq!(res.status(), StatusCode::FORBIDDEN, "{label} {who}");
            assert_eq!(res.headers()["content-type"], "application/problem+json");
            assert!(res.headers().get("retry-after").is_none());
            assert!(res.headers().get("ratelimit").is_none());
            let body: Value = res.json().await.unwrap();
            assert_eq!(body["status"], 403, "{label} {who}");
        }
        // Neither exempt nor blocked request asked the store.
        assert_eq!(
            calls(),
            before,
            "{label}: exempt and blocked requests asked Redis"
        );
        assert_eq!(decisions(&name, "allowed", "exempt"), 9.0, "{label}");
        assert_eq!(decisions(&name, "denied", "blocked"), 3.0, "{label}");

        // A key on no list is limited as before, through the store.
        let res = get_as(&client, &base, "198.51.100.1").await;
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.headers().get("ratelimit").is_some());
        let res = get_as(&client, &base, "198.51.100.1").await;
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{label}");
        // (The first call may be two: the library is loaded on first use.)
        if let Some(before) = before {
            assert!(calls().unwrap() >= before + 2, "{label}");
        }

        // Changed at run time, nothing rebuilt: the next request sees it.
        exemptions.allow_key("198.51.100.1");
        assert_eq!(
            get_as(&client, &base, "198.51.100.1").await.status(),
            StatusCode::OK
        );
        assert!(exemptions.remove_allowed_network(net("10.0.0.0/8")));
        assert!(exemptions.remove_allowed_network(net("2001:db8:a::/48")));
        for who in ["10.1.2.3", "2001:db8:a::5"] {
            let res = get_as(&client, &base, who).await;
            assert_eq!(res.status(), StatusCode::OK, "{label} {who}");
            assert!(res.headers().get("ratelimit").is_some(), "{label} {who}");
            let res = get_as(&client, &base, who).await;
            assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "{label} {who}");
        }
        assert!(exemptions.remove_denied_key("mallory"));
        assert!(exemptions.remove_denied_network(net("2001:db8:bad::/48")));
        for who in ["mallory", "2001:db8:bad::1"] {
            assert_eq!(
                get_as(&client, &base, who).await.status(),
                StatusCode::OK,
                "{label} {who}"
            );
        }
        assert_eq!(
            get_as(&client, &base, "192.0.2.200").await.status(),
            StatusCode::FORBIDDEN
        );
        exemptions.clear();
        assert_eq!(
            get_as(&client, &base, "192.0.2.200").await.status(),
            StatusCode::OK
        );
        redis
    })
    .await;
}

#[tokio::test]
async fn direct_callers_get_the_exemptions_too() {
    recorder();
    on_both_stores(|store, label, redis| async move {
        let exemptions = Exemptions::new();
        exemptions.deny_network(net("2001:db8::/32"));
        exemptions.allow_key("ana");
        let limiter = Limiter::builder(store, FixedWindow::new(1, Duration::from_secs(60)))
            .name(format!("direct-{label}"))
            .clock(ManualClock::new(0))
            .exemptions(exemptions.clone())
            .build()
            .unwrap();
        let before = redis.as_ref().map(redis_calls);
        let d = limiter.check("ana", 5).await.unwrap();
        assert_eq!(
            (d.reason(), d.allowed(), d.remaining()),
            (Reason::Exempt, true, u64::MAX)
        );
        let all = limiter.check_all("ana", 1).await.unwrap();
        assert_eq!(all.each()[0].decision().reason(), Reason::Exempt);
        // A grouped IPv6 key (a /64) inside the denied /32.
        let d = limiter.check("2001:db8:1:2::/64", 1).await.unwrap();
        assert_eq!(
            (d.reason(), d.denied(), d.retry_after()),
            (Reason::Blocked, true, None)
        );
        assert_eq!(limiter.peek("ana").await.unwrap().reason(), Reason::Exempt);
        assert_eq!(redis.as_ref().map(redis_calls), before, "{label}");
        // The handle the limiter keeps is the same lists.
        limiter.exemptions().unwrap().remove_allowed_key("ana");
        assert_eq!(limiter.check("ana", 1).await.unwrap().remaining(), 0);
        // A refund reaches the store even for a listed key: it gives back
        // what was charged before the key was listed.
        exemptions.allow_key("ana");
        let d = limiter.refund("ana", 1).await.unwrap();
        assert_eq!(
            (d.reason(), d.remaining()),
            (Reason::WithinLimit, 1),
            "{label}"
        );
        exemptions.remove_allowed_key("ana");
        assert!(limiter.check("ana", 1).await.unwrap().allowed(), "{label}");
        redis
    })
    .await;
}

#[tokio::test]
async fn a_limit_in_shadow_mode_decides_and_is_counted_but_never_denies() {
    recorder();
    on_both_stores(|store, label, redis| async move {
        let name = format!("shadow-{label}");
        let limits = Limits::new("minute", FixedWindow::new(6, Duration::from_secs(60)))
            .try_with("strict", FixedWindow::new(2, Duration::from_secs(60)))
            .unwrap()
            .shadow("strict")
            .unwrap();
        assert!(limits.is_shadowed("strict") && !limits.is_shadowed("minute"));
        let limiter = Limiter::builder(store, limits)
            .name(name.clone())
            .clock(ManualClock::new(0))
            .build()
            .unwrap();
        // "strict" admits 2, then would deny: the requests are admitted,
        // and charged to "minute".
        for i in 0..5 {
            let all = limiter.check_all("ana", 1).await.unwrap();
            assert!(all.overall().allowed(), "{label} {i}");
            assert_eq!(all.overall().remaining(), 6 - i - 1, "{label} {i}");
            let strict = all.each()[1].decision();
            let want = if i < 2 {
                Reason::WithinLimit
            } else {
                Reason::OverLimit
            };
            assert_eq!(strict.reason(), want, "{label} {i}");
        }
        // Its state changed as if enforced: 2 charged, nothing for denials.
        let now = limiter.check_all("ana", 0).await.unwrap();
        assert_eq!(now.each()[1].decision().remaining(), 0);
        assert_eq!(now.each()[0].decision().remaining(), 1);
        // The enforced limit still denies, and then charges nothing.
        assert!(limiter.check("ana", 1).await.unwrap().allowed());
        let d = limiter.check("ana", 1).await.unwrap();
        assert_eq!(d.reason(), Reason::OverLimit, "{label}");
        assert_eq!(
            metric(&format!(
                r#"floodgate_shadow_denials_total{{limiter="{name}",limit="strict"}}"#
            )),
            // Requests 3 to 7 (the 7th, denied by "minute", counts too).
            5.0,
            "{label}"
        );
        redis
    })
    .await;
}

#[tokio::test]
async fn every_limit_in_shadow_mode_admits_everything() {
    recorder();
    on_both_stores(|store, label, redis| async move {
        let limits = Limits::new("only", FixedWindow::new(1, Duration::from_secs(60)))
            .shadow("only")
            .unwrap();
        let limiter = Limiter::builder(store, limits)
            .name(format!("all-shadow-{label}"))
            .clock(ManualClock::new(0))
            .build()
            .unwrap();
        for _ in 0..3 {
            let d = limiter.check("bo", 1).await.unwrap();
            assert!(d.allowed(), "{label}");
            assert_eq!((d.reason(), d.remaining()), (Reason::WithinLimit, 0));
        }
        assert!(
            Limits::new("a", FixedWindow::new(1, Duration::from_secs(1)))
                .shadow("b")
                .is_err_and(|e| e.field() == "name")
        );
        redis
    })
    .await;
}

#[tokio::test]
async fn the_layer_reports_no_limit_in_shadow_mode() {
    recorder();
    let limits = Limits::new("minute", FixedWindow::new(5, Duration::from_secs(60)))
        .try_with("strict", FixedWindow::new(1, Duration::from_secs(60)))
        .unwrap()
        .shadow("strict")
        .unwrap();
    let limiter = Limiter::builder(MemoryStore::new(), limits)
        .name("shadow-http")
        .clock(ManualClock::new(0))
        .build()
        .unwrap();
    let base = serve_by_client(limiter).await;
    let client = reqwest::Client::new();
    for remaining in [4, 3, 2] {
        let res = get_as(&client, &base, "ana").await;
        assert_eq!(res.status(), StatusCode::OK);
        let policy = res.headers()["ratelimit-policy"].to_str().unwrap();
        assert!(!policy.contains("strict"), "{policy}");
        let field = res.headers()["ratelimit"].to_str().unwrap().to_owned();
        assert_eq!(field, format!(r#""minute";r={remaining};t=60"#));
    }

    // A limiter whose one limit is in shadow mode: served, no fields.
    let limits = Limits::new("strict", FixedWindow::new(1, Duration::from_secs(60)))
        .shadow("strict")
        .unwrap();
    let limiter = Limiter::builder(MemoryStore::new(), limits)
        .name("shadow-http-one")
        .clock(ManualClock::new(0))
        .build()
        .unwrap();
    let base = serve_by_client(limiter).await;
    for _ in 0..3 {
        let res = get_as(&client, &base, "ana").await;
        assert_eq!(res.status(), StatusCode::OK);
        assert!(res.headers().get("ratelimit").is_none());
        assert!(res.headers().get("ratelimit-policy").is_none());
    }
}

#[tokio::test]
async fn admissions_that_leave_less_than_a_fifth_are_counted_near_limit() {
    recorder();
    on_both_stores(|store, label, redis| async move {
        let name = format!("near-{label}");
        let limiter = Limiter::builder(store, FixedWindow::new(10, Duration::from_secs(60)))
            .name(name.clone())
            .clock(ManualClock::new(0))
            .build()
            .unwrap();
        let near = || {
            metric(&format!(
                r#"floodgate_near_limit_total{{limiter="{name}"}}"#
            ))
        };
        // Remaining after each: 9, 8, ..., 0; under 2 (a fifth of 10) twice.
        for i in 0..10 {
            assert!(limiter.check("k", 1).await.unwrap().allowed());
            assert_eq!(
                near(),
                if i < 8 { 0.0 } else { f64::from(i - 7) },
                "{label} {i}"
            );
        }
        // A denial is not an admission.
        assert!(limiter.check("k", 1).await.unwrap().denied());
        assert_eq!(near(), 2.0, "{label}");
        redis
    })
    .await;
}

#[tokio::test]
async fn a_concurrency_limiter_takes_exemptions_too() {
    recorder();
    on_both_stores(|store, label, redis| async move {
        let exemptions = Exemptions::new();
        exemptions.allow_key("batch-job");
        exemptions.deny_network(net("203.0.113.0/24"));
        let limiter = floodgate::ConcurrencyLimiter::builder(store, 1)
            .name(format!("in-flight-{label}"))
            .exemptions(exemptions.clone())
            .build()
            .unwrap();
        let before = redis.as_ref().map(redis_calls);
        // Exempt: any number in flight, none holding a slot.
        let a = limiter.acquire("batch-job").await.unwrap().unwrap();
        let b = limiter.acquire("batch-job").await.unwrap().unwrap();
        assert_eq!(a.decision().reason(), Reason::Exempt);
        drop((a, b));
        let d = limiter.acquire("203.0.113.9").await.unwrap().unwrap_err();
        assert_eq!(d.reason(), Reason::Blocked);
        assert_eq!(redis.as_ref().map(redis_calls), before, "{label}");
        // Off the list: one in flight at most.
        exemptions.remove_allowed_key("batch-job");
        let held = limiter.acquire("batch-job").await.unwrap().unwrap();
        assert!(
            limiter.acquire("batch-job").await.unwrap().is_err(),
            "{label}"
        );
        drop(held);
        redis
    })
    .await;
}

#[test]
fn hot_keys_refuse_a_limit_in_shadow_mode() {
    let limits = Limits::new("minute", FixedWindow::new(100, Duration::from_secs(60)))
        .try_with("hour", FixedWindow::new(1_000, Duration::from_secs(3_600)))
        .unwrap()
        .shadow("hour")
        .unwrap();
    let err = Limiter::builder(MemoryStore::new(), limits)
        .hot_keys(floodgate::HotKeys::new(4))
        .build()
        .unwrap_err();
    assert_eq!(err.field(), "hot_keys");
    assert!(err.to_string().contains("shadow mode"), "{err}");
}
