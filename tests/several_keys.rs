//! Several keys, one decision (`Limiter::check_keys`): a user key and a
//! global key, from four stores on one Redis and on a Redis Cluster.
//! Neither limit is ever exceeded; a refused request leaves no charge on
//! either key; on one server a decision is one Redis call, and a stalled
//! Redis costs one timeout.

mod common;

use common::cluster::RedisCluster;
use common::{RedisServer, T0};
use floodgate::algorithm::{FixedWindow, Limits};
use floodgate::clock::ManualClock;
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::{RedisClusterStore, RedisStore, Store};
use floodgate::Limiter;
use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

const USER_LIMIT: u64 = 5;
const GLOBAL_LIMIT: u64 = 12;
const USERS: usize = 6;

fn limits() -> Limits {
    let minute = Duration::from_secs(60);
    Limits::new("user", FixedWindow::new(USER_LIMIT, minute))
        .try_with("global", FixedWindow::new(GLOBAL_LIMIT, minute))
        .unwrap()
}

fn limiter(store: impl Into<Store>, clock: &ManualClock, prefix: &str) -> Limiter<Limits> {
    Limiter::builder(store, limits())
        .prefix(prefix)
        .clock(clock.clone())
        .timeout(Duration::from_secs(5))
        .on_store_failure(FailurePolicy::ReturnError)
        .circuit_breaker(CircuitBreaker::disabled())
        .build()
        .unwrap()
}

