//! One hot key shared by four app servers, with and without hot-key
//! allotments, on a real Redis and (when given) a real Cluster: the "one
//! hot key" row of BENCHMARKS.md.
//!
//! ```text
//! cargo bench --bench hot_key                          # own redis-server, 3 rounds of 4 s
//! cargo bench --bench hot_key -- --secs 2 --runs 1     # quicker
//! FLOODGATE_CLUSTER_NODES=redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002 \
//!     cargo bench --bench hot_key                      # the cluster too
//! ```
//!
//! Four limiters, each on a store of its own (four app servers), 16 tasks
//! each, all calling `check("celebrity", 1)` as fast as they can on the
//! store's clock (Redis `TIME`, the default), for `--secs`; the limit is
//! `--limit` (20 000) a second. With allotments the limiters are built with
//! `HotKeys::new(4)` (slices of limit / 40). Measured, per run: decisions
//! a second; Redis calls a decision (`FCALL` in `INFO commandstats`, summed
//! over the nodes); for the fixed window, what the fleet admitted in each
//! whole window (read from each admission's `reset_after`, so a request
//! decided at the end of a window counts in that window), its largest and
//! smallest against the limit; for the token bucket, admitted against
//! `capacity + rate × duration` and the largest excess over the bucket's
//! bound in any interval of 10 ms bins, counting the admissions sent and
//! answered inside it (so decided inside it). Plain and allotted runs
//! alternate; the medians are printed. Each task yields to the runtime
//! every 16 checks: a decision from a slice is ready at once, and a loop
//! of them would otherwise keep its worker from every other task.

mod support;

use floodgate::algorithm::{Algorithm, FixedWindow, TokenBucket};
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::{RedisClusterStore, RedisStore, Store};
use floodgate::{HotKeys, Limiter};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{median, now_ms, Redis};

const SERVERS: u32 = 4;
const TASKS: usize = 16;

struct Args {
    secs: f64,
    runs: usize,
    limit: u64,
}

fn args() -> Args {
    let mut a = Args {
        secs: 4.0,
        runs: 3,
        limit: 20_000,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match flag.as_str() {
            "--secs" => a.secs = value().parse().expect("--secs S"),
            "--runs" => a.runs = value().parse().expect("--runs N"),
            "--limit" => a.limit = value().parse().expect("--limit N"),
            "--bench" => {}
            other => panic!("unknown argument {other}; use --secs S, --runs N, --limit N"),
        }
    }
    a
}

/// Where the four servers keep state.
enum Target {
    Redis(String),
    Cluster(Vec<String>),
}

impl Target {
    fn store(&self) -> Store {
        match self {
            Target::Redis(url) => RedisStore::from_url(url).expect("store").into(),
            Target::Cluster(nodes) => RedisClusterStore::from_nodes(nodes.clone())
                .expect("cluster store")
                .into(),
        }
    }

    /// `FCALL`s so far, summed over the nodes.
    fn calls(&self) -> u64 {
        let urls = match self {
            Target::Redis(url) => std::slice::from_ref(url),
            Target::Cluster(nodes) => nodes.as_slice(),
        };
        urls.iter()
            .map(|u| Redis::existing(u).command_stats("fcall").0)
            .sum()
    }
}

/// One admission, by the client's clock (ms): `sent` before its call,
/// `answered` after it. It was decided in between, by the same clock:
/// by Redis at its `TIME` (on this machine), or here from a slice.
struct Admission {
    sent: u64,
    answered: u64,
    /// Its `reset_after`, in ms.
    reset: u64,
}

/// What one run measured.
struct Run {
    per_sec: f64,
    calls_per_decision: f64,
    admitted: Vec<Admission>,
    started: u64,
    ended: u64,
}

