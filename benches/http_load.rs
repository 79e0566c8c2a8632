//! HTTP throughput of an axum hello app with and without a rate-limit
//! layer, in the same run: floodgate's `RateLimitLayer` against
//! `tower_governor`'s `GovernorLayer`, and where the CPU goes.
//!
//! ```text
//! apt-get install -y wrk                        # the load tool (required)
//! cargo bench --bench http_load                # 5 rounds × 4 apps × 5 s, wrk -t1 -c32
//! cargo bench --bench http_load -- --quick     # smoke pass
//! cargo bench --bench http_load -- --rounds 7 --secs 4 --conns 64
//! cargo bench --bench http_load -- --inrepo    # also the in-repo generator
//! cargo bench --bench http_load -- --redis     # also the layer on a RedisStore
//! cargo bench --bench http_load -- --noheaders # also the layer writing no fields
//! cargo bench --bench http_load -- --allocs    # and the server's allocations per request
//! cargo bench --bench http_load -- --server-threads 1   # the server on one worker thread
//! cargo bench --bench http_load -- --only floodgate --rounds 1 --secs 20   # to profile one app
//! ```
//!
//! The apps, each on its own loopback port, served by one tokio runtime
//! (threads named `srv`, 2 workers unless `--server-threads`):
//!
//! - `plain`: `GET /` answers "hello";
//! - `floodgate`: the same behind `RateLimitLayer` (GCRA 1000/s per key,
//!   key = the `x-api-key` header, its default IETF `RateLimit` and
//!   `RateLimit-Policy` fields on every response) on a `MemoryStore`;
//! - `tower_governor`: the same behind `tower_governor` 0.8's `GovernorLayer`
//!   keyed by the same header (its `KeyExtractor` trait), GCRA at the same
//!   quota (one cell per ms, burst 1000: everything admits), its defaults
//!   otherwise (no headers on admitted responses);
//! - `tower_governor_headers`: the same with its `use_headers()`
//!   (`x-ratelimit-limit`, `x-ratelimit-remaining` on admitted responses),
//!   like for like with floodgate's two fields;
//! - `floodgate_noheaders` (with `--noheaders`): floodgate's layer writing
//!   no rate-limit fields (`HeaderStyle::None`): the fields' cost, by
//!   difference;
//! - `redis` (with `--redis`): floodgate's layer on a `RedisStore` (its own
//!   `redis-server` on a free port, or `REDIS_URL`).
//!
//! Every request carries `x-api-key`, one of 10 000 values, so the limiters
//! see many keys and admit everything; the plain app ignores it.
//!
//! The load tool is `wrk -t1 -c<conns>` (default 32 connections) with a Lua
//! script rotating the 10 000 keys (requests pre-formatted in `init`, so
//! wrk spends little CPU of its own). With `--inrepo`, also a minimal
//! HTTP/1.1 keep-alive client in this file (threads named `cli`, 2
//! workers), reproducible wherever Rust builds. Each generator is run
//! against the apps in turn, `--rounds` times (interleaved, so drift and
//! the other processes on the machine hit all apps alike; each round starts
//! one app later than the last, so no app always follows the same one);
//! ratios are taken between apps of the same round, and their medians
//! printed.
//!
//! Client and server share the machine's cores (2 here): the generator's
//! CPU is taken from the server's. The CPU columns (from `/proc`) say where
//! the time went: µs of CPU per request in the server's threads, in the
//! generator, and in `redis-server`.

mod support;

