//! Decisions per second through `Limiter::check` on a `RedisStore`, with many
//! concurrent tasks: the number behind the connection strategy in
//! `BENCHMARKS.md`.
//!
//! ```text
//! cargo bench --bench redis_throughput              # 64 tasks, 3 runs of 3 s
//! cargo bench --bench redis_throughput -- --tasks 16 --secs 2 --runs 5
//! cargo bench --bench redis_throughput -- --connections 1
//! REDIS_URL=redis://127.0.0.1:6380 cargo bench --bench redis_throughput
//! ```
//!
//! Without `REDIS_URL` it starts its own `redis-server` on a free loopback
//! port (never the system one on 6379) and stops it at the end.
//!
//! Every run measures two clients in turn, so both see the same machine:
//!
//! - `limiter`: `Limiter::check` over `RedisStore` as the crate ships it;
//! - `raw multiplexed`: the ceiling, one shared redis-rs
//!   `MultiplexedConnection` sending the bare `FCALL`, no limiter.
//!
//! Keys: each task charges its own 16 keys in turn (1024 keys at 64 tasks),
//! on a token bucket large enough that almost everything is admitted.

mod support;

use floodgate::algorithm::TokenBucket;
use floodgate::failure::FailurePolicy;
use floodgate::store::RedisStore;
use floodgate::Limiter;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use support::{measure, median, Redis, RunArgs};

/// The name of the function library the limiter loaded (`floodgate_<sha>`).
async fn library_name(conn: &mut redis::aio::MultiplexedConnection) -> String {
    let libraries: Vec<HashMap<String, redis::Value>> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg("floodgate_*")
        .query_async(conn)
        .await
        .expect("FUNCTION LIST (Redis 7 or later)");
    libraries
        .into_iter()
        .find_map(|mut l| redis::from_redis_value(l.remove("library_name")?).ok())
        .expect("floodgate's library, loaded by the limiter's first decision")
}

#[tokio::main]
#[allow(clippy::many_single_char_names)] // a, l, k, c, f: the run's handles
async fn main() {
    let a = RunArgs::parse(true);
    let server = std::env::var("REDIS_URL").is_err().then(Redis::start);
    let url = std::env::var("REDIS_URL")
        .ok()
        .or_else(|| server.as_ref().map(|s| s.url.clone()))
        .expect("a url");

    let mut store = RedisStore::from_url(&url).expect("store");
    if let Some(n) = a.connections {
        store =
            store.connections(std::num::NonZeroUsize::new(n).expect("--connections at least 1"));
    }
    // Only decisions made by Redis count: a failure is an error (and ends
    // the run), never a fail-open decision.
    let limiter = Limiter::builder(store, TokenBucket::new(1 << 30, 1e9))
        .prefix("floodgate-bench")
        .timeout(Duration::from_secs(5))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .expect("limiter");
    let keys: Arc<Vec<String>> = Arc::new(
        (0..a.tasks * 16)
            .map(|i| format!("client-{i}"))
            .collect::<Vec<_>>(),
    );

    println!(
        "nproc {}, {} tasks, {} runs of {} s, redis {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        a.tasks,
        a.runs,
        a.secs,
        url
    );
    // The ceiling: one shared multiplexed connection, the bare FCALL.
    let mut shared = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connection");
    // The limiter's first decision loads floodgate's library; the raw
    // client calls the same function by its name.
    limiter
        .check("warm-up", 1)
        .await
        .expect("a decision by redis");
    let function = Arc::new(library_name(&mut shared).await);
    let fcall = |function: &str, key: String| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(function)
            .arg(1)
            .arg(key)
            .arg("")
            .arg("check")
            .arg(1)
            .arg("tb")
            .arg(1u64 << 30)
            // One token every 1000 / 1e9 ms: a rate of 10^9 a second.
            .arg("0.000001");
        cmd
    };
    let (mut ours, mut raw) = (Vec::new(), Vec::new());
    for run in 1..=a.runs {
        let (l, k) = (limiter.clone(), keys.clone());
        let r1 = measure(a.tasks, a.secs, move |t, i| {
            let (l, k) = (l.clone(), k.clone());
            async move {
                let key = &k[t * 16 + (i % 16) as usize];
                let d = l.check(key, 1).await.expect("a decision by redis");
                assert!(!d.is_degraded());
            }
        })
        .await;
        let (c, f, k) = (shared.clone(), function.clone(), keys.clone());
        let r2 = measure(a.tasks, a.secs, move |t, i| {
            let (mut c, f, k) = (c.clone(), f.clone(), k.clone());
            async move {
                let key = format!("floodgate-bench:raw:{}", k[t * 16 + (i % 16) as usize]);
                let _: Vec<i64> = fcall(&f, key).query_async(&mut c).await.expect("fcall");
            }
        })
        .await;
        println!("run {run}: limiter {r1:>7.0}/s   raw multiplexed {r2:>7.0}/s");
        ours.push(r1);
        raw.push(r2);
    }
    let (m1, m2) = (median(&ours), median(&raw));
    println!(
        "median: limiter {m1:.0}/s, raw multiplexed {m2:.0}/s; limiter / raw {:.2}",
        m1 / m2
    );
}