async fn run<A: Algorithm + Clone>(
    target: &Target,
    alg: &A,
    hot: bool,
    tag: &str,
    secs: f64,
) -> Run {
    let limiters: Vec<Limiter<A>> = (0..SERVERS)
        .map(|_| {
            let b = Limiter::builder(target.store(), alg.clone())
                .prefix(format!("hot-bench-{tag}"))
                .on_store_failure(FailurePolicy::ReturnError)
                .timeout(Duration::from_secs(5))
                .circuit_breaker(CircuitBreaker::disabled());
            let b = if hot {
                b.hot_keys(HotKeys::new(SERVERS))
            } else {
                b
            };
            b.build().expect("limiter")
        })
        .collect();
    // Connected and loaded, on another key.
    for l in &limiters {
        l.check("warm-up", 1).await.expect("decision");
    }
    let calls = target.calls();
    let stop = Arc::new(AtomicBool::new(false));
    let (started, clock) = (now_ms(), Instant::now());
    let tasks: Vec<_> = (0..SERVERS as usize * TASKS)
        .map(|t| {
            let (l, stop) = (limiters[t % SERVERS as usize].clone(), stop.clone());
            tokio::spawn(async move {
                let (mut n, mut seen) = (0u64, Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    let before = now_ms();
                    let d = l.check("celebrity", 1).await.expect("decision");
                    n += 1;
                    if d.allowed() {
                        seen.push(Admission {
                            sent: before,
                            answered: now_ms(),
                            reset: d.reset_after().as_millis() as u64,
                        });
                    }
                    // A decision from a slice or the deny cache is ready at
                    // once and never yields: without this, two tasks would
                    // hold both workers (a server's tasks meet I/O anyway).
                    if n % 16 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                (n, seen)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut decisions, mut admitted) = (0, Vec::new());
    for t in tasks {
        let (n, seen) = t.await.expect("task");
        decisions += n;
        admitted.extend(seen);
    }
    let elapsed = clock.elapsed().as_secs_f64();
    Run {
        per_sec: decisions as f64 / elapsed,
        calls_per_decision: (target.calls() - calls) as f64 / decisions as f64,
        admitted,
        started,
        ended: now_ms(),
    }
}

/// The fixed window's admissions per whole window: (largest, smallest) ÷ limit.
fn windows(r: &Run, limit: u64) -> (f64, f64) {
    let mut per: std::collections::BTreeMap<u64, u64> = Default::default();
    for a in &r.admitted {
        // The window's end, a whole second: sent + reset within a few ms.
        let end = (a.sent + a.reset + 500) / 1000;
        *per.entry(end).or_default() += 1;
    }
    // Whole windows only: not the first or the last.
    let (first, last) = (r.started / 1000 + 1, r.ended / 1000);
    let whole: Vec<u64> = per.range(first + 1..=last).map(|(_, n)| *n).collect();
    let max = whole.iter().copied().max().unwrap_or(0) as f64 / limit as f64;
    let min = whole.iter().copied().min().unwrap_or(0) as f64 / limit as f64;
    (max, min)
}

/// The token bucket: admitted ÷ (capacity + rate × duration), and the
/// largest excess over `capacity + rate × interval` in any run of whole
/// 10 ms bins, counting the admissions sent and answered inside it: each
/// of those was decided inside it, so an excess is a real one. (Counted by
/// the time sent alone, a request that waited in flight counts early, and
/// a bucket that is exact seems to overshoot by a round trip's refill.)
fn bucket(r: &Run, limit: u64) -> (f64, i64) {
    let bins = ((r.ended - r.started) / 10 + 1) as usize;
    let bin = |t: u64| ((t.saturating_sub(r.started) / 10) as usize).min(bins - 1);
    // For each bin, the bins its admissions were sent in, sorted.
    let mut sent_by_answer = vec![Vec::new(); bins];
    for a in &r.admitted {
        sent_by_answer[bin(a.answered)].push(bin(a.sent));
    }
    for sent in &mut sent_by_answer {
        sent.sort_unstable();
    }
    let rate = limit as f64 / 1000.0;
    let mut worst = i64::MIN;
    for i in 0..bins {
        let mut inside = 0;
        for (j, sent) in sent_by_answer.iter().enumerate().skip(i) {
            // Answered in bin j, sent in bin i or later.
            inside += (sent.len() - sent.partition_point(|&s| s < i)) as i64;
            // Sent at or after its start and answered before its end (whole
            // ms, truncated alike), so decided inside it by Redis's clock.
            let allowed = limit as f64 + rate * ((j - i + 1) * 10) as f64;
            worst = worst.max(inside - allowed as i64);
        }
    }
    let ideal = limit as f64 + rate * (r.ended - r.started) as f64;
    (r.admitted.len() as f64 / ideal, worst)
}

async fn compare<A: Algorithm + Clone>(target: &Target, name: &str, alg: A, a: &Args) {
    let (mut plain, mut hot) = (Vec::new(), Vec::new());
    for i in 0..a.runs {
        let p = run(target, &alg, false, &format!("{name}-p{i}"), a.secs).await;
        let h = run(target, &alg, true, &format!("{name}-h{i}"), a.secs).await;
        let shape = |r: &Run| {
            if name.starts_with("fixed") {
                let (max, min) = windows(r, a.limit);
                format!("whole windows admitted max {max:.3} min {min:.3} of the limit")
            } else {
                let (share, excess) = bucket(r, a.limit);
                format!("admitted {share:.3} of capacity + rate x time, worst excess {excess}")
            }
        };
        println!(
            "  run {i}: without {:>10.0}/s {:.4} calls/decision ({})",
            p.per_sec,
            p.calls_per_decision,
            shape(&p)
        );
        println!(
            "         with    {:>10.0}/s {:.4} calls/decision ({})",
            h.per_sec,
            h.calls_per_decision,
            shape(&h)
        );
        plain.push(p);
        hot.push(h);
    }
    let med = |v: &[Run], f: fn(&Run) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
    println!(
        "{name}: median decisions/s with allotments {:.0}, without {:.0}: {:.1}x; calls/decision {:.4} vs {:.4}",
        med(&hot, |r| r.per_sec),
        med(&plain, |r| r.per_sec),
        med(&hot, |r| r.per_sec) / med(&plain, |r| r.per_sec),
        med(&hot, |r| r.calls_per_decision),
        med(&plain, |r| r.calls_per_decision),
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let a = args();
    let redis = Redis::from_env_or_start();
    let mut targets = vec![("redis", Target::Redis(redis.url.clone()))];
    if let Ok(nodes) = std::env::var("FLOODGATE_CLUSTER_NODES") {
        let nodes = nodes.split(',').map(|s| s.trim().to_string()).collect();
        targets.push(("cluster", Target::Cluster(nodes)));
    } else {
        println!("(FLOODGATE_CLUSTER_NODES not set: Redis only)");
    }
    println!(
        "nproc {}, {SERVERS} servers x {TASKS} tasks, limit {}/s, {} runs of {} s",
        support::nproc(),
        a.limit,
        a.runs,
        a.secs
    );
    for (what, target) in &targets {
        println!("== {what}");
        let l = a.limit;
        compare(
            target,
            "fixed_window",
            FixedWindow::new(l, Duration::from_secs(1)),
            &a,
        )
        .await;
        compare(target, "token_bucket", TokenBucket::new(l, l as f64), &a).await;
    }
}
