//! Decisions per second through `Limiter::check` on a `RedisClusterStore`,
//! next to a `RedisStore` on one node, with many concurrent tasks: the
//! numbers of the Redis Cluster section of `BENCHMARKS.md`.
//!
//! It starts nothing: give it the nodes of a running cluster, and optionally
//! a single Redis to compare with (both are measured in the same run,
//! interleaved, so both see the same machine).
//!
//! ```text
//! FLOODGATE_CLUSTER_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001 \
//! REDIS_URL=redis://127.0.0.1:7100 \
//!     cargo bench --bench cluster_throughput             # 64 tasks, 3 runs of 3 s
//! ... cargo bench --bench cluster_throughput -- --tasks 16 --secs 2 --runs 5
//! ```
//!
//! Without `FLOODGATE_CLUSTER_NODES` it prints its usage and exits with
//! status 0, measuring nothing (a plain `cargo bench` runs every bench
//! target and goes on to the next).
//!
//! Keys: each task charges its own 16 keys in turn (1024 keys at 64 tasks,
//! spread over all shards), on a token bucket large enough that almost
//! everything is admitted. Any store error or timeout aborts the run.

mod support;

use floodgate::algorithm::TokenBucket;
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::{RedisClusterStore, RedisStore, Store};
use floodgate::Limiter;
use std::sync::Arc;
use std::time::Duration;
use support::{measure, median, RunArgs};

const USAGE: &str = "\
cluster_throughput: FLOODGATE_CLUSTER_NODES is not set, nothing measured.
usage: FLOODGATE_CLUSTER_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001 \\
       [REDIS_URL=redis://127.0.0.1:7100] \\
       cargo bench --bench cluster_throughput [-- --tasks N --secs S --runs N]
  FLOODGATE_CLUSTER_NODES  comma-separated redis:// URLs of nodes of a running cluster
                           (this tool starts none; BENCHMARKS.md shows how)
  REDIS_URL                optional: a single Redis, measured in the same runs
  --tasks N (64), --secs S (3), --runs N (3)";

fn limiter(store: impl Into<Store>) -> Limiter<TokenBucket> {
    Limiter::builder(store, TokenBucket::new(1 << 30, 1e9))
        .prefix("floodgate-bench")
        // Measure the store: errors are fatal, never hidden by a policy.
        .on_store_failure(FailurePolicy::ReturnError)
        .timeout(Duration::from_secs(5))
        .circuit_breaker(CircuitBreaker::disabled())
        .build()
        .expect("limiter")
}

/// `tasks` tasks calling `check` in a loop for `secs`; decisions per second.
async fn throughput(limiter: &Limiter<TokenBucket>, keys: &Arc<Vec<String>>, a: &RunArgs) -> f64 {
    // Warm up: connections made, scripts loaded on every shard.
    for k in keys.iter().take(64) {
        limiter.check(k, 1).await.expect("decision");
    }
    let (l, k) = (limiter.clone(), keys.clone());
    measure(a.tasks, a.secs, move |t, i| {
        let (l, k) = (l.clone(), k.clone());
        async move {
            l.check(&k[t * 16 + (i % 16) as usize], 1)
                .await
                .expect("decision");
        }
    })
    .await
}

#[tokio::main]
async fn main() {
    let a = RunArgs::parse(false);
    let Ok(nodes) = std::env::var("FLOODGATE_CLUSTER_NODES") else {
        eprintln!("{USAGE}");
        return;
    };
    let nodes: Vec<String> = nodes
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let single = std::env::var("REDIS_URL").ok();
    let cluster = limiter(RedisClusterStore::from_nodes(nodes.clone()).expect("cluster store"));
    let single = single
        .as_deref()
        .map(|url| limiter(RedisStore::from_url(url).expect("redis store")));
    let keys: Arc<Vec<String>> =
        Arc::new((0..a.tasks * 16).map(|i| format!("client-{i}")).collect());

    println!(
        "nproc {}, {} tasks, {} runs of {} s, cluster nodes {}, single {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        a.tasks,
        a.runs,
        a.secs,
        nodes.join(","),
        std::env::var("REDIS_URL").unwrap_or_else(|_| "-".into()),
    );
    let (mut on_cluster, mut on_single) = (Vec::new(), Vec::new());
    for run in 1..=a.runs {
        let c = throughput(&cluster, &keys, &a).await;
        on_cluster.push(c);
        match &single {
            Some(s) => {
                let s = throughput(s, &keys, &a).await;
                on_single.push(s);
                println!("run {run}: cluster {c:>9.0}/s   single node {s:>9.0}/s");
            }
            None => println!("run {run}: cluster {c:>9.0}/s"),
        }
    }
    let c = median(&on_cluster);
    if on_single.is_empty() {
        println!("median: cluster {c:.0}/s");
    } else {
        let s = median(&on_single);
        println!(
            "median: cluster {c:.0}/s, single node {s:.0}/s, ratio {:.2}",
            c / s
        );
    }
}
