//! The sliding log and the token bucket under the same steady load, through
//! floodgate on a real Redis: what each costs the Redis server (CPU,
//! memory, time per call). The load test of BENCHMARKS.md's "Sliding log or
//! token bucket".
//!
//! ```text
//! cargo bench --bench algorithm_load                   # 5 000 req/s, 1 000 clients, 60 s each
//! cargo bench --bench algorithm_load -- --secs 10      # quicker
//! cargo bench --bench algorithm_load -- --rate 5000 --clients 1000 --secs 60
//! ```
//!
//! Open loop: every millisecond a pacer starts `rate / 1000` checks, each
//! for a client drawn at random from `clients` (`client-<n>` keys), so the
//! load does not slow down when Redis does. Each algorithm runs on a fresh
//! `redis-server` of its own (so memory and CPU are its alone), with the
//! limit a public API would give each client: 600 a minute (a sliding log
//! of 600 per minute; a token bucket of capacity 600 refilled at 10 a
//! second). At 5 000 req/s over 1 000 clients each client sends 5 a second,
//! half its limit: nearly everything is admitted, and the log holds up to
//! 300 entries per client, which is the case that costs it most.
//!
//! Reported per algorithm: decisions made, admitted share, client latency
//! p50/p99 (from each check's scheduled start), the server's CPU over the
//! run (`INFO cpu`: `used_cpu_user` + `used_cpu_sys`, as a share of one
//! core), `FCALL` calls and µs per call (`INFO commandstats`), and the
//! dataset's memory at the end (`INFO memory`: `used_memory_dataset`) with
//! the number of keys.

mod support;

use floodgate::algorithm::{Algorithm, SlidingLog, TokenBucket};
use floodgate::failure::FailurePolicy;
use floodgate::store::RedisStore;
use floodgate::Limiter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{quantile, Redis, Rng};

struct Args {
    rate: u64,
    clients: usize,
    secs: u64,
}

fn args() -> Args {
    let mut a = Args {
        rate: 5_000,
        clients: 1_000,
        secs: 60,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match flag.as_str() {
            "--rate" => a.rate = value().parse().expect("--rate N"),
            "--clients" => a.clients = value().parse().expect("--clients N"),
            "--secs" => a.secs = value().parse().expect("--secs S"),
            "--bench" => {}
            other => panic!("unknown argument {other}; use --rate N, --clients N, --secs S"),
        }
    }
    a
}

fn cpu(redis: &Redis) -> f64 {
    let field = |f: &str| {
        redis
            .info_field("cpu", f)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    field("used_cpu_user") + field("used_cpu_sys")
}

async fn load<A: Algorithm + Clone>(name: &str, algorithm: A, a: &Args) {
    let redis = Redis::start();
    let limiter = Limiter::builder(RedisStore::from_url(&redis.url).expect("store"), algorithm)
        .name("public-api")
        .on_store_failure(FailurePolicy::ReturnError)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("limiter");
    limiter.check("warm-up", 1).await.expect("decision");
    redis.flushall(); // the warm-up key (floodgate's functions stay)
    redis.reset_stats();
    let memory_before = redis.info_field("memory", "used_memory_dataset");
    let (cpu_before, started) = (cpu(&redis), Instant::now());
    let keys: Arc<Vec<String>> = Arc::new((0..a.clients).map(|i| format!("client-{i}")).collect());
    let (admitted, latencies) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let per_ms = a.rate / 1000;
    let mut rng = Rng::new(7);
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::new();
    for ms in 0..a.secs * 1000 {
        tick.tick().await;
        let scheduled = started + Duration::from_millis(ms);
        for _ in 0..per_ms {
            let key = rng.below(a.clients);
            let (l, keys, admitted, lat) = (
                limiter.clone(),
                keys.clone(),
                admitted.clone(),
                latencies.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let d = l.check(&keys[key], 1).await.expect("decision");
                let took = scheduled.elapsed().as_micros() as u64;
                if d.allowed() {
                    admitted.fetch_add(1, Ordering::Relaxed);
                }
                lat.lock().unwrap().push(took);
            }));
        }
        if tasks.len() > 10_000 {
            for t in tasks.drain(..) {
                t.await.expect("task");
            }
        }
    }
    for t in tasks {
        t.await.expect("task");
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu_share = (cpu(&redis) - cpu_before) / secs;
    let (calls, usec) = redis.command_stats("fcall");
    let mut lat = latencies.lock().unwrap().clone();
    lat.sort_unstable();
    let decisions = lat.len() as u64;
    let memory = redis.info_field("memory", "used_memory_dataset");
    let keys_held = redis.cmd::<u64>(&["DBSIZE"]);
    println!(
        "{name:<13} {decisions} decisions in {secs:.1} s ({:.0}/s), admitted {:.3}; \
         latency p50 {} µs p99 {} µs; Redis CPU {:.1} % of a core, FCALL {calls} calls \
         {:.2} µs/call; dataset memory {} (before {}), {keys_held} keys",
        decisions as f64 / secs,
        admitted.load(Ordering::Relaxed) as f64 / decisions as f64,
        quantile(&lat, 0.5),
        quantile(&lat, 0.99),
        cpu_share * 100.0,
        usec as f64 / calls.max(1) as f64,
        memory.unwrap_or_default(),
        memory_before.unwrap_or_default(),
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let a = args();
    println!(
        "nproc {}, {} req/s over {} clients for {} s each, limit 600 a minute per client",
        support::nproc(),
        a.rate,
        a.clients,
        a.secs
    );
    load(
        "sliding log",
        SlidingLog::new(600, Duration::from_secs(60)),
        &a,
    )
    .await;
    load("token bucket", TokenBucket::new(600, 10.0), &a).await;
}
