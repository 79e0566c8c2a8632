//! HTTP throughput of an axum hello app with and without `RateLimitLayer`,
//! in the same run, and where the CPU goes.
//!
//! ```text
//! cargo bench --bench http_load                # ~90 s: 3 rounds × 3 apps × 2 generators
//! cargo bench --bench http_load -- --quick     # smoke pass
//! cargo bench --bench http_load -- --rounds 5 --secs 4 --conns 64 --no-wrk
//! cargo bench --bench http_load -- --only redis --rounds 1 --secs 20   # to profile one app
//! ```
//!
//! Three apps, each on its own loopback port, served by one tokio runtime
//! (threads named `srv`, 2 workers):
//!
//! - `plain`: `GET /` answers "hello";
//! - `memory`: the same behind `RateLimitLayer` (GCRA 1000/s per client,
//!   key = the `x-client` header) on a `MemoryStore`;
//! - `redis`: the same layer on a `RedisStore` (its own `redis-server` on a
//!   free port, or `REDIS_URL`).
//!
//! Every request carries `x-client`, one of 10 000 values, so the limiter
//! sees many keys and admits (almost) everything; the plain app ignores it.
//!
//! Two load generators, each run against the three apps in turn, `--rounds`
//! times (interleaved, so drift hits all apps alike); ratios are taken
//! against the plain app of the same round, and the medians printed:
//!
//! - `inrepo`: a minimal HTTP/1.1 keep-alive client in this file (threads
//!   named `cli`, 2 workers), `--conns` connections, one request at a time
//!   each: reproducible wherever Rust builds;
//! - `wrk` (if on PATH): `wrk -t2 -c<conns>` with a Lua script setting the
//!   same header.
//!
//! Client and server share the machine's cores (2 here): the generator's
//! CPU is taken from the server's, so ratios are conservative for the
//! layer's own cost only when the server is the bottleneck. The CPU columns
//! (from `/proc`) say where the time went: µs of CPU per request in the
//! server's threads, in the generator, and in `redis-server`.

mod support;

use axum::{routing::get, Router};
use floodgate::algorithm::Gcra;
use floodgate::key::Header;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Limiter, RateLimitLayer};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{int, median, Redis, Rng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const KEYS: usize = 10_000;
const APPS: [&str; 3] = ["plain", "memory", "redis"];

struct Opts {
    rounds: usize,
    secs: f64,
    conns: usize,
    wrk: bool,
    /// Only these apps (for profiling one); the table then has no ratios
    /// unless `plain` is among them.
    only: Option<Vec<String>>,
}

impl Opts {
    fn parse() -> Opts {
        let mut o = Opts {
            rounds: 3,
            secs: 5.0,
            conns: 64,
            wrk: true,
            only: None,
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
                "--no-wrk" => o.wrk = false,
                "--only" => {
                    o.only = Some(
                        args.next()
                            .expect("--only plain,memory,redis")
                            .split(',')
                            .map(String::from)
                            .collect(),
                    );
                }
                "--bench" => {}
                other => panic!(
                    "unknown argument {other}; use --quick, --rounds N, --secs S, --conns N, --no-wrk, --only a,b"
                ),
            }
        }
        o
    }
}

