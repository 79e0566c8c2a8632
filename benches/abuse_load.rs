//! Clients hammering while denied: `Limiter::check` on `RedisStore` with the
//! local deny cache off and on, in the same run, interleaved.
//!
//! ```text
//! cargo bench --bench abuse_load                 # 3 rounds, ~15 s
//! cargo bench --bench abuse_load -- --rounds 1   # smoke
//! ```
//!
//! Without `REDIS_URL` it starts its own `redis-server` on a free loopback
//! port (with `REDIS_URL` it FLUSHALLs that server: never point it at one
//! holding data).
//!
//! The traffic: 100 abusive clients, each with a GCRA quota of 1 per hour
//! already spent, hammered by 64 tokio tasks (2 workers) as fast as they go
//! for 2 s per round. Every decision is a denial. Counted per round:
//! decisions/s, and the Redis calls the clients made per decision (`calls`
//! of the script commands, `PING` and `UNWATCH` in `INFO commandstats`).
//!
//! The cache never answers what Redis would admit (`tests/deny_cache.rs`
//! proves it): here it answers every repeat denial of a key until the time
//! the first denial named, an hour away.

mod support;

use floodgate::algorithm::Gcra;
use floodgate::failure::FailurePolicy;
use floodgate::store::RedisStore;
use floodgate::Limiter;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{int, median, Redis};

const CLIENTS: usize = 100;
const TASKS: usize = 64;
const RUN: Duration = Duration::from_secs(2);

/// Calls the clients made (a script's own `redis.call`s are not counted).
fn commands(redis: &Redis) -> u64 {
    ["evalsha", "eval", "fcall", "fcall_ro", "ping", "unwatch"]
        .iter()
        .map(|c| redis.command_stats(c).0)
        .sum()
}

/// One round: (decisions/s, Redis commands per decision).
async fn round(redis: &Redis, cache: bool, round: usize) -> (f64, f64) {
    let store = RedisStore::from_url(&redis.url).expect("a valid REDIS_URL");
    let name = format!("abuse-{}-{round}", if cache { "cached" } else { "plain" });
    // A loaded machine must not turn slow calls into fail-open admissions.
    let mut builder = Limiter::builder(store, Gcra::new(1, Duration::from_secs(3600)))
        .name(name.as_str())
        .timeout(Duration::from_secs(5))
        .on_store_failure(FailurePolicy::ReturnError);
    if cache {
        builder = builder.deny_cache(NonZeroUsize::new(10_000).unwrap());
    }
    let limiter = builder.build().expect("valid limiter");
    let keys: Arc<Vec<String>> = Arc::new((0..CLIENTS).map(|i| format!("abuser-{i}")).collect());
    // Each abuser spends its quota first.
    for k in keys.iter() {
        assert!(limiter.check(k, 1).await.unwrap().allowed());
    }
    let before = commands(redis);
    let stop = Arc::new(AtomicBool::new(false));
    let decided = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (limiter, keys, stop, decided) =
                (limiter.clone(), keys.clone(), stop.clone(), decided.clone());
            tokio::spawn(async move {
                let mut i = t;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let d = limiter.check(&keys[i % CLIENTS], 1).await.unwrap();
                    assert!(!d.allowed(), "an abuser was admitted");
                    i += 7;
                    n += 1;
                    if n.is_multiple_of(64) {
                        // Let the timer task run when every call is local.
                        tokio::task::yield_now().await;
                    }
                }
                decided.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    tokio::time::sleep(RUN).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    let calls = commands(redis) - before;
    let n = decided.load(Ordering::Relaxed) as f64;
    (n / secs, calls as f64 / n)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .skip_while(|a| a != "--rounds")
        .nth(1)
        .map_or(3, |v| v.parse().expect("--rounds N"));
    let redis = Redis::from_env_or_start();
    redis.flushall();
    let (mut plain, mut cached) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        plain.push(round(&redis, false, r).await);
        cached.push(round(&redis, true, r).await);
    }
    let med =
        |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
    let (p_rate, c_rate) = (med(&plain, |x| x.0), med(&cached, |x| x.0));
    let (p_calls, c_calls) = (med(&plain, |x| x.1), med(&cached, |x| x.1));
    println!(
        "## Abuse: {CLIENTS} denied clients, {TASKS} tasks, {} s per round, median of {rounds} interleaved rounds (nproc {}, load average {}, Redis {})\n",
        RUN.as_secs(),
        support::nproc(),
        support::loadavg(),
        redis.version()
    );
    println!("| deny cache | decisions/s (each round) | Redis commands per decision |");
    println!("|---|---|---|");
    for (name, v, rate, calls) in [
        ("off", &plain, p_rate, p_calls),
        ("on", &cached, c_rate, c_calls),
    ] {
        let each: Vec<String> = v.iter().map(|x| int(x.0)).collect();
        println!(
            "| {name} | {} ({}) | {calls:.5} |",
            int(rate),
            each.join(", ")
        );
    }
    println!(
        "\nthroughput × {:.1} with the cache (target ≥ 5); Redis commands {:.3} % fewer (target ≥ 99 %)",
        c_rate / p_rate,
        100.0 * (1.0 - c_calls / p_calls)
    );
}
