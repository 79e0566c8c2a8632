//! The concurrency limiter: at most N requests in flight per key across
//! servers, leases that expire after a crash, slots freed when the response
//! body ends or is dropped.

mod common;

use axum::{routing::get, Router};
use common::RedisServer;
use floodgate::clock::ManualClock;
use floodgate::concurrency::ConcurrencyLimiter;
use floodgate::key::Global;
use floodgate::layer::ConcurrencyLimitLayer;
use floodgate::store::{MemoryStore, RedisStore, Store};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

async fn on_both_stores<F, Fut>(test: F)
where
    F: Fn(Vec<Store>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let memory: Store = MemoryStore::new().into();
    test(vec![memory.clone(), memory]).await;
    let redis = RedisServer::start();
    // Two app servers: two stores, each with its own connections.
    let stores = (0..2)
        .map(|_| RedisStore::from_url(&redis.url()).unwrap().into())
        .collect();
    test(stores).await;
}

#[tokio::test]
async fn slots_are_shared_across_servers_and_released() {
    on_both_stores(|stores| async move {
        let clock = ManualClock::new(1_000);
        let limiter = |s: &Store| {
            ConcurrencyLimiter::builder(s.clone(), 2)
                .lease(Duration::from_secs(30))
                .clock(clock.clone())
                .build()
                .unwrap()
        };
        let (a, b) = (limiter(&stores[0]), limiter(&stores[1]));
        let p1 = a.acquire("ana").await.unwrap().unwrap();
        let p2 = b.acquire("ana").await.unwrap().unwrap();
        assert!(a.acquire("ana").await.unwrap().is_err());
        assert!(b.acquire("ana").await.unwrap().is_err());
        assert!(
            a.acquire("bob").await.unwrap().is_ok(),
            "another key has its own slots"
        );
        assert_eq!(a.in_flight("ana").await.unwrap(), 2);
        p1.release().await;
        let p3 = b
            .acquire("ana")
            .await
            .unwrap()
            .expect("a released slot is free");
        drop(p2);
        // Dropping releases too (on a task for Redis).
        for _ in 0..100 {
            if a.in_flight("ana").await.unwrap() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(a.in_flight("ana").await.unwrap(), 1);
        drop(p3);
    })
    .await;
}

#[tokio::test]
async fn a_crashed_server_leaks_its_slot_only_until_the_lease_expires() {
    on_both_stores(|stores| async move {
        let clock = ManualClock::new(1_000);
        let build = |s: &Store| {
            ConcurrencyLimiter::builder(s.clone(), 1)
                .lease(Duration::from_secs(30))
                .clock(clock.clone())
                .build()
                .unwrap()
        };
        let (crashing, survivor) = (build(&stores[0]), build(&stores[1]));
        // The lease is never released: its server "crashed".
        std::mem::forget(crashing.acquire("job").await.unwrap().unwrap());
        assert!(survivor.acquire("job").await.unwrap().is_err());
        clock.advance(Duration::from_millis(29_999));
        assert!(survivor.acquire("job").await.unwrap().is_err());
        clock.advance(Duration::from_millis(1));
        assert!(
            survivor.acquire("job").await.unwrap().is_ok(),
            "the lease expired"
        );
    })
    .await;
}

#[tokio::test]
async fn the_layer_holds_a_slot_until_the_response_ends() {
    on_both_stores(|stores| async move {
        let gate = Arc::new(Semaphore::new(0));
        let limiter = ConcurrencyLimiter::builder(stores[0].clone(), 2)
            .build()
            .unwrap();
        let g = gate.clone();
        let app = Router::new()
            .route(
                "/slow",
                get(move || {
                    let g = g.clone();
                    async move {
                        g.acquire().await.unwrap().forget();
                        "done"
                    }
                }),
            )
            .layer(ConcurrencyLimitLayer::new(limiter.clone(), Global::new()));
        let base = format!("{}/slow", common::http::serve(app).await);
        let client = reqwest::Client::new();
        let mut first = tokio::spawn(client.get(&base).send());
        let mut second = tokio::spawn(client.get(&base).send());
        while limiter.in_flight("global").await.unwrap() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let third = client.get(&base).send().await.unwrap();
        assert_eq!(third.status(), 429);
        assert_eq!(third.headers()["retry-after"], "1");
        // One permit: one of the two held requests ends, either one.
        gate.add_permits(1);
        let (done, other) = tokio::time::timeout(Duration::from_secs(5), async {
            tokio::select! {
                a = &mut first => (a, second),
                b = &mut second => (b, first),
            }
        })
        .await
        .expect("a held request finishes");
        let done = done.unwrap().unwrap();
        assert_eq!(done.status(), 200);
        done.text().await.unwrap();
        // Its slot is free again: a new request is admitted (and waits at the gate).
        while limiter.in_flight("global").await.unwrap() > 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let fourth = tokio::spawn(client.get(&base).send());
        while limiter.in_flight("global").await.unwrap() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        gate.add_permits(2);
        assert_eq!(other.await.unwrap().unwrap().status(), 200);
        assert_eq!(fourth.await.unwrap().unwrap().status(), 200);
    })
    .await;
}
