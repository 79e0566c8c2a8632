//! Decisions a second through floodgate-rls against the library's own, on
//! the same Redis, in the same run.
//!
//! ```text
//! cargo bench -p floodgate-rls --bench rls_load                  # 5 rounds × 2 × 5 s
//! cargo bench -p floodgate-rls --bench rls_load -- --secs 2 --rounds 1 --concurrency 32
//! cargo bench -p floodgate-rls --bench rls_load -- --descriptors 4   # 4 decisions a call
//! ```
//!
//! - `library`: `Limiter::check(key, 1)` on a `RedisStore`, a fixed window
//!   of 1 000 000 an hour, from `--concurrency` tasks (64) on a 2-thread
//!   tokio runtime in this process: what a Rust service calls.
//! - `rls`: the release `floodgate-rls` binary on the same Redis with one
//!   descriptor (`d0`, the same limit), asked `ShouldRateLimit`
//!   by the same number of tasks through 4 tonic channels from this
//!   process: what Envoy's filter sends.
//!
//! With `--descriptors N`, each call decides N limits (as an Envoy route
//! with N rate-limit actions sends N descriptors): the library calls
//! `check_keys` with N limits, the RLS gets N descriptors; a decision is
//! one limit's.
//!
//! `TOKIO_WORKER_THREADS`, when set, is passed to the service (its worker
//! threads; one a core otherwise).
//!
//! Every request carries one of 10 000 keys (`10.0.x.y`) and is admitted.
//! Rounds alternate the two; medians. The machine's cores are shared by
//! the client, the service and Redis; the CPU columns (from `/proc`) say
//! where the time went, in µs a decision.

mod support;

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{free_port, Killed};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use floodgate::algorithm::{AnyAlgorithm, FixedWindow, Limits};
use floodgate::store::RedisStore;
use floodgate::Limiter;

const KEYS: usize = 10_000;

struct Args {
    secs: u64,
    rounds: usize,
    concurrency: usize,
    descriptors: usize,
}

fn args() -> Args {
    let mut a = Args {
        secs: 5,
        rounds: 5,
        concurrency: 64,
        descriptors: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().and_then(|v| v.parse().ok()).expect("a number");
        match arg.as_str() {
            "--secs" => a.secs = value() as u64,
            "--rounds" => a.rounds = value(),
            "--concurrency" => a.concurrency = value(),
            "--descriptors" => a.descriptors = value().clamp(1, 16),
            "--bench" => {}
            other => panic!("unknown argument {other}; use --secs N, --rounds N, --concurrency N, --descriptors N"),
        }
    }
    a
}

fn wait_for(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// CPU time (user + system) of process `pid`, from `/proc`.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(") ").next().unwrap_or("").split(' ').collect();
    let ticks: u64 = fields
        .get(11..13)
        .map_or(0, |f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum());
    Duration::from_millis(ticks * 10) // USER_HZ = 100 on Linux
}

fn keys() -> Vec<String> {
    (0..KEYS)
        .map(|i| format!("10.0.{}.{}", i / 256, i % 256))
        .collect()
}

