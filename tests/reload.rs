//! `examples/reload.rs` over real HTTP, on memory and on Redis: its server
//! and its watcher, a limits file changed on disk, the new limit applied
//! within a second with every client's count kept, and a wrong file
//! leaving the limits as they were.

mod common;

#[path = "../examples/reload.rs"]
#[allow(dead_code)]
mod reload;

use common::http::on_both_stores;
use floodgate::store::Store;
use std::path::Path;
use std::time::{Duration, Instant};

/// A limits file of one sliding log (exact: no window boundary can reset
/// the count while the test runs) of `limit` a minute.
fn write_limits(path: &Path, limit: u64) {
    let text = format!("[limits]\nminute = \"sliding_log {limit}/min\"\n");
    std::fs::write(path, text).unwrap();
}

/// The status of a GET of `url`, and its `RateLimit-Policy` field.
async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    let r = client.get(url).send().await.unwrap();
    let policy = r
        .headers()
        .get("ratelimit-policy")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status().as_u16(), policy)
}

/// Requests until one is admitted, for at most a second after `since`.
async fn admitted_within_a_second(client: &reqwest::Client, url: &str, since: Instant) -> String {
    loop {
        let (status, policy) = get(client, url).await;
        if status == 200 {
            return policy;
        }
        assert_eq!(status, 429);
        assert!(
            since.elapsed() < Duration::from_secs(1),
            "the new limit was not applied within a second"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_changed_file_applies_within_a_second_and_counts_are_kept() {
    on_both_stores(|store: Store| async move {
        let dir = std::env::temp_dir().join(format!(
            "floodgate-reload-{}-{}",
            std::process::id(),
            next_folder()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("limits.toml");
        write_limits(&path, 3);

        // The example's own server code: its limiter, watcher, app, serve.
        let limiter = reload::limiter(store, &path).unwrap();
        let watcher = reload::watch(&path, limiter.clone()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        tokio::spawn(reload::serve(listener, reload::app(limiter.clone())));
        let client = reqwest::Client::new();

        for _ in 0..3 {
            let (status, policy) = get(&client, &url).await;
            assert_eq!(status, 200);
            assert!(policy.contains("q=3"), "{policy}");
        }
        assert_eq!(get(&client, &url).await.0, 429);

        // 3 -> 5: admitted again within a second, with the 3 used kept:
        // exactly 2 more.
        let since = Instant::now();
        write_limits(&path, 5);
        let policy = admitted_within_a_second(&client, &url, since).await;
        assert!(
            policy.contains("q=5"),
            "the headers name the new limit: {policy}"
        );
        assert_eq!(get(&client, &url).await.0, 200);
        assert_eq!(get(&client, &url).await.0, 429, "the count was kept");

        // A file that is wrong leaves the limits as they were...
        std::fs::write(&path, "[limits]\nminute = \"sliding_log 0/min\"\n").unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(limiter.quotas().next().unwrap().1.units, 5);
        assert_eq!(get(&client, &url).await.0, 429);
        // ... and the next good one applies.
        let since = Instant::now();
        write_limits(&path, 7);
        let policy = admitted_within_a_second(&client, &url, since).await;
        assert!(policy.contains("q=7"), "{policy}");
        drop(watcher);
        std::fs::remove_dir_all(&dir).unwrap();
    })
    .await;
}

/// Distinct per call in this process: the two stores' runs get two folders.
fn next_folder() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