/// Four servers, each 20 requests over six users at once; then every
/// key's state against what was admitted.
async fn four_servers(servers: Vec<Limiter<Limits>>) {
    let mut tasks = Vec::new();
    for (s, limiter) in servers.iter().cloned().enumerate() {
        tasks.push(tokio::spawn(async move {
            let mut admitted = vec![0u64; USERS];
            for i in 0..20 {
                let user = format!("u{}", (i + s) % USERS);
                let d = limiter
                    .check_keys(&[("user", &user), ("global", "all")], 1)
                    .await
                    .unwrap();
                if d.overall().allowed() {
                    admitted[(i + s) % USERS] += 1;
                }
            }
            admitted
        }));
    }
    let mut admitted = vec![0u64; USERS];
    for t in tasks {
        for (a, n) in admitted.iter_mut().zip(t.await.unwrap()) {
            *a += n;
        }
    }
    let total: u64 = admitted.iter().sum();
    // 80 asked, the users allow 30: the global limit binds, exactly.
    assert_eq!(total, GLOBAL_LIMIT, "{admitted:?}");
    for (u, n) in admitted.iter().enumerate() {
        assert!(*n <= USER_LIMIT, "user {u}: {n}");
        // A refused request left no charge: each key holds what was
        // admitted for it, no more.
        let user = format!("u{u}");
        let now = servers[0]
            .check_keys(&[("user", &user), ("global", "all")], 0)
            .await
            .unwrap();
        assert_eq!(
            now.each()[0].decision().remaining(),
            USER_LIMIT - n,
            "user {u}"
        );
        assert_eq!(now.each()[1].decision().remaining(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_and_a_global_key_from_four_servers_on_one_redis() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(T0);
    let servers = (0..4)
        .map(|_| limiter(RedisStore::from_url(&redis.url()).unwrap(), &clock, "one"))
        .collect();
    four_servers(servers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_and_a_global_key_from_four_servers_on_a_cluster() {
    let cluster = RedisCluster::shared();
    let clock = ManualClock::new(T0);
    let prefix = format!("sk{}", std::process::id());
    let servers = (0..4)
        .map(|_| {
            let store = RedisClusterStore::from_nodes(cluster.urls()).unwrap();
            limiter(store, &clock, &prefix)
        })
        .collect();
    four_servers(servers).await;
}

#[tokio::test]
async fn one_call_per_decision_and_one_timeout_when_redis_stalls() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(T0);
    // Each decision its own call (no joining), to count them.
    let store = RedisStore::builder(&redis.url())
        .max_decisions_per_call(NonZeroUsize::MIN)
        .build()
        .unwrap();
    let strict = limiter(store.clone(), &clock, "calls");
    strict
        .check_keys(&[("user", "ana"), ("global", "all")], 1)
        .await
        .unwrap();
    let before = redis.command_calls("fcall").unwrap_or(0);
    for _ in 0..10 {
        strict
            .check_keys(&[("user", "ana"), ("global", "all")], 1)
            .await
            .unwrap();
    }
    assert_eq!(redis.command_calls("fcall").unwrap_or(0) - before, 10);

    // Redis frozen: the decision waits one timeout (250 ms), not one per
    // key (two keys decided apart would take at least 500 ms).
    let open = Limiter::builder(store, limits())
        .prefix("stall")
        .clock(clock.clone())
        .timeout(Duration::from_millis(250))
        .on_store_failure(FailurePolicy::FailOpen)
        .build()
        .unwrap();
    open.check_keys(&[("user", "bo"), ("global", "all")], 1)
        .await
        .unwrap();
    redis.pause();
    let started = Instant::now();
    let d = open
        .check_keys(&[("user", "bo"), ("global", "all")], 1)
        .await
        .unwrap();
    let took = started.elapsed();
    redis.resume();
    assert!(d.overall().is_degraded(), "{d:?}");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(500),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_limit_without_a_key_is_an_error_naming_it() {
    let limiter = Limiter::new(floodgate::store::MemoryStore::new(), limits());
    let e = limiter.check_keys(&[("user", "ana")], 1).await.unwrap_err();
    assert!(e.to_string().contains("\"global\""), "{e}");
    let e = limiter
        .check_keys(&[("user", "ana"), ("global", "all"), ("org", "acme")], 1)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("\"org\""), "{e}");
}

/// The layer: the user's key from a header, one global key, one decision.
#[tokio::test]
async fn the_layer_charges_a_user_key_and_a_global_key_in_one_decision() {
    common::http::on_both_stores(|store| async move {
        let minute = Duration::from_secs(60);
        let limits = Limits::new("user", FixedWindow::new(2, minute))
            .try_with("global", FixedWindow::new(3, minute))
            .unwrap();
        let limiter = Limiter::builder(store, limits)
            .clock(ManualClock::new(T0))
            .build()
            .unwrap();
        let layer = floodgate::layer::RateLimitLayer::new(
            limiter.clone(),
            floodgate::key::Header::try_new("x-user").unwrap(),
        )
        .key_for("global", floodgate::key::Global::named("all"))
        .unwrap();
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { "ok" }))
            .layer(layer);
        let base = common::http::serve(app).await;
        let client = reqwest::Client::new();
        let get = |user: &str| client.get(&base).header("x-user", user).send();
        let statuses = [
            get("ana").await.unwrap().status(),
            get("ana").await.unwrap().status(),
            get("ana").await.unwrap().status(), // ana's own limit
            get("bo").await.unwrap().status(),  // the global's third
            get("bo").await.unwrap().status(),  // the global limit
        ];
        assert_eq!(statuses.map(|s| s.as_u16()), [200, 200, 429, 200, 429]);
        // The refused requests charged neither key.
        let now = limiter
            .check_keys(&[("user", "bo"), ("global", "all")], 0)
            .await
            .unwrap();
        assert_eq!(now.each()[0].decision().remaining(), 1, "bo");
        assert_eq!(now.each()[1].decision().remaining(), 0, "global");
        let ana = limiter
            .check_keys(&[("user", "ana"), ("global", "all")], 0)
            .await
            .unwrap();
        assert_eq!(ana.each()[0].decision().remaining(), 0, "ana");
    })
    .await;
}

#[test]
fn key_for_a_limit_the_limiter_does_not_have_names_the_setting() {
    let limiter = Limiter::new(floodgate::store::MemoryStore::new(), limits());
    let e = floodgate::layer::RateLimitLayer::new(limiter, floodgate::key::Global::new())
        .key_for("org", floodgate::key::Global::new())
        .unwrap_err();
    assert_eq!(e.field(), "key_for");
    let limiter = Limiter::new(floodgate::store::MemoryStore::new(), limits());
    let e = floodgate::layer::RateLimitLayer::new(limiter, floodgate::key::Global::new())
        .key_for("global", floodgate::key::Global::new())
        .unwrap()
        .key_for("global", floodgate::key::Global::named("again"))
        .unwrap_err();
    assert_eq!(e.field(), "key_for");
}

/// One extractor yields every key: a request lacking one (the org header)
/// is answered 400 and charges nothing, to any key.
#[tokio::test]
async fn a_request_lacking_a_limits_own_key_is_rejected_and_charges_nothing() {
    let minute = Duration::from_secs(60);
    let limits = Limits::new("user", FixedWindow::new(5, minute))
        .try_with("org", FixedWindow::new(10, minute))
        .unwrap();
    let limiter = Limiter::new(floodgate::store::MemoryStore::new(), limits);
    let layer = floodgate::layer::RateLimitLayer::new(
        limiter.clone(),
        floodgate::key::Header::try_new("x-user").unwrap(),
    )
    .key_for("org", floodgate::key::Header::try_new("x-org").unwrap())
    .unwrap();
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(layer);
    let base = common::http::serve(app).await;
    let client = reqwest::Client::new();
    let without_org = client
        .get(&base)
        .header("x-user", "ana")
        .send()
        .await
        .unwrap();
    assert_eq!(without_org.status().as_u16(), 400);
    let with_org = client
        .get(&base)
        .header("x-user", "ana")
        .header("x-org", "acme")
        .send()
        .await
        .unwrap();
    assert_eq!(with_org.status().as_u16(), 200);
    let now = limiter
        .check_keys(&[("user", "ana"), ("org", "acme")], 0)
        .await
        .unwrap();
    assert_eq!(
        now.each()[0].decision().remaining(),
        4,
        "ana: the admitted request only"
    );
    assert_eq!(
        now.each()[1].decision().remaining(),
        9,
        "acme: the admitted request only"
    );
}

/// A charge given back after the response (`refund_when`) goes back to
/// every key it was charged to.
#[tokio::test]
async fn a_refund_after_the_response_goes_back_to_every_key() {
    let minute = Duration::from_secs(60);
    let limits = Limits::new("user", FixedWindow::new(5, minute))
        .try_with("global", FixedWindow::new(10, minute))
        .unwrap();
    let limiter = Limiter::new(floodgate::store::MemoryStore::new(), limits);
    let layer = floodgate::layer::RateLimitLayer::new(
        limiter.clone(),
        floodgate::key::Header::try_new("x-user").unwrap(),
    )
    .refund_when(floodgate::layer::predicate::ServerErrors)
    .key_for("global", floodgate::key::Global::named("all"))
    .unwrap();
    let app = axum::Router::new()
        .route("/ok", axum::routing::get(|| async { "ok" }))
        .route(
            "/fail",
            axum::routing::get(|| async { http::StatusCode::INTERNAL_SERVER_ERROR }),
        )
        .layer(layer);
    let base = common::http::serve(app).await;
    let client = reqwest::Client::new();
    let get = |path: &str| {
        client
            .get(format!("{base}{path}"))
            .header("x-user", "cy")
            .send()
    };
    assert_eq!(get("/ok").await.unwrap().status(), 200);
    assert_eq!(get("/fail").await.unwrap().status(), 500);
    let now = limiter
        .check_keys(&[("user", "cy"), ("global", "all")], 0)
        .await
        .unwrap();
    assert_eq!(now.each()[0].decision().remaining(), 4, "the user's");
    assert_eq!(now.each()[1].decision().remaining(), 9, "the global");
}
