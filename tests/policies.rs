//! Policies people ask for, over real Redis and real HTTP: several limits on
//! one key (all or nothing), several keys per request (refund what a later
//! denial made unnecessary), quotas per request (tiers), counting by the
//! response, shadow mode.

mod common;

use common::http::{eventually, login, on_both_stores, serve};

use axum::{http::StatusCode, routing::get, Router};
use common::{sf, RedisServer};
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::key::{Global, Header, PeerIp};
use floodgate::layer::RateLimitLayer;
use floodgate::store::{MemoryStore, RedisStore};
use floodgate::Limiter;
use std::time::Duration;

const MIN: Duration = Duration::from_secs(60);

fn items(res: &reqwest::Response, name: &str) -> Vec<sf::Item> {
    sf::parse_list(res.headers()[name].to_str().unwrap()).unwrap()
}

#[tokio::test]
async fn several_limits_charge_all_or_nothing() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(0);
        let limits = Limits::new("second", FixedWindow::new(3, Duration::from_secs(1)))
            .try_with("minute", FixedWindow::new(5, MIN))
            .unwrap();
        let limiter = Limiter::builder(store, limits)
            .clock(clock.clone())
            .build()
            .unwrap();
        for _ in 0..3 {
            assert!(limiter.check("ana", 1).await.unwrap().allowed());
        }
        // The 4th is denied by `second`, so `minute` is not charged either.
        let d = limiter.check_all("ana", 1).await.unwrap();
        assert!(!d.overall().allowed());
        assert_eq!(d.overall().retry_after(), Some(Duration::from_secs(1)));
        let minute = d.each().iter().find(|p| p.name() == "minute").unwrap();
        assert!(minute.decision().allowed(), "minute alone would admit");
        assert_eq!(
            limiter.check_all("ana", 0).await.unwrap().each()[1]
                .decision()
                .remaining(),
            2
        );
        clock.set(1000);
        assert!(limiter.check("ana", 1).await.unwrap().allowed());
        assert!(limiter.check("ana", 1).await.unwrap().allowed());
        // Now `minute` is spent: denied until the minute ends.
        let d = limiter.check("ana", 1).await.unwrap();
        assert!(!d.allowed());
        assert_eq!(d.retry_after(), Some(Duration::from_secs(59)));
        // A cost above one limit can never fit, whatever the other says.
        assert_eq!(limiter.check("bob", 4).await.unwrap().retry_after(), None);
    })
    .await;
}

#[tokio::test]
async fn several_limits_stay_all_or_nothing_under_concurrency() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(0);
    let limits = Limits::new("wide", FixedWindow::new(50, MIN))
        .try_with("narrow", SlidingLog::new(30, MIN))
        .unwrap();
    // Four app servers, each with its own store and connections.
    let limiters: Vec<_> = (0..4)
        .map(|_| {
            let store = RedisStore::from_url(&redis.url()).unwrap();
            // A store slower than the default 100 ms on a loaded machine
            // is an error here, never a silent fail-open admission.
            Limiter::builder(store, limits.clone())
                .clock(clock.clone())
                .timeout(Duration::from_secs(10))
                .on_store_failure(floodgate::failure::FailurePolicy::ReturnError)
                .build()
                .unwrap()
        })
        .collect();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let l = limiters[i % 4].clone();
        tasks.push(tokio::spawn(async move {
            l.check("hot", 1).await.unwrap().allowed()
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap());
    }
    assert_eq!(admitted, 30);
    // Both limits hold exactly the admitted requests: no partial charge.
    let state = limiters[0].check_all("hot", 0).await.unwrap();
    assert_eq!(state.each()[0].decision().remaining(), 20, "wide");
    assert_eq!(state.each()[1].decision().remaining(), 0, "narrow");
}

#[tokio::test]
async fn headers_list_every_policy_and_report_the_most_restrictive() {
    on_both_stores(|store| async move {
        let limits = Limits::new("burst", Gcra::new(10, Duration::from_secs(1)))
            .try_with("hour", FixedWindow::new(3, Duration::from_secs(3600)))
            .unwrap();
        let limiter = Limiter::builder(store, limits).name("api").build().unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(limiter, PeerIp::new()));
        let base = serve(app).await;
        let res = reqwest::get(&base).await.unwrap();
        let policies = items(&res, "ratelimit-policy");
        let names: Vec<&str> = policies.iter().map(common::sf::Item::name).collect();
        assert_eq!(names, ["burst", "hour"]);
        assert_eq!((policies[1].int("q"), policies[1].int("w")), (3, 3600));
        let rl = items(&res, "ratelimit");
        assert_eq!(rl.len(), 1);
        assert_eq!((rl[0].name(), rl[0].int("r")), ("hour", 2));
        reqwest::get(&base).await.unwrap();
        reqwest::get(&base).await.unwrap();
        let res = reqwest::get(&base).await.unwrap();
        assert_eq!(res.status(), 429);
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["violated-policies"], serde_json::json!(["hour"]));
    })
    .await;
}