fn app(store: Option<Store>) -> Router {
    let hello = Router::new().route("/", get(|| async { "hello" }));
    match store {
        None => hello,
        Some(store) => {
            let limiter = Limiter::new(store, Gcra::new(1000, Duration::from_secs(1)));
            let key = Header::try_new("x-client").unwrap();
            hello.layer(RateLimitLayer::new(limiter, key))
        }
    }
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
                    req.extend_from_slice(b"GET / HTTP/1.1\r\nhost: bench\r\nx-client: ");
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

const WRK_LUA: &str = r#"
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/", {["x-client"] = string.format("%012d", (n * 7919) % 10000)})
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
        "wrk -t2 -c{conns} -d{}s -s {} http://{addr}/ && cat /proc/$$/stat",
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
    let redis = Redis::from_env_or_start();
    let redis_pid = redis.pid();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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
    let redis_store = RedisStore::from_url(&redis.url).unwrap();
    let addrs: Vec<SocketAddr> = server_rt.block_on(async {
        let mut addrs = Vec::new();
        for name in APPS {
            let store: Option<Store> = match name {
                "plain" => None,
                "memory" => Some(MemoryStore::new().into()),
                _ => Some(redis_store.clone().into()),
            };
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addrs.push(listener.local_addr().unwrap());
            let app = app(store);
            tokio::spawn(async move { axum::serve(listener, app).await });
        }
        addrs
    });
    let has_wrk = opts.wrk
        && std::process::Command::new("wrk")
            .arg("--version")
            .output()
            .is_ok();
    let script = std::env::temp_dir().join(format!("floodgate-wrk-{}.lua", std::process::id()));
    std::fs::write(&script, WRK_LUA).unwrap();
    let generators: Vec<&str> = if has_wrk {
        vec!["inrepo", "wrk"]
    } else {
        vec!["inrepo"]
    };
    println!(
        "floodgate http_load: nproc {}, Redis {}, {} connections, {} s per run, {} rounds, generators: {}{}",
        support::nproc(),
        redis.version(),
        opts.conns,
        opts.secs,
        opts.rounds,
        generators.join(", "),
        if opts.wrk && !has_wrk { " (wrk not found: install it for the second generator)" } else { "" }
    );
    println!("load average at start: {}", support::loadavg());
    let time = Duration::from_secs_f64(opts.secs);
    // Warm every app (connections to Redis, limiter keys, page cache).
    for &addr in &addrs {
        client_rt.block_on(inrepo(addr, opts.conns, Duration::from_millis(500)));
    }
    // runs[generator][app] = one Run per round.
    let mut runs = vec![vec![Vec::<Run>::new(); APPS.len()]; generators.len()];
    for round in 0..opts.rounds {
        for (g, gen) in generators.iter().enumerate() {
            for (a, &addr) in addrs.iter().enumerate() {
                if opts
                    .only
                    .as_ref()
                    .is_some_and(|o| !o.iter().any(|n| n == APPS[a]))
                {
                    runs[g][a].push(Run {
                        rps: f64::NAN,
                        ..Run::default()
                    });
                    continue;
                }
                redis.reset_stats();
                let srv0 = support::threads_cpu("srv").unwrap_or_default();
                let io0 = support::threads_syscalls("srv").unwrap_or_default();
                let cli0 = support::threads_cpu("cli").unwrap_or_default();
                let red0 = support::process_cpu(redis_pid).unwrap_or_default();
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
                let srv = support::threads_cpu("srv")
                    .unwrap_or_default()
                    .saturating_sub(srv0);
                let io = support::threads_syscalls("srv").unwrap_or_default();
                let red = support::process_cpu(redis_pid)
                    .unwrap_or_default()
                    .saturating_sub(red0);
                let reqs = (rps * secs).max(1.0);
                let per = |d: Duration| d.as_secs_f64() * 1e6 / reqs;
                let run = Run {
                    rps,
                    limited,
                    server_us: per(srv),
                    client_us: per(client_cpu),
                    redis_us: per(red),
                    redis_calls: (redis.command_stats("fcall").0 + redis.command_stats("evalsha").0)
                        as f64
                        / reqs,
                    sys_w: (io.1 - io0.1) as f64 / reqs,
                    // deadpool-redis' recycle (UNWATCH + PING), if the store
                    // checks connections out per call.
                    ping_calls: (redis.command_stats("ping").0 + redis.command_stats("unwatch").0)
                        as f64
                        / reqs,
                };
                eprintln!(
                    "  round {} {gen:<6} {:<6} {:>8} req/s  (200: {}, 429: {}, other: {})  cpu µs/req: server {:.1}, client {:.1}, redis {:.1}",
                    round + 1,
                    APPS[a],
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
        "## HTTP throughput, axum hello ± RateLimitLayer (GCRA, key x-client over {KEYS} clients), \
         median of {} round(s); nproc {}, client and server on the same cores",
        opts.rounds,
        support::nproc()
    );
    println!();
    println!("| generator | app | requests/s | × plain (memory ≥ 0.9) | × plain from CPU/request | 429s | CPU µs/request: server | generator | redis-server | Redis calls per request (FCALL or EVALSHA + PING/UNWATCH) | server write syscalls per request |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (g, gen) in generators.iter().enumerate() {
        for (a, name) in APPS.iter().enumerate() {
            let col =
                |f: &dyn Fn(&Run) -> f64| median(&runs[g][a].iter().map(f).collect::<Vec<_>>());
            let ratios: Vec<f64> = runs[g][a]
                .iter()
                .zip(&runs[g][0])
                .map(|(r, p)| r.rps / p.rps)
                .collect();
            let ratio = median(&ratios);
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
            let mark = if *name == "memory" && ratio < 0.9 {
                " ✗"
            } else {
                ""
            };
            println!(
                "| {gen} | {name} | {} | {ratio:.2}{mark} | {cpu_ratio:.2} | {} | {:.1} | {:.1} | {:.1} | {:.2} + {:.2} | {:.2} |",
                int(col(&|r| r.rps)),
                int(col(&|r| r.limited)),
                col(&|r| r.server_us),
                col(&|r| r.client_us),
                col(&|r| r.redis_us),
                col(&|r| r.redis_calls),
                col(&|r| r.ping_calls),
                col(&|r| r.sys_w),
            );
        }
    }
}
