//! floodgate's fixed window against rate-limiter-flexible 11 (Node,
//! `RateLimiterRedis` on ioredis with auto-pipelining), on the same Redis,
//! in the same run: the peer row of BENCHMARKS.md.
//!
//! ```text
//! cargo bench --bench peer_load                       # 3 rounds of 5 s each
//! cargo bench --bench peer_load -- --secs 3 --runs 5
//! ```
//!
//! It needs Node.js and npm (Debian/Ubuntu: `apt-get install nodejs npm`;
//! or <https://nodejs.org>); it installs the peer itself, once, with
//! `npm install rate-limiter-flexible@11 ioredis@5` into
//! `~/.cache/floodgate/peer` (the tests never need Node).
//!
//! Both sides: 64 concurrent callers (tokio tasks; Node async callers on
//! one event loop), each deciding in a loop for `--secs` over 10 000 keys
//! `client-<n>`, in the same order (`benches/peer/rlf.js`), a fixed window
//! of a limit so large that everything is admitted (what is compared is
//! the cost of a decision, not how many are denied). Both use the same
//! `redis-server`, flushed before each side's turn; the rounds alternate,
//! and the medians and their ratio are printed.

mod support;

use floodgate::algorithm::FixedWindow;
use floodgate::failure::FailurePolicy;
use floodgate::store::RedisStore;
use floodgate::Limiter;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use support::{measure, median, Redis};

const CALLERS: usize = 64;
const KEYS: usize = 10_000;

fn args() -> (f64, usize) {
    let (mut secs, mut runs) = (5.0, 3);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().expect("a value after the flag");
        match flag.as_str() {
            "--secs" => secs = value().parse().expect("--secs S"),
            "--runs" => runs = value().parse().expect("--runs N"),
            "--bench" => {}
            other => panic!("unknown argument {other}; use --secs S, --runs N"),
        }
    }
    (secs, runs)
}

/// Where the peer is installed; installed there first if it is not.
fn peer_dir() -> PathBuf {
    let home = std::env::var("HOME").expect("HOME");
    let dir = PathBuf::from(home).join(".cache/floodgate/peer");
    if dir.join("node_modules/rate-limiter-flexible").exists() {
        return dir;
    }
    std::fs::create_dir_all(&dir).expect("cache dir");
    let status = Command::new("npm")
        .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .args(["rate-limiter-flexible@11", "ioredis@5"])
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "npm could not run ({e}): install Node.js and npm \
                 (Debian/Ubuntu `apt-get install nodejs npm`, or https://nodejs.org)"
            )
        });
    assert!(status.success(), "npm install of the peer failed");
    dir
}

/// The peer's decisions per second.
fn peer(redis: &Redis, dir: &std::path::Path, secs: f64) -> f64 {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/peer/rlf.js");
    let out = Command::new("node")
        .arg(script)
        .args([
            &redis.url,
            &secs.to_string(),
            &CALLERS.to_string(),
            &KEYS.to_string(),
        ])
        .env("NODE_PATH", dir.join("node_modules"))
        .output()
        .expect("node");
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> f64 {
        text.split(&format!("\"{name}\":"))
            .nth(1)
            .and_then(|v| v.split([',', '}']).next())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "unexpected output of the peer: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    };
    assert!(field("errors") == 0.0, "the peer had errors: {text}");
    field("decisions") / field("secs")
}

fn main() {
    let (secs, runs) = args();
    let dir = peer_dir();
    let redis = Redis::from_env_or_start();
    let node = Command::new("node")
        .arg("--version")
        .output()
        .expect("node");
    println!(
        "nproc {}, Redis {}, node {}, {CALLERS} callers, {KEYS} keys, {runs} rounds of {secs} s",
        support::nproc(),
        redis.version(),
        String::from_utf8_lossy(&node.stdout).trim()
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let limiter = Limiter::builder(
        RedisStore::from_url(&redis.url).expect("store"),
        FixedWindow::new(1 << 40, Duration::from_secs(60)),
    )
    .name("peer-bench")
    .on_store_failure(FailurePolicy::ReturnError)
    .timeout(Duration::from_secs(5))
    .build()
    .expect("limiter");
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("client-{i}")).collect());
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for run in 1..=runs {
        redis.flushall();
        let (l, k) = (limiter.clone(), keys.clone());
        let fg = rt.block_on(measure(CALLERS, secs, move |t, i| {
            let (l, k) = (l.clone(), k.clone());
            async move {
                let key = &k[(t * 7919 + i as usize * 104_729) % KEYS];
                l.check(key, 1).await.expect("decision");
            }
        }));
        redis.flushall();
        let rlf = peer(&redis, &dir, secs);
        println!(
            "run {run}: floodgate {fg:>9.0}/s  rate-limiter-flexible {rlf:>9.0}/s  ratio {:.2}",
            fg / rlf
        );
        ours.push(fg);
        theirs.push(rlf);
    }
    let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(a, b)| a / b).collect();
    println!(
        "median: floodgate {:.0}/s, rate-limiter-flexible {:.0}/s, ratio {:.2} (range {:.2}-{:.2})",
        median(&ours),
        median(&theirs),
        median(&ratios),
        ratios.iter().copied().fold(f64::MAX, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
    );
}