#[tokio::test]
async fn quotas_are_resolved_per_request_from_the_plan() {
    #[derive(Clone)]
    enum Tier {
        Free,
        Pro,
    }
    on_both_stores(|store| async move {
        let limiter = Limiter::new(store, FixedWindow::new(2, MIN));
        let layer =
            RateLimitLayer::new(limiter, Header::try_new("x-api-key").unwrap()).limits_for(|req| {
                match req.extensions().get::<Tier>()? {
                    Tier::Free => None,
                    Tier::Pro => Some(FixedWindow::new(5, MIN)),
                }
            });
        // A stand-in auth layer: keys starting with `pro-` are on the pro plan.
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer)
            .layer(axum::middleware::from_fn(
                |mut req: axum::extract::Request, next: axum::middleware::Next| async move {
                    let pro = req
                        .headers()
                        .get("x-api-key")
                        .is_some_and(|k| k.as_bytes().starts_with(b"pro-"));
                    req.extensions_mut()
                        .insert(if pro { Tier::Pro } else { Tier::Free });
                    next.run(req).await
                },
            ));
        let base = serve(app).await;
        let client = reqwest::Client::new();
        let count = |key: &'static str| {
            let (client, base) = (client.clone(), base.clone());
            async move {
                let mut ok = 0;
                for _ in 0..8 {
                    let res = client
                        .get(&base)
                        .header("x-api-key", key)
                        .send()
                        .await
                        .unwrap();
                    ok += usize::from(res.status() == 200);
                }
                ok
            }
        };
        assert_eq!(count("free-1").await, 2);
        assert_eq!(count("pro-1").await, 5);
        let res = client
            .get(&base)
            .header("x-api-key", "pro-2")
            .send()
            .await
            .unwrap();
        assert_eq!(items(&res, "ratelimit-policy")[0].int("q"), 5);
    })
    .await;
}

#[tokio::test]
async fn an_inner_denial_refunds_the_outer_charge() {
    on_both_stores(|store| async move {
        let global = Limiter::builder(store.clone(), FixedWindow::new(100, MIN))
            .name("global")
            .build()
            .unwrap();
        let per_key = Limiter::builder(store, FixedWindow::new(2, MIN))
            .name("per-key")
            .build()
            .unwrap();
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(RateLimitLayer::new(
                per_key,
                Header::try_new("x-api-key").unwrap(),
            ))
            .layer(RateLimitLayer::new(global.clone(), Global::new()));
        let base = serve(app).await;
        let client = reqwest::Client::new();
        let mut statuses = Vec::new();
        for _ in 0..5 {
            statuses.push(
                client
                    .get(&base)
                    .header("x-api-key", "ana")
                    .send()
                    .await
                    .unwrap()
                    .status(),
            );
        }
        assert_eq!(statuses, [200, 200, 429, 429, 429]);
        // The global limit keeps only the two admitted requests.
        eventually(async || global.check("global", 0).await.unwrap().remaining() == 98).await;
    })
    .await;
}

#[tokio::test]
async fn server_errors_are_refunded() {
    on_both_stores(|store| async move {
        let limiter = Limiter::new(store, FixedWindow::new(3, MIN));
        let app = Router::new()
            .route("/ok", get(|| async { "ok" }))
            .route("/fail", get(|| async { StatusCode::INTERNAL_SERVER_ERROR }))
            .layer(
                RateLimitLayer::new(limiter.clone(), Global::new())
                    .refund_when(|s: StatusCode| s.is_server_error()),
            );
        let base = serve(app).await;
        for _ in 0..5 {
            assert_eq!(
                reqwest::get(format!("{base}/fail")).await.unwrap().status(),
                500
            );
            eventually(async || limiter.check("global", 0).await.unwrap().remaining() == 3).await;
        }
        for _ in 0..3 {
            assert_eq!(
                reqwest::get(format!("{base}/ok")).await.unwrap().status(),
                200
            );
        }
        assert_eq!(
            reqwest::get(format!("{base}/ok")).await.unwrap().status(),
            429
        );
    })
    .await;
}

#[tokio::test]
async fn only_failed_logins_are_counted() {
    on_both_stores(|store| async move {
        let limiter = Limiter::new(store, SlidingLog::new(3, MIN));
        let app = Router::new().route("/login", login()).layer(
            RateLimitLayer::new(limiter.clone(), PeerIp::new())
                .count_only_when(|s: StatusCode| s == 401 || s == 403),
        );
        let base = serve(app).await;
        let login = |pw: &'static str| reqwest::get(format!("{base}/login?password={pw}"));
        // Successful logins cost nothing.
        for _ in 0..10 {
            assert_eq!(login("right").await.unwrap().status(), 200);
        }
        for i in 0..3 {
            assert_eq!(login("wrong").await.unwrap().status(), 401);
            eventually(async || limiter.check("127.0.0.1", 0).await.unwrap().remaining() == 2 - i)
                .await;
        }
        // Three failures: locked out, even with the right password.
        let res = login("right").await.unwrap();
        assert_eq!(res.status(), 429);
        assert!(res.headers().get("retry-after").is_some());
    })
    .await;
}

#[tokio::test]
async fn shadow_mode_counts_but_never_blocks() {
    let limiter = Limiter::new(MemoryStore::new(), FixedWindow::new(2, MIN));
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter.clone(), Global::new()).shadow(true));
    let base = serve(app).await;
    let statuses: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(reqwest::get(&base).await.unwrap().status().as_u16());
        }
        v
    };
    assert_eq!(statuses, [200; 4]);
    // Only the admitted two were charged; the shadow denials were not.
    assert_eq!(limiter.check("global", 0).await.unwrap().remaining(), 0);
}