use axum::{routing::get, Router};
use floodgate::algorithm::Gcra;
use floodgate::headers::HeaderStyle;
use floodgate::key::Header;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Limiter, RateLimitLayer};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{int, median, Redis, Rng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::{GovernorError, GovernorLayer};

const KEYS: usize = 10_000;

/// The system allocator, counting allocations while `COUNTING` is on
/// (`--allocs`: one relaxed load per allocation otherwise).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed to `System` unchanged.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract is `System`'s.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;
/// The key header, as floodgate and `tower_governor` read it.
const KEY_HEADER: &str = "x-api-key";

struct Opts {
    rounds: usize,
    secs: f64,
    conns: usize,
    inrepo: bool,
    redis: bool,
    /// Also floodgate's layer with no rate-limit fields
    /// (`HeaderStyle::None`): what the two fields cost, by difference.
    noheaders: bool,
    /// Count the server's allocations per request (wrk only: the in-repo
    /// generator's would be counted too).
    allocs: bool,
    /// Only these apps (for profiling one); the table then has no ratios
    /// unless `plain` is among them.
    only: Option<Vec<String>>,
    /// The server runtime's worker threads (2: one per core here; 1 takes
    /// the sharing between cores out of the comparison).
    server_threads: usize,
}

impl Opts {
    fn parse() -> Opts {
        let mut o = Opts {
            rounds: 5,
            secs: 5.0,
            conns: 32,
            inrepo: false,
            redis: false,
            noheaders: false,
            allocs: false,
            only: None,
            server_threads: 2,
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            let mut num = || args.next().and_then(|v| v.parse::<f64>().ok());
            match a.as_str() {
                "--quick" => {
                    o.rounds = 1;
                    o.secs = 1.0;
                }
                "--rounds" => o.rounds = num().expect("--rounds N") as usize,
                "--secs" => o.secs = num().expect("--secs S"),
                "--conns" => o.conns = num().expect("--conns N") as usize,
                "--inrepo" => o.inrepo = true,
                "--noheaders" => o.noheaders = true,
                "--redis" => o.redis = true,
                "--allocs" => o.allocs = true,
                "--server-threads" => {
                    o.server_threads = num().expect("--server-threads N") as usize;
                }
                "--only" => {
                    o.only = Some(
                        args.next()
                            .expect("--only plain,floodgate,tower_governor,tower_governor_headers,redis")
                            .split(',')
                            .map(String::from)
                            .collect(),
                    );
                }
                "--bench" => {}
                other => panic!(
                    "unknown argument {other}; use --quick, --rounds N, --secs S, --conns N, --server-threads N, --inrepo, --redis, --allocs, --only a,b"
                ),
            }
        }
        o
    }
}

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

fn floodgate_app(store: Store, fields: HeaderStyle) -> Router {
    let limiter = Limiter::new(store, Gcra::new(1000, Duration::from_secs(1)));
    let key = Header::try_new(KEY_HEADER).unwrap();
    hello().layer(RateLimitLayer::new(limiter, key).headers(fields))
}

/// `tower_governor`'s key: the `x-api-key` header, as floodgate's `Header`
/// takes it (an owned `String`).
#[derive(Clone)]
struct ApiKey;

impl tower_governor::key_extractor::KeyExtractor for ApiKey {
    type Key = String;

    fn extract<T>(&self, req: &http::Request<T>) -> Result<String, GovernorError> {
        req.headers()
            .get(KEY_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
            .ok_or(GovernorError::UnableToExtractKey)
    }
}

fn tower_governor_app() -> Router {
    // The same quota as floodgate's: 1000/s, a burst of 1000.
    let config = GovernorConfigBuilder::default()
        .per_millisecond(1)
        .burst_size(1000)
        .key_extractor(ApiKey)
        .finish()
        .unwrap();
    hello().layer(GovernorLayer::new(config))
}

/// The same with `tower_governor`'s headers on (`use_headers`:
/// `x-ratelimit-limit` and `x-ratelimit-remaining` on every admitted
/// response): like for like with floodgate's two fields.
fn tower_governor_headers_app() -> Router {
    let config = GovernorConfigBuilder::default()
        .per_millisecond(1)
        .burst_size(1000)
        .key_extractor(ApiKey)
        .use_headers()
        .finish()
        .unwrap();
    hello().layer(GovernorLayer::new(config))
}

/// One measured run: requests/s, statuses, CPU per request.
#[derive(Clone, Copy, Default)]
struct Run {
    rps: f64,
    limited: f64,
    server_us: f64,
    client_us: f64,
    redis_us: f64,
    redis_calls: f64,
    ping_calls: f64,
    /// Write system calls (write, writev) per request in the server's
    /// threads (`recv`, which tokio reads with, is not counted by `/proc`).
    sys_w: f64,
    /// Allocations per request in the process (`--allocs`, wrk only).
    allocs: f64,
}

/// The in-repo generator: `conns` keep-alive connections for `time`.
/// Returns (requests, 200s, 429s, others).
async fn inrepo(addr: SocketAddr, conns: usize, time: Duration) -> (u64, u64, u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new([
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
        AtomicU64::new(0),
    ]);
    let tasks: Vec<_> = (0..conns)
        .map(|c| {
            let (stop, counts) = (stop.clone(), counts.clone());
            tokio::spawn(async move {
                let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
                s.set_nodelay(true).unwrap();
                let mut rng = Rng::new(c as u64 + 1);
                let mut buf = vec![0u8; 16 * 1024];
                let mut req = Vec::with_capacity(128);
                let (mut n, mut ok, mut limited, mut other) = (0u64, 0u64, 0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    req.clear();
                    req.extend_from_slice(b"GET / HTTP/1.1\r\nhost: bench\r\nx-api-key: ");
                    req.extend_from_slice(format!("{:012}", rng.below(KEYS)).as_bytes());
                    req.extend_from_slice(b"\r\n\r\n");
                    s.write_all(&req).await.expect("write");
                    match read_response(&mut s, &mut buf).await {
                        200 => ok += 1,
                        429 => limited += 1,
                        _ => other += 1,
                    }
                    n += 1;
                }
                for (i, v) in [n, ok, limited, other].into_iter().enumerate() {
                    counts[i].fetch_add(v, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(time).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let g = |i: usize| counts[i].load(Ordering::Relaxed);
    (g(0), g(1), g(2), g(3))
}

/// Reads one response (status line, headers, `content-length` body) and
/// returns its status. Enough for our own server, which never chunks these.
async fn read_response(s: &mut tokio::net::TcpStream, buf: &mut [u8]) -> u16 {
    let mut len = 0;
    loop {
        let n = s.read(&mut buf[len..]).await.expect("read");
        assert!(n > 0, "server closed the connection");
        len += n;
        if let Some(end) = buf[..len].windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end]).expect("ascii head");
            let status: u16 = head[9..12].parse().expect("status");
            let body: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .expect("content-length");
            let mut have = len - (end + 4);
            while have < body {
                let n = s.read(&mut buf[..]).await.expect("read body");
                assert!(n > 0, "server closed the connection");
                have += n;
            }
            assert_eq!(have, body, "no pipelining: nothing after the body");
            return status;
        }
    }
}

/// Rotates the 10 000 keys (in a scattered order), each request formatted
/// once in `init`.
const WRK_LUA: &str = r#"
local reqs = {}
local n = 0
init = function(args)
  for i = 0, 9999 do
    reqs[i + 1] = wrk.format("GET", "/", {["x-api-key"] = string.format("%012d", (i * 7919) % 10000)})
  end
end
request = function()
  n = n % 10000 + 1
  return reqs[n]
end
"#;

/// `wrk` against `addr`: (requests/s, non-2xx responses, wrk's CPU time).
fn wrk(
    addr: SocketAddr,
    conns: usize,
    secs: f64,
    script: &std::path::Path,
) -> Option<(f64, f64, Duration)> {
    // The shell reports its waited-for children's CPU (cutime, cstime of
    // /proc/$$/stat): wrk's own, measured by the kernel.
    let cmd = format!(
        "wrk -t1 -c{conns} -d{}s -s {} http://{addr}/ && cat /proc/$$/stat",
        secs.ceil() as u64,
        script.display()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &cmd])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rps = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())?;
    let non2xx = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Non-2xx or 3xx responses:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    let stat = text.lines().last()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(13)?.parse::<u64>().ok()? + f.get(14)?.parse::<u64>().ok()?;
    Some((rps, non2xx, Duration::from_millis(ticks * 10)))
}

fn main() {
    let opts = Opts::parse();
    if std::process::Command::new("wrk")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("http_load needs `wrk` on PATH: install it (Debian/Ubuntu: `apt-get install -y wrk`, macOS: `brew install wrk`)");
        std::process::exit(2);
    }
    let mut apps = vec![
        "plain",
        "floodgate",
        "tower_governor",
        "tower_governor_headers",
    ];
    if opts.noheaders {
        apps.push("floodgate_noheaders");
    }
    if opts.redis {
        apps.push("redis");
    }
    let redis = opts.redis.then(Redis::from_env_or_start);
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.server_threads)
        .thread_name("srv")
        .enable_all()
        .build()
        .unwrap();
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("cli")
        .enable_all()
        .build()
        .unwrap();
    let addrs: Vec<SocketAddr> = server_rt.block_on(async {
        let mut addrs = Vec::new();
        for &name in &apps {
            let app = match name {
                "plain" => hello(),
                "floodgate" => floodgate_app(MemoryStore::new().into(), HeaderStyle::Ietf),
                "floodgate_noheaders" => {
                    floodgate_app(MemoryStore::new().into(), HeaderStyle::None)
                }
                "tower_governor" => tower_governor_app(),
                "tower_governor_headers" => tower_governor_headers_app(),
                _ => floodgate_app(
                    RedisStore::from_url(&redis.as_ref().unwrap().url)
                        .unwrap()
                        .into(),
                    HeaderStyle::Ietf,
                ),
            };
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addrs.push(listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await });
        }
        addrs
    });
    let script = std::env::temp_dir().join(format!("floodgate-wrk-{}.lua", std::process::id()));
    std::fs::write(&script, WRK_LUA).unwrap();
    let generators: Vec<&str> = if opts.inrepo {
        vec!["wrk", "inrepo"]
    } else {
        vec!["wrk"]
    };
    println!(
        "floodgate http_load: nproc {}, {} connections, {} s per run, {} rounds, generators: {}{}",
        support::nproc(),
        opts.conns,
        opts.secs,
        opts.rounds,
        generators.join(", "),
        redis
            .as_ref()
            .map(|r| format!(", Redis {}", r.version()))
            .unwrap_or_default(),
    );
    println!("load average at start: {}", support::loadavg());
    let time = Duration::from_secs_f64(opts.secs);
    // Warm every app (connections to Redis, limiter keys, page cache).
    for &addr in &addrs {
        client_rt.block_on(inrepo(addr, opts.conns, Duration::from_millis(500)));
    }
    // runs[generator][app] = one Run per round.
    let mut runs = vec![vec![Vec::<Run>::new(); apps.len()]; generators.len()];
    for round in 0..opts.rounds {
        for (g, gen) in generators.iter().enumerate() {
            // Each round starts one app later: no app always runs right
            // after the same one (what the machine does between runs, a
            // warm or a cold cache, falls on each in turn).
            for k in 0..addrs.len() {
                let a = (k + round) % addrs.len();
                let addr = addrs[a];
                if opts
                    .only
                    .as_ref()
                    .is_some_and(|o| !o.iter().any(|n| n == apps[a]))
                {
                    runs[g][a].push(Run {
                        rps: f64::NAN,
                        ..Run::default()
                    });
                    continue;
                }
                if let Some(r) = &redis {
                    r.reset_stats();
                }
                let redis_cpu = || {
                    redis
                        .as_ref()
                        .and_then(|r| support::process_cpu(r.pid()))
                        .unwrap_or_default()
                };
                let redis_calls =
                    |command: &str| redis.as_ref().map_or(0, |r| r.command_stats(command).0);
                let srv0 = support::threads_cpu("srv").unwrap_or_default();
                let io0 = support::threads_syscalls("srv").unwrap_or_default();
                let cli0 = support::threads_cpu("cli").unwrap_or_default();
                let red0 = redis_cpu();
                COUNTING.store(opts.allocs && *gen == "wrk", Ordering::Relaxed);
                let allocs0 = ALLOCS.load(Ordering::Relaxed);
                let started = Instant::now();
                let (rps, ok, limited, other, client_cpu) = if *gen == "inrepo" {
                    let (n, ok, lim, oth) = client_rt.block_on(inrepo(addr, opts.conns, time));
                    let secs = started.elapsed().as_secs_f64();
                    let cli = support::threads_cpu("cli")
                        .unwrap_or_default()
                        .saturating_sub(cli0);
                    (n as f64 / secs, ok as f64, lim as f64, oth as f64, cli)
                } else {
                    let (rps, non2xx, cpu) = wrk(addr, opts.conns, opts.secs, &script)
                        .expect("wrk ran and printed Requests/sec");
                    (rps, rps * opts.secs - non2xx, non2xx, 0.0, cpu)
                };
                let secs = started.elapsed().as_secs_f64();
                COUNTING.store(false, Ordering::Relaxed);
                let allocs = ALLOCS.load(Ordering::Relaxed) - allocs0;
                let srv = support::threads_cpu("srv")
                    .unwrap_or_default()
                    .saturating_sub(srv0);
                let io = support::threads_syscalls("srv").unwrap_or_default();
                let red = redis_cpu().saturating_sub(red0);
                let reqs = (rps * secs).max(1.0);
                let per = |d: Duration| d.as_secs_f64() * 1e6 / reqs;
                let run = Run {
                    rps,
                    limited,
                    server_us: per(srv),
                    client_us: per(client_cpu),
                    redis_us: per(red),
                    redis_calls: (redis_calls("fcall") + redis_calls("evalsha")) as f64 / reqs,
                    sys_w: (io.1 - io0.1) as f64 / reqs,
                    allocs: allocs as f64 / reqs,
                    // deadpool-redis' recycle (UNWATCH + PING), if the store
                    // checks connections out per call.
                    ping_calls: (redis_calls("ping") + redis_calls("unwatch")) as f64 / reqs,
                };
                eprintln!(
                    "  round {} {gen:<6} {:<14} {:>8} req/s  (2xx: {}, not 2xx: {}, other: {})  cpu µs/req: server {:.1}, client {:.1}, redis {:.1}",
                    round + 1,
                    apps[a],
                    int(rps),
                    int(ok),
                    int(limited),
                    int(other),
                    run.server_us,
                    run.client_us,
                    run.redis_us
                );
                runs[g][a].push(run);
            }
        }
    }
    let _ = std::fs::remove_file(&script);
    println!("load average at end: {}", support::loadavg());

    println!();
    println!(
        "## HTTP throughput, axum hello ± a rate-limit layer (GCRA, key x-api-key over {KEYS} keys), \
         median of {} round(s); nproc {}, client and server on the same cores",
        opts.rounds,
        support::nproc()
    );
    println!();
    println!("| generator | app | requests/s | × plain | × tower_governor | × tower_governor with headers | × plain from CPU/request | not 2xx | CPU µs/request: server | generator | redis-server | Redis calls per request (FCALL or EVALSHA + PING/UNWATCH) | server write syscalls per request | allocations per request |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (g, gen) in generators.iter().enumerate() {
        // Same-round ratio of app `a` to app `b`, median over rounds.
        let ratio = |a: usize, b: usize| {
            median(
                &runs[g][a]
                    .iter()
                    .zip(&runs[g][b])
                    .map(|(r, p)| r.rps / p.rps)
                    .collect::<Vec<_>>(),
            )
        };
        // Apps left out by `--only` have no row, and ratios to them a dash.
        let ran = |a: usize| runs[g][a].iter().any(|r| !r.rps.is_nan());
        let shown = |a: usize, b: usize| {
            if ran(b) {
                format!("{:.3}", ratio(a, b))
            } else {
                "—".to_owned()
            }
        };
        for (a, name) in apps.iter().enumerate() {
            if !ran(a) {
                continue;
            }
            let col =
                |f: &dyn Fn(&Run) -> f64| median(&runs[g][a].iter().map(f).collect::<Vec<_>>());
            // The same ratio from CPU time per request (server + generator +
            // redis-server): what the throughput ratio is on a machine whose
            // cores are the bottleneck, and steadier when other processes
            // take CPU during one run but not another.
            let total = |r: &Run| r.server_us + r.client_us + r.redis_us;
            let cpu_ratio = median(
                &runs[g][a]
                    .iter()
                    .zip(&runs[g][0])
                    .map(|(r, p)| total(p) / total(r))
                    .collect::<Vec<_>>(),
            );
            println!(
                "| {gen} | {name} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.2} + {:.2} | {:.2} | {:.2} |",
                int(col(&|r| r.rps)),
                shown(a, 0),
                shown(a, 2),
                shown(a, 3),
                if ran(0) { format!("{cpu_ratio:.3}") } else { "—".to_owned() },
                int(col(&|r| r.limited)),
                col(&|r| r.server_us),
                col(&|r| r.client_us),
                col(&|r| r.redis_us),
                col(&|r| r.redis_calls),
                col(&|r| r.ping_calls),
                col(&|r| r.sys_w),
                col(&|r| r.allocs),
            );
        }
    }
}
