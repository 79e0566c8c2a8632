//! Redis memory per client after the steady overload's traffic
//! (`MEMORY USAGE`), against the textbook scripts (`tests/baseline/`) run
//! on the same server in the same test: ours must be no larger. Byte counts
//! depend on the Redis version and allocator, so the comparison is made in
//! one run. `--nocapture` prints the table kept in BENCHMARKS.md.

mod common;

use common::{steady_overload_times, RedisServer};
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::RedisStore;
use floodgate::Limiter;
use std::time::Duration;

fn usage(redis: &RedisServer, pattern: &str) -> Vec<u64> {
    let keys: Vec<String> = redis.cmd(&["KEYS", pattern]);
    keys.iter()
        .map(|k| redis.cmd::<u64>(&["MEMORY", "USAGE", k]))
        .collect()
}

/// Bytes of our one key per client.
async fn ours<A: Algorithm>(redis: &RedisServer, alg: A) -> u64 {
    redis.cmd::<()>(&["FLUSHALL"]);
    let clock = ManualClock::new(0);
    let store = RedisStore::from_url(&redis.url()).unwrap();
    let limiter = Limiter::builder(store, alg)
        .prefix("rl")
        .name("d")
        .clock(clock.clone())
        // Errors, not silent fail-open decisions, on a loaded machine.
        .on_store_failure(FailurePolicy::ReturnError)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    for t in steady_overload_times() {
        clock.set(t);
        limiter.check("bob", 1).await.unwrap();
    }
    let bytes = usage(redis, "*");
    assert_eq!(bytes.len(), 1, "one key per client");
    bytes[0]
}

/// Bytes per key of the textbook script on the same traffic and client.
fn textbook(
    redis: &RedisServer,
    file: &str,
    args: impl Fn(u64, usize) -> Vec<String>,
    key: &str,
    pattern: &str,
) -> f64 {
    redis.cmd::<()>(&["FLUSHALL"]);
    let script = std::fs::read_to_string(format!(
        "{}/tests/baseline/{file}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let script = redis::Script::new(&script);
    let mut conn = redis.conn();
    for (i, t) in steady_overload_times().into_iter().enumerate() {
        let mut inv = script.key(key);
        for a in args(t, i) {
            inv.arg(a);
        }
        let _: i64 = inv.invoke(&mut conn).unwrap();
    }
    let bytes = usage(redis, pattern);
    bytes.iter().sum::<u64>() as f64 / bytes.len() as f64
}

#[tokio::test]
async fn memory_per_client_is_no_larger_than_the_textbook_scripts() {
    let redis = RedisServer::start();
    let s = Duration::from_secs(1);
    let window = |t: u64, _| vec!["10".into(), "1000".into(), t.to_string()];
    let fixed = textbook(
        &redis,
        "textbook_fixed_window.lua",
        window,
        "rl:fixed:bob",
        "rl:fixed:bob:*",
    );
    let log = textbook(
        &redis,
        "textbook_sliding_log.lua",
        |t, i| vec!["10".into(), "1000".into(), t.to_string(), format!("r{i}")],
        "rl:log:bob",
        "rl:log:bob",
    );
    let counter = textbook(
        &redis,
        "textbook_sliding_window.lua",
        window,
        "rl:swc:bob",
        "rl:swc:bob:*",
    );
    let bucket = textbook(
        &redis,
        "textbook_token_bucket.lua",
        |t, _| vec!["10".into(), "10".into(), t.to_string(), "1".into()],
        "rl:tb:bob",
        "rl:tb:bob",
    );
    // The textbook scripts keep 1 live window key per client (fixed) or 2 (counter).
    let rows = [
        (
            "fixed window",
            ours(&redis, FixedWindow::new(10, s)).await,
            fixed,
            "1 window key",
        ),
        (
            "sliding log",
            ours(&redis, SlidingLog::new(10, s)).await,
            log,
            "sorted set",
        ),
        (
            "sliding counter",
            ours(&redis, SlidingWindow::new(10, s)).await,
            2.0 * counter,
            "2 window keys",
        ),
        (
            "token bucket",
            ours(&redis, TokenBucket::new(10, 10.0)).await,
            bucket,
            "hash",
        ),
        (
            "leaky bucket",
            ours(&redis, LeakyBucket::new(10, 10.0)).await,
            bucket,
            "textbook token bucket",
        ),
        (
            "gcra",
            ours(&redis, Gcra::new(10, s)).await,
            bucket,
            "textbook token bucket",
        ),
    ];
    let version: String = redis.cmd(&["INFO", "server"]);
    let version = version
        .lines()
        .find(|l| l.starts_with("redis_version"))
        .unwrap_or("?")
        .trim()
        .to_string();
    println!("{version}");
    println!("| algorithm | floodgate, bytes per client (1 key) | textbook script, same run | its baseline |");
    println!("|---|---|---|---|");
    for (name, ours, textbook, what) in rows {
        println!("| {name} | {ours} | {textbook:.0} | {what} |");
        assert!(
            ours as f64 <= textbook,
            "{name}: {ours} B > the textbook script's {textbook} B"
        );
    }
}
