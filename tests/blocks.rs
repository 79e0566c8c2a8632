//! `Limiter::block`: a key refused for a time on every server sharing the
//! store, shown as a denial with `Retry-After`; a window's limiter says it
//! cannot.

mod common;

use axum::routing::get;
use axum::Router;
use common::http::{on_both_stores, serve};
use common::{RedisServer, T0};
use floodgate::algorithm::{FixedWindow, Gcra, Limits, TokenBucket};
use floodgate::clock::ManualClock;
use floodgate::key::Header;
use floodgate::layer::RateLimitLayer;
use floodgate::store::{MemoryStore, RedisStore};
use floodgate::{Error, Limiter};
use std::time::Duration;

#[tokio::test]
async fn a_blocked_key_is_refused_with_retry_after_until_the_block_ends() {
    on_both_stores(|store| async move {
        let clock = ManualClock::new(T0);
        let limiter = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1)))
            .name("logins")
            .clock(clock.clone())
            .build()
            .unwrap();
        let layer = RateLimitLayer::new(limiter.clone(), Header::try_new("x-user").unwrap());
        let base = serve(
            Router::new()
                .route("/", get(|| async { "ok" }))
                .layer(layer),
        )
        .await;
        let client = reqwest::Client::new();
        let get = || client.get(&base).header("x-user", "ana").send();
        assert_eq!(get().await.unwrap().status(), 200);
        limiter
            .block("ana", Duration::from_secs(120))
            .await
            .unwrap();
        let refused = get().await.unwrap();
        assert_eq!(refused.status(), 429);
        assert_eq!(refused.headers()["retry-after"], "120");
        // A shorter block does not shorten it.
        limiter.block("ana", Duration::from_secs(5)).await.unwrap();
        clock.advance(Duration::from_secs(60));
        assert_eq!(get().await.unwrap().headers()["retry-after"], "60");
        clock.advance(Duration::from_secs(60));
        assert_eq!(get().await.unwrap().status(), 200);
        // Another user was never blocked.
        let other = client
            .get(&base)
            .header("x-user", "bo")
            .send()
            .await
            .unwrap();
        assert_eq!(other.status(), 200);
    })
    .await;
}

#[tokio::test]
async fn a_block_holds_on_every_server_and_for_every_limit() {
    let redis = RedisServer::start();
    let clock = ManualClock::new(T0);
    let limits = Limits::new("rate", Gcra::new(10, Duration::from_secs(1)))
        .try_with("tokens", TokenBucket::new(1000, 10.0))
        .unwrap();
    let servers: Vec<_> = (0..3)
        .map(|_| {
            Limiter::builder(RedisStore::from_url(&redis.url()).unwrap(), limits.clone())
                .clock(clock.clone())
                .build()
                .unwrap()
        })
        .collect();
    servers[0]
        .block("partner", Duration::from_secs(2))
        .await
        .unwrap();
    for s in &servers {
        let d = s.check("partner", 1).await.unwrap();
        assert!(d.denied(), "{d:?}");
        assert_eq!(d.retry_after(), Some(Duration::from_secs(2)));
    }
    clock.advance(Duration::from_secs(2));
    assert!(servers[2].check("partner", 1).await.unwrap().allowed());
}

#[tokio::test]
async fn a_window_cannot_be_blocked_and_says_so() {
    let limiter = Limiter::new(
        MemoryStore::new(),
        FixedWindow::new(5, Duration::from_secs(60)),
    );
    match limiter.block("ana", Duration::from_secs(1)).await {
        Err(Error::Unsupported(e)) => {
            assert_eq!(e.field(), "limits");
            assert!(e.to_string().contains("window"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}
