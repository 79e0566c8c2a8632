//! `examples/llm_gateway.rs` as a user runs it: over real HTTP, on the
//! memory store and on Redis. Tokens are estimated then settled (the
//! debt refuses a key until paid back), other keys are apart, and the
//! shared outbound limit keeps the upstream under its own limit.

#[allow(dead_code)]
#[path = "../examples/llm_gateway.rs"]
mod llm_gateway;

mod common;

use common::http::on_both_stores;
use std::sync::atomic::Ordering;
use std::sync::Arc;

async fn start(store: floodgate::store::Store) -> (String, Arc<llm_gateway::Upstream>) {
    let up = Arc::new(llm_gateway::Upstream::default());
    let upstream = common::http::serve(llm_gateway::upstream(up.clone())).await;
    (
        common::http::serve(llm_gateway::gateway(store, upstream)).await,
        up,
    )
}

#[tokio::test]
async fn tokens_are_settled_and_a_debt_refuses_the_key_until_paid() {
    on_both_stores(|store| async move {
        let (base, _) = start(store).await;
        let client = reqwest::Client::new();
        let call = |key: &str, prompt: String| {
            client
                .post(format!("{base}/v1/complete"))
                .header("x-api-key", key)
                .body(prompt)
                .send()
        };
        let long = "word ".repeat(150);
        let first = call("alice", "Hello".into()).await.unwrap();
        assert_eq!(first.status(), 200);
        assert_eq!(first.headers()["x-tokens-used"], "160");
        // The calls limit's headers: 10 at once, one used.
        assert!(first.headers()["ratelimit"]
            .to_str()
            .unwrap()
            .contains("r=9"));
        assert_eq!(call("alice", long.clone()).await.unwrap().status(), 200);
        assert_eq!(call("alice", long).await.unwrap().status(), 200);
        // 160 + 2 × 9 100 = 18 360 of 10 000 a minute: 8 360 in debt, and
        // the next estimate (500) on top: 53 s at 166.7 a second.
        let refused = call("alice", "Hello again".into()).await.unwrap();
        assert_eq!(refused.status(), 429);
        let retry: u64 = refused.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((52..=54).contains(&retry), "{retry}");
        assert_eq!(call("bob", "Hi".into()).await.unwrap().status(), 200);
    })
    .await;
}

#[tokio::test]
async fn the_shared_outbound_limit_keeps_the_upstream_under_its_own() {
    on_both_stores(|store| async move {
        let (base, up) = start(store).await;
        let client = reqwest::Client::new();
        // 60 calls at once from 12 keys (5 each: within their own limits);
        // the upstream takes 25 a second, the gateway sends 20.
        let calls: Vec<_> = (0..60)
            .map(|i| {
                let req = client
                    .post(format!("{base}/v1/complete"))
                    .header("x-api-key", format!("key{}", i % 12))
                    .body("short prompt");
                tokio::spawn(async move { req.send().await.unwrap().status().as_u16() })
            })
            .collect();
        let mut statuses = Vec::new();
        for c in calls {
            statuses.push(c.await.unwrap());
        }
        let ok = statuses.iter().filter(|s| **s == 200).count();
        let busy = statuses.iter().filter(|s| **s == 503).count();
        assert_eq!(ok + busy, 60, "{statuses:?}");
        // 5 at once, then 20 a second for the 2 s a call may wait.
        assert!(ok >= 40, "{ok} served: {statuses:?}");
        assert_eq!(
            up.refused.load(Ordering::Relaxed),
            0,
            "the upstream refused calls"
        );
        assert_eq!(up.served.load(Ordering::Relaxed), ok as u64);
    })
    .await;
}