/// Run `tasks` loops of `one` for `secs`; decisions a second.
async fn closed_loop<F, Fut>(tasks: usize, secs: u64, one: F) -> f64
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (stop, done, one) = (stop.clone(), done.clone(), one.clone());
        handles.push(tokio::spawn(async move {
            let mut i = t * (KEYS / tasks.max(1));
            while !stop.load(Ordering::Relaxed) {
                assert!(one(i % KEYS).await, "a request was not admitted");
                done.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let n = done.load(Ordering::Relaxed);
    let took = start.elapsed();
    for h in handles {
        h.await.unwrap();
    }
    n as f64 / took.as_secs_f64()
}

fn main() {
    let a = args();
    let redis_port = free_port();
    let redis = Killed(
        Command::new("redis-server")
            .args([
                "--port",
                &redis_port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server: install it (Debian: apt-get install redis-server)"),
    );
    wait_for(redis_port, "redis-server");
    let url = format!("redis://127.0.0.1:{redis_port}");
    let dir = std::env::temp_dir().join(format!("floodgate-rls-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    let mut yaml = String::from("domain: bench\ndescriptors:\n");
    for d in 0..a.descriptors {
        yaml.push_str(&format!(
            "  - key: d{d}\n    rate_limit: {{ unit: hour, requests_per_unit: 1000000 }}\n"
        ));
    }
    std::fs::write(&config, yaml).unwrap();
    let rls_port = free_port();
    let rls = Killed(
        Command::new(env!("CARGO_BIN_EXE_floodgate-rls"))
            .env_clear()
            .env("REDIS_URL", &url)
            .args([
                "--config",
                config.to_str().unwrap(),
                "--metrics-addr",
                "off",
            ])
            .args(["--grpc-addr", &format!("127.0.0.1:{rls_port}")])
            .env("FLOODGATE_RLS_LOG", "warn")
            .envs(std::env::var("TOKIO_WORKER_THREADS").map(|v| ("TOKIO_WORKER_THREADS", v)))
            .spawn()
            .expect("the floodgate-rls binary"),
    );
    wait_for(rls_port, "floodgate-rls");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let keys = Arc::new(keys());
    let names: Arc<Vec<String>> = Arc::new((0..a.descriptors).map(|d| format!("d{d}")).collect());
    let limiter = rt.block_on(async {
        let store = RedisStore::from_url(&url).expect("a Redis URL");
        let window =
            || AnyAlgorithm::FixedWindow(FixedWindow::new(1_000_000, Duration::from_secs(3600)));
        let mut limits = Limits::new(&names[0], window());
        for name in &names[1..] {
            limits = limits.try_with(name, window()).unwrap();
        }
        Limiter::new(store, limits)
    });
    let channels: Vec<RateLimitServiceClient<tonic::transport::Channel>> = rt.block_on(async {
        let mut v = Vec::new();
        for _ in 0..4 {
            let url = format!("http://127.0.0.1:{rls_port}");
            v.push(
                RateLimitServiceClient::connect(url)
                    .await
                    .expect("connected"),
            );
        }
        v
    });
    let me = std::process::id();
    let (redis_pid, rls_pid) = (redis.0.id(), rls.0.id());
    let mut rows: Vec<(&str, Vec<[f64; 4]>)> = vec![("library", Vec::new()), ("rls", Vec::new())];
    println!(
        "{} rounds × {} s, {} tasks, {} decision(s) a call, {} cores, Redis on loopback",
        a.rounds,
        a.secs,
        a.concurrency,
        a.descriptors,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for round in 0..a.rounds {
        for (which, row) in rows.iter_mut() {
            let cpu0 = (cpu(me), cpu(rls_pid), cpu(redis_pid));
            let per_sec = if *which == "library" {
                let (limiter, keys, names) = (limiter.clone(), keys.clone(), names.clone());
                rt.block_on(closed_loop(a.concurrency, a.secs, move |i| {
                    let (limiter, keys, names) = (limiter.clone(), keys.clone(), names.clone());
                    async move {
                        if names.len() == 1 {
                            return limiter.check(&keys[i], 1).await.expect("decided").allowed();
                        }
                        let each: Vec<(&str, &str)> = names
                            .iter()
                            .map(|n| (n.as_str(), keys[i].as_str()))
                            .collect();
                        limiter
                            .check_keys(&each, 1)
                            .await
                            .expect("decided")
                            .overall()
                            .allowed()
                    }
                }))
            } else {
                let (channels, keys, names) = (channels.clone(), keys.clone(), names.clone());
                rt.block_on(closed_loop(a.concurrency, a.secs, move |i| {
                    let mut client = channels[i % channels.len()].clone();
                    let descriptors = names
                        .iter()
                        .map(|n| RateLimitDescriptor {
                            entries: vec![Entry {
                                key: n.clone(),
                                value: keys[i].clone(),
                            }],
                            ..RateLimitDescriptor::default()
                        })
                        .collect();
                    async move {
                        let req = RateLimitRequest {
                            domain: "bench".into(),
                            descriptors,
                            hits_addend: 1,
                        };
                        let r = client.should_rate_limit(req).await.expect("answered");
                        r.into_inner().overall_code == 1
                    }
                }))
            };
            let per_sec = per_sec * a.descriptors as f64;
            let n = per_sec * a.secs as f64;
            let us = |d: Duration| d.as_secs_f64() * 1e6 / n;
            let cpu1 = (cpu(me), cpu(rls_pid), cpu(redis_pid));
            let sample = [
                per_sec,
                us(cpu1.0 - cpu0.0),
                us(cpu1.1 - cpu0.1),
                us(cpu1.2 - cpu0.2),
            ];
            println!(
                "  round {} {which:8} {:>9.0} decisions/s  cpu µs/decision: this process {:.1}, floodgate-rls {:.1}, redis {:.1}",
                round + 1,
                sample[0],
                sample[1],
                sample[2],
                sample[3]
            );
            row.push(sample);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratios: Vec<f64> = rows[1]
        .1
        .iter()
        .zip(&rows[0].1)
        .map(|(r, l)| r[0] / l[0])
        .collect();
    println!();
    println!("| path | decisions/s | × library | CPU µs a decision: client/library process | floodgate-rls | redis-server |");
    println!("|---|---|---|---|---|---|");
    for (which, row) in &rows {
        let col = |i: usize| median(&mut row.iter().map(|s| s[i]).collect());
        let ratio = if *which == "rls" {
            median(&mut ratios.clone())
        } else {
            1.0
        };
        println!(
            "| {which} | {:.0} | {ratio:.3} | {:.1} | {:.1} | {:.1} |",
            col(0),
            col(1),
            col(2),
            col(3)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
