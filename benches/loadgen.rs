//! Load generator for `Limiter::check` on `RedisStore`, against
//! `redis-benchmark` running floodgate's own `FCALL`, in the same run.
//!
//! ```text
//! cargo bench --bench loadgen                 # ~80 s, one run
//! cargo bench --bench loadgen -- --runs 3     # medians of 3 runs, ~4 min
//! cargo bench --bench loadgen -- --quick      # smoke pass, ~20 s
//! cargo bench --bench loadgen -- --only gcra,token_bucket --no-deny
//! cargo bench --bench loadgen -- --only token_bucket --no-deny --loop-secs 20   # to profile Redis
//! REDIS_URL=redis://127.0.0.1:7000 cargo bench --bench loadgen   # existing server
//! FLOODGATE_MAX_PER_CALL=1 cargo bench --bench loadgen   # one call per decision
//! ```
//!
//! Without `REDIS_URL` it starts its own `redis-server` on a free loopback
//! port. With `REDIS_URL` it FLUSHALLs and resets the statistics of that
//! server: never point it at one holding data.
//!
//! For each algorithm and each traffic (`admit`: 10 000 clients, a quota far
//! above what each sees, so nearly every decision admits; `deny`: the same
//! clients, each having spent its quota of 1 per hour, so every decision is
//! denied):
//!
//! 1. **capture**: one `Limiter::check` under `MONITOR` gives the exact
//!    `FCALL` floodgate sends (function name, key layout, ARGV). The code is
//!    also rebuilt from `lua/` as `build.rs` joins it, and the
//!    library name its SHA gives checked against the captured one.
//! 2. **rb -P16**: `redis-benchmark -c 50 -P 16` running that very command,
//!    with the user key replaced by `__rand_int__` (`-r 10000`): the same
//!    12-digit keys floodgate is given below.
//! 3. **rb -P1**: the same without pipelining; and **rb lesson**: `-P 16`
//!    running the reference lesson's one-key token-bucket script
//!    (`tests/baseline/textbook_token_bucket.lua`) as `EVALSHA`.
//! 4. **floodgate**: `Limiter::check` from 64 tokio tasks (and again on a
//!    store with one call per decision, `max_decisions_per_call(1)`, for
//!    the same-run ratios of throughput and Redis µs per decision) on a multi-thread
//!    runtime (2 workers here) for a fixed time: decisions/s, and Redis calls
//!    per decision from `INFO commandstats` (`FCALL`, and the `UNWATCH` +
//!    `PING` a deadpool-redis pool sends to recycle a connection).
//! 5. **latency** (admit only): open loop at half the rate of 4: a pacer
//!    thread issues checks on schedule; each check's latency counts from its
//!    *scheduled* start, so a stalled client is not hidden (no coordinated
//!    omission).
//! 6. **server CPU per decision**: the captured floodgate command and the
//!    textbook script of the same algorithm (`tests/baseline/textbook_*.lua`:
//!    the plain scripts, e.g. `INCR` + `PEXPIRE` for the fixed window), each
//!    driven by the same client (64 tasks on one multiplexed connection, same
//!    key sequence, same count, now from the client clock for the textbook
//!    script) after `CONFIG RESETSTAT`; `usec_per_call` of `fcall`
//!    (floodgate) and `evalsha` (textbook) from `INFO commandstats`, the
//!    lower of two alternated rounds each. floodgate is driven twice: as
//!    captured (`now` = '', Redis reads TIME) and with the client's `now` as
//!    the textbook script gets it (like for like).
//!
//! 7. **Redis's own ceiling**: `redis-server`'s whole CPU (user + system,
//!    from `/proc`, so on this machine only) a decision in 4 and a call of
//!    the lesson's script in 3, with how busy Redis was. With Redis
//!    saturated by floodgate, the × lesson ratio could be at most
//!    (1 / CPU a decision) / the lesson's rate: the row's ceiling whatever
//!    the client does.
//!
//! Client, `redis-benchmark` and `redis-server` share the machine's cores
//! (`nproc` is printed): compare the ratios, not the absolute numbers.

mod support;

use floodgate::algorithm::{
    Algorithm, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket,
};
use floodgate::store::RedisStore;
use floodgate::Limiter;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{int, median, quantile, Redis, Rng};

const KEYS: usize = 10_000;
const TASKS: usize = 64;
/// The user key given to floodgate at capture time; `redis-benchmark`'s
/// `__rand_int__` takes its place (a 12-digit number below `-r`).
const CAPTURE_KEY: &str = "000000000042";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Traffic {
    Admit,
    Deny,
}

impl Traffic {
    fn name(self) -> &'static str {
        match self {
            Traffic::Admit => "admit",
            Traffic::Deny => "deny",
        }
    }
}

struct Opts {
    quick: bool,
    runs: usize,
    deny: bool,
    only: Option<Vec<String>>,
    /// The open-loop rate as a share of the closed-loop rate (default ½).
    latency_at: f64,
    /// How long each closed and open loop runs (`--loop-secs`; default
    /// 1.5 s, 0.4 s with `--quick`): longer to profile one.
    loop_secs: Option<f64>,
}

impl Opts {
    fn parse() -> Opts {
        let mut o = Opts {
            quick: false,
            runs: 1,
            deny: true,
            only: None,
            latency_at: 0.5,
            loop_secs: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--quick" => o.quick = true,
                "--no-deny" => o.deny = false,
                "--runs" => o.runs = args.next().and_then(|n| n.parse().ok()).expect("--runs N"),
                "--only" => {
                    o.only = Some(
                        args.next()
                            .expect("--only a,b")
                            .split(',')
                            .map(String::from)
                            .collect(),
                    );
                }
                "--latency-at" => {
                    o.latency_at = args
                        .next()
                        .and_then(|n| n.parse().ok())
                        .expect("--latency-at 0.5");
                }
                "--loop-secs" => {
                    o.loop_secs = Some(
                        args.next()
                            .and_then(|n| n.parse().ok())
                            .expect("--loop-secs 1.5"),
                    );
                }
                "--bench" => {} // passed by `cargo bench`, if run that way
                other => {
                    panic!("unknown argument {other}; use --quick, --runs N, --no-deny, --only a,b, --latency-at F, --loop-secs S")
                }
            }
        }
        o
    }
    /// Requests per redis-benchmark run, pipelined and not.
    fn rb_n(&self) -> (u64, u64) {
        if self.quick {
            (20_000, 10_000)
        } else {
            (150_000, 60_000)
        }
    }
    fn run_time(&self) -> Duration {
        match self.loop_secs {
            Some(secs) => Duration::from_secs_f64(secs),
            None => Duration::from_millis(if self.quick { 400 } else { 1_500 }),
        }
    }
    fn driver_calls(&self) -> u64 {
        if self.quick {
            5_000
        } else {
            15_000
        }
    }
}

/// One algorithm: its name and the textbook script of the same kind
/// (`textbook_cmd` gives that script its own ARGV: `limit, window` or
/// `capacity, rate`).
struct Alg {
    name: &'static str,
    textbook: &'static str,
}

const ALGS: [Alg; 6] = [
    Alg {
        name: "fixed_window",
        textbook: "textbook_fixed_window",
    },
    Alg {
        name: "sliding_log",
        textbook: "textbook_sliding_log",
    },
    Alg {
        name: "sliding_window",
        textbook: "textbook_sliding_window",
    },
    Alg {
        name: "token_bucket",
        textbook: "textbook_token_bucket",
    },
    Alg {
        name: "leaky_bucket",
        textbook: "textbook_token_bucket",
    },
    Alg {
        name: "gcra",
        textbook: "textbook_token_bucket",
    },
];

/// The quota of each traffic: admit = 1000 per second (each client sees a
/// few per second here); deny = 1 per hour, spent by a warm-up call.
fn quota(t: Traffic) -> (u64, Duration) {
    match t {
        Traffic::Admit => (1000, Duration::from_secs(1)),
        Traffic::Deny => (1, Duration::from_secs(3600)),
    }
}

/// A type-erased limiter: the six algorithms have six types. The boxed
/// future is the same for all and small next to a Redis round trip.
type Check = Arc<
    dyn Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<bool>> + Send>>
        + Send
        + Sync,
>;

fn erase<A: Algorithm>(l: Limiter<A>) -> Check {
    Arc::new(move |key: String| {
        let l = l.clone();
        Box::pin(async move { l.check(&key, 1).await.ok().map(|d| d.allowed()) })
    })
}

fn limiter(name: &str, t: Traffic, store: &RedisStore) -> Check {
    let (limit, window) = quota(t);
    let rate = limit as f64 / window.as_secs_f64();
    let s = store.clone();
    match name {
        "fixed_window" => erase(Limiter::new(s, FixedWindow::new(limit, window))),
        "sliding_log" => erase(Limiter::new(s, SlidingLog::new(limit, window))),
        "sliding_window" => erase(Limiter::new(s, SlidingWindow::new(limit, window))),
        "token_bucket" => erase(Limiter::new(s, TokenBucket::new(limit, rate))),
        "leaky_bucket" => erase(Limiter::new(s, LeakyBucket::new(limit, rate))),
        "gcra" => erase(Limiter::new(s, Gcra::new(limit, window))),
        other => panic!("no algorithm {other}"),
    }
}

/// The `FCALL` floodgate sent: everything after the command name.
#[derive(Clone, Debug)]
struct Captured {
    /// The function's name.
    function: String,
    /// KEYS[1] with the user key replaced by `{}`.
    key_template: String,
    argv: Vec<String>,
}

impl Captured {
    fn key(&self, user: &str) -> String {
        self.key_template.replacen("{}", user, 1)
    }
}

/// Run one check under MONITOR and read back what was sent.
fn capture(redis: &Redis, rt: &tokio::runtime::Runtime, check: &Check) -> Captured {
    // Once unmonitored: a first call may load the library first.
    rt.block_on(check(CAPTURE_KEY.to_string()))
        .expect("check works");
    let mut s = TcpStream::connect((redis.host.as_str(), redis.port)).expect("monitor connection");
    s.write_all(b"MONITOR\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut lines = BufReader::new(s);
    let mut ok = String::new();
    lines.read_line(&mut ok).unwrap();
    assert!(ok.starts_with("+OK"), "MONITOR answered {ok:?}");
    rt.block_on(check(CAPTURE_KEY.to_string()))
        .expect("check works");
    loop {
        let mut line = String::new();
        lines
            .read_line(&mut line)
            .expect("the monitored FCALL within 5 s");
        // +1700000000.123456 [0 127.0.0.1:5555] "FCALL" "name" "1" "key" ...
        if line.contains("[0 lua]") || !line.contains("\"FCALL\"") {
            continue;
        }
        let words = monitor_words(&line);
        let i = words.iter().position(|w| w == "FCALL").unwrap();
        let w = &words[i + 1..];
        assert_eq!(w[1], "1", "one key per decision: {line}");
        assert!(w[2].contains(CAPTURE_KEY), "{line}");
        return Captured {
            function: w[0].clone(),
            key_template: w[2].replacen(CAPTURE_KEY, "{}", 1),
            argv: w[3..].to_vec(),
        };
    }
}

/// The quoted words of a MONITOR line, unescaped.
fn monitor_words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut w = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => w.push('\n'),
                    Some('r') => w.push('\r'),
                    Some('t') => w.push('\t'),
                    Some('x') => {
                        let h: String = chars.by_ref().take(2).collect();
                        w.push(u8::from_str_radix(&h, 16).unwrap_or(b'?') as char);
                    }
                    Some(o) => w.push(o),
                    None => {}
                },
                c => w.push(c),
            }
        }
        out.push(w);
    }
    out
}

/// The EVAL form as the crate builds it: the `lua/` files `build.rs` joins
/// in the order of `lua/files.txt`, then the call. Its SHA names the library.
fn script_source() -> Option<String> {
    Some(format!(
        "{}return floodgate(KEYS, ARGV)\n",
        include_str!(concat!(env!("OUT_DIR"), "/shared.lua"))
    ))
}

/// redis-benchmark's throughput for the captured command, requests/s.
fn redis_benchmark(redis: &Redis, c: &Captured, n: u64, pipeline: u32) -> (f64, String) {
    let key = c.key("__rand_int__");
    let mut cmd = Command::new("redis-benchmark");
    cmd.args(["-h", &redis.host, "-p", &redis.port.to_string()])
        .args(["-c", "50", "-P", &pipeline.to_string()])
        .args(["-n", &n.to_string(), "-r", &KEYS.to_string(), "--csv"])
        .args(["FCALL", &c.function, "1", &key])
        .args(&c.argv);
    let shown = format!(
        "redis-benchmark -p PORT -c 50 -P {pipeline} -n {n} -r {KEYS} --csv FCALL {} 1 '{key}' {}",
        c.function,
        c.argv
            .iter()
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    (rb_rps(&mut cmd), shown)
}

/// Run a `redis-benchmark --csv` command: its requests per second.
fn rb_rps(cmd: &mut Command) -> f64 {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("redis-benchmark failed to start ({e}); it ships with redis-server (apt-get install redis-tools)")
    });
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .nth(1)
        .and_then(|l| l.split("\",\"").nth(1))
        .and_then(|v| v.trim_matches('"').parse::<f64>().ok())
        .unwrap_or_else(|| {
            panic!(
                "unexpected redis-benchmark output: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// `redis-server`'s CPU time so far, in seconds (0 where `/proc` cannot
/// tell: a server on another machine).
fn redis_cpu(redis: &Redis) -> f64 {
    support::process_cpu(redis.pid()).map_or(0.0, |d| d.as_secs_f64())
}

/// redis-benchmark -c 50 -P 16 running the lesson's one-key token bucket
/// script (`tests/baseline/textbook_token_bucket.lua`, loaded as `sha`) on
/// `-r 10000` keys: ARGV capacity, rate, now (fixed: redis-benchmark
/// cannot move it), cost; a bucket so large that every call admits.
fn rb_lesson(redis: &Redis, sha: &str, n: u64) -> (f64, String) {
    let mut cmd = Command::new("redis-benchmark");
    let args: Vec<String> = [
        "EVALSHA",
        sha,
        "1",
        "lesson:{__rand_int__}",
        "1000000000",
        "1000000000",
        "1790000000000",
        "1",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    cmd.args(["-h", &redis.host, "-p", &redis.port.to_string()])
        .args(["-c", "50", "-P", "16"])
        .args(["-n", &n.to_string(), "-r", &KEYS.to_string(), "--csv"])
        .args(&args);
    let shown = format!(
        "redis-benchmark -p PORT -c 50 -P 16 -n {n} -r {KEYS} --csv {}",
        args.join(" ")
    );
    (rb_rps(&mut cmd), shown)
}

/// Floodgate's `check` from `TASKS` tasks for `time`, after a short
/// warm-up (`before` runs between the two): decisions/s, admitted share,
/// errors, decisions.
fn closed_loop(
    rt: &tokio::runtime::Runtime,
    check: &Check,
    time: Duration,
    before: impl Fn(),
) -> (f64, f64, u64, u64) {
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("{i:012}")).collect());
    let run = |time: Duration| {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
        rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|t| {
                    let (check, keys, stop, counts) =
                        (check.clone(), keys.clone(), stop.clone(), counts.clone());
                    tokio::spawn(async move {
                        let mut rng = Rng::new(t as u64 + 1);
                        let (mut n, mut ok, mut err) = (0u64, 0u64, 0u64);
                        while !stop.load(Ordering::Relaxed) {
                            match check(keys[rng.below(keys.len())].clone()).await {
                                Some(true) => ok += 1,
                                Some(false) => {}
                                None => err += 1,
                            }
                            n += 1;
                        }
                        counts[0].fetch_add(n, Ordering::Relaxed);
                        counts[1].fetch_add(ok, Ordering::Relaxed);
                        counts[2].fetch_add(err, Ordering::Relaxed);
                    })
                })
                .collect();
            let started = Instant::now();
            tokio::time::sleep(time).await;
            stop.store(true, Ordering::Relaxed);
            for t in tasks {
                t.await.unwrap();
            }
            let n = counts[0].load(Ordering::Relaxed) as f64;
            (
                n / started.elapsed().as_secs_f64(),
                counts[1].load(Ordering::Relaxed) as f64 / n.max(1.0),
                counts[2].load(Ordering::Relaxed),
                n as u64,
            )
        })
    };
    run(time / 5);
    before();
    run(time)
}

/// Open loop at `rate`/s for `time`: latencies in µs, counted from each
/// check's scheduled start, and from when it was actually issued.
fn open_loop(
    rt: &tokio::runtime::Runtime,
    check: &Check,
    rate: f64,
    time: Duration,
) -> (Vec<u64>, Vec<u64>) {
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("{i:012}")).collect());
    let from_schedule = Arc::new(Mutex::new(Vec::new()));
    let from_issue = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(AtomicU64::new(0));
    let handle = rt.handle().clone();
    let total = (rate * time.as_secs_f64()) as u64;
    let start = Instant::now();
    let mut rng = Rng::new(7);
    let mut issued = 0u64;
    while issued < total {
        let due = ((start.elapsed().as_secs_f64() * rate) as u64).min(total);
        while issued < due {
            let scheduled = start + Duration::from_secs_f64(issued as f64 / rate);
            let (check, key) = (check.clone(), keys[rng.below(KEYS)].clone());
            let (fs, fi, inf) = (from_schedule.clone(), from_issue.clone(), in_flight.clone());
            inf.fetch_add(1, Ordering::Relaxed);
            handle.spawn(async move {
                let issued_at = Instant::now();
                let _ = check(key).await;
                let done = Instant::now();
                fs.lock()
                    .unwrap()
                    .push((done - scheduled).as_micros() as u64);
                fi.lock()
                    .unwrap()
                    .push((done - issued_at).as_micros() as u64);
                inf.fetch_sub(1, Ordering::Relaxed);
            });
            issued += 1;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while in_flight.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut a = std::mem::take(&mut *from_schedule.lock().unwrap());
    let mut b = std::mem::take(&mut *from_issue.lock().unwrap());
    a.sort_unstable();
    b.sort_unstable();
    (a, b)
}

/// `calls` script calls over one multiplexed connection from `TASKS` tasks,
/// keys drawn from the same sequence as everywhere else; `make` builds the
/// command of call `i` for user key index `k`. Returns the admitted share.
fn drive(
    rt: &tokio::runtime::Runtime,
    redis: &Redis,
    calls: u64,
    make: Arc<dyn Fn(u64, usize) -> redis::Cmd + Send + Sync>,
    sequential_keys: bool,
) -> f64 {
    rt.block_on(async {
        let client = redis::Client::open(redis.url.as_str()).unwrap();
        let conn = client.get_multiplexed_async_connection().await.unwrap();
        let next = Arc::new(AtomicU64::new(0));
        let admitted = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let (mut conn, next, admitted, make) =
                    (conn.clone(), next.clone(), admitted.clone(), make.clone());
                tokio::spawn(async move {
                    let mut rng = Rng::new(1000 + t as u64);
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= calls {
                            break;
                        }
                        let k = if sequential_keys {
                            i as usize % KEYS
                        } else {
                            rng.below(KEYS)
                        };
                        let v: redis::Value = make(i, k)
                            .query_async(&mut conn)
                            .await
                            .expect("script call");
                        if first_int(&v) == Some(1) {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        admitted.load(Ordering::Relaxed) as f64 / calls.max(1) as f64
    })
}

fn first_int(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(n) => Some(*n),
        redis::Value::Array(a) => a.first().and_then(first_int),
        _ => None,
    }
}

/// The captured call for key `k`; with `client_now`, ARGV[1] (`now`, ''
/// for Redis' clock) is this client's clock instead, as the textbook
/// script gets it.
fn floodgate_cmd(
    c: &Captured,
    client_now: bool,
) -> Arc<dyn Fn(u64, usize) -> redis::Cmd + Send + Sync> {
    let c = c.clone();
    Arc::new(move |_, k| {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&c.function).arg(1).arg(c.key(&format!("{k:012}")));
        for (i, a) in c.argv.iter().enumerate() {
            if i == 0 && client_now {
                cmd.arg(support::now_ms());
            } else {
                cmd.arg(a);
            }
        }
        cmd
    })
}

/// The textbook script's call for the same traffic: its own ARGV layout,
/// `now` from this client's clock, as the textbook script expects.
fn textbook_cmd(
    script: &str,
    sha: String,
    t: Traffic,
) -> Arc<dyn Fn(u64, usize) -> redis::Cmd + Send + Sync> {
    let (limit, window) = quota(t);
    let window_ms = window.as_millis() as u64;
    let rate = limit as f64 * 1000.0 / window_ms as f64;
    let script = script.to_string();
    Arc::new(move |i, k| {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&sha).arg(1).arg(format!("{script}:{{{k:012}}}"));
        let now = support::now_ms();
        match script.as_str() {
            "textbook_token_bucket" => cmd.arg(limit).arg(rate.to_string()).arg(now).arg(1),
            "textbook_sliding_log" => cmd.arg(limit).arg(window_ms).arg(now).arg(format!("r{i}")),
            _ => cmd.arg(limit).arg(window_ms).arg(now),
        };
        cmd
    })
}

/// Server µs per call of `stat` (`fcall`, `evalsha`) for `calls` calls
/// made by `make`, after a warm-up call per key (which, for `deny`, spends
/// every client's quota).
fn usec_per_call(
    rt: &tokio::runtime::Runtime,
    redis: &Redis,
    calls: u64,
    stat: &str,
    make: Arc<dyn Fn(u64, usize) -> redis::Cmd + Send + Sync>,
) -> (f64, f64) {
    redis.flushall();
    drive(rt, redis, KEYS as u64, make.clone(), true);
    redis.reset_stats();
    let admitted = drive(rt, redis, calls, make, false);
    let (n, usec) = redis.command_stats(stat);
    (usec as f64 / n.max(1) as f64, admitted)
}

#[derive(Default, Clone)]
struct Row {
    rb_p16: f64,
    /// redis-benchmark -P16 running the lesson's one-key token bucket.
    rb_lesson: f64,
    /// `redis-server`'s CPU (user + system, from `/proc`) a call of the
    /// lesson's script under redis-benchmark, and its share of the wall
    /// time (1.0: Redis saturated).
    redis_cpu_lesson: f64,
    redis_busy_lesson: f64,
    /// The same a floodgate decision, in the closed loop.
    redis_cpu_fg: f64,
    redis_busy_fg: f64,
    /// Redis' µs (commandstats) per decision under `Limiter::check`.
    usec_per_decision: f64,
    /// The same two with one call per decision, in the same run.
    fg_one: f64,
    usec_per_decision_one: f64,
    rb_p1: f64,
    fg: f64,
    fg_admitted: f64,
    fg_errors: f64,
    fcall_per_decision: f64,
    ping_per_decision: f64,
    fg_usec_live: f64,
    p50_sched: f64,
    p99_sched: f64,
    p99_issue: f64,
    lat_rate: f64,
    usec_fg: f64,
    usec_fg_now: f64,
    usec_textbook: f64,
    admitted_fg_drv: f64,
    admitted_textbook_drv: f64,
}

fn main() {
    let opts = Opts::parse();
    let redis = Redis::from_env_or_start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let workers = rt.metrics().num_workers();
    // FLOODGATE_MAX_PER_CALL=1: one call per decision (as before many
    // decisions per call); unset: the store's default.
    let mut builder = RedisStore::builder(&redis.url);
    if let Some(n) = std::env::var("FLOODGATE_MAX_PER_CALL")
        .ok()
        .and_then(|v| v.parse().ok())
        .and_then(std::num::NonZeroUsize::new)
    {
        builder = builder.max_decisions_per_call(n);
    }
    let store = builder.build().expect("redis url");
    // The same, one call per decision: measured beside it in every run.
    let one_each = RedisStore::builder(&redis.url)
        .max_decisions_per_call(std::num::NonZeroUsize::MIN)
        .build()
        .expect("redis url");
    let version = redis.version();
    let algs: Vec<&Alg> = ALGS
        .iter()
        .filter(|a| {
            opts.only
                .as_ref()
                .is_none_or(|o| o.iter().any(|n| n == a.name))
        })
        .collect();
    let traffics: Vec<Traffic> = if opts.deny {
        vec![Traffic::Admit, Traffic::Deny]
    } else {
        vec![Traffic::Admit]
    };
    println!(
        "floodgate loadgen: Redis {version} at {}, nproc {}, tokio workers {workers}, \
         {TASKS} tasks, {KEYS} keys, runs {}{}",
        redis.url,
        support::nproc(),
        opts.runs,
        if opts.quick { ", QUICK" } else { "" }
    );
    println!("load average at start: {}", support::loadavg());

    // The textbook scripts, loaded once (FLUSHALL keeps scripts and functions).
    let textbook_sha = |name: &str| -> String {
        let src = std::fs::read_to_string(format!(
            "{}/tests/baseline/{name}.lua",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("a textbook script in tests/baseline/");
        redis.cmd(&["SCRIPT", "LOAD", &src])
    };

    let mut results: Vec<Vec<(String, Traffic, Row)>> = Vec::new();
    let mut commands: Vec<String> = Vec::new();
    let mut script_checked = None;
    for run in 0..opts.runs {
        let mut rows = Vec::new();
        for alg in &algs {
            for &t in &traffics {
                let check = limiter(alg.name, t, &store);
                redis.flushall();
                let cap = capture(&redis, &rt, &check);
                if script_checked.is_none() {
                    // SHA1 of the rebuilt source, computed by Redis itself.
                    script_checked = Some(match script_source() {
                        Some(src) => {
                            let sha: String = redis.cmd(&["SCRIPT", "LOAD", &src]);
                            let name = format!("floodgate_{}", &sha[..16]);
                            if name == cap.function {
                                format!("code rebuilt from lua/ in lua/files.txt order: library {name} = what floodgate calls")
                            } else {
                                format!("WARNING: code rebuilt from lua/ names library {name}, floodgate called {}", cap.function)
                            }
                        }
                        None => "script source not rebuilt".into(),
                    });
                    println!("{}", script_checked.as_ref().unwrap());
                }
                let mut row = Row::default();
                let (n16, n1) = opts.rb_n();
                let warm = |redis: &Redis| {
                    redis.flushall();
                    if t == Traffic::Deny {
                        drive(&rt, redis, KEYS as u64, floodgate_cmd(&cap, false), true);
                    }
                };

                // (a), (b): redis-benchmark with floodgate's own command.
                warm(&redis);
                let (rps, shown) = redis_benchmark(&redis, &cap, n16, 16);
                row.rb_p16 = rps;
                if run == 0 {
                    commands.push(format!("# {} {}\n{shown}", alg.name, t.name()));
                }
                warm(&redis);
                row.rb_p1 = redis_benchmark(&redis, &cap, n1, 1).0;
                // (b'): the lesson's one-key token bucket script, -P16.
                warm(&redis);
                let (cpu0, wall0) = (redis_cpu(&redis), Instant::now());
                let (rps, shown) = rb_lesson(&redis, &textbook_sha("textbook_token_bucket"), n16);
                let (cpu, wall) = (redis_cpu(&redis) - cpu0, wall0.elapsed().as_secs_f64());
                row.rb_lesson = rps;
                row.redis_cpu_lesson = cpu * 1e6 / n16 as f64;
                row.redis_busy_lesson = cpu / wall;
                if run == 0 && commands.len() == 1 {
                    commands.push(format!("# the lesson's token bucket script\n{shown}"));
                }

                // (c): floodgate, closed loop.
                warm(&redis);
                let cpu0 = std::cell::Cell::new(0.0);
                let (rate, admitted, errors, decisions) =
                    closed_loop(&rt, &check, opts.run_time(), || {
                        redis.reset_stats();
                        cpu0.set(redis_cpu(&redis));
                    });
                let cpu = redis_cpu(&redis) - cpu0.get();
                row.redis_cpu_fg = cpu * 1e6 / decisions as f64;
                row.redis_busy_fg = cpu * rate / decisions as f64;
                let (fcall, usec) = redis.command_stats("fcall");
                // deadpool-redis recycles a connection on every checkout
                // with UNWATCH + PING (one pipelined round trip).
                let ping = redis.command_stats("ping").0 + redis.command_stats("unwatch").0;
                let decisions = decisions as f64;
                row.fg = rate;
                row.fg_admitted = admitted;
                row.fg_errors = errors as f64;
                row.fcall_per_decision = fcall as f64 / decisions;
                row.ping_per_decision = ping as f64 / decisions;
                row.fg_usec_live = usec as f64 / fcall.max(1) as f64;
                row.usec_per_decision = usec as f64 / decisions;

                // (c'): the same, one call per decision.
                warm(&redis);
                let one = limiter(alg.name, t, &one_each);
                let (rate, _, _, decisions) =
                    closed_loop(&rt, &one, opts.run_time(), || redis.reset_stats());
                row.fg_one = rate;
                row.usec_per_decision_one =
                    redis.command_stats("fcall").1 as f64 / decisions as f64;

                // (d): open-loop latency at half the saturating rate.
                if t == Traffic::Admit {
                    warm(&redis);
                    let r = rate * opts.latency_at;
                    let (sched, issue) = open_loop(&rt, &check, r, opts.run_time());
                    row.lat_rate = r;
                    row.p50_sched = quantile(&sched, 0.50) as f64 / 1000.0;
                    row.p99_sched = quantile(&sched, 0.99) as f64 / 1000.0;
                    row.p99_issue = quantile(&issue, 0.99) as f64 / 1000.0;
                } else {
                    row.p50_sched = f64::NAN;
                    row.p99_sched = f64::NAN;
                    row.p99_issue = f64::NAN;
                    row.lat_rate = f64::NAN;
                }

                // (e): server CPU per call, floodgate's call (Redis' clock,
                // then the client's) vs the textbook script's, alternated twice; the
                // lower of each (preemption of redis-server by other
                // processes only ever adds).
                let calls = opts.driver_calls();
                let textbook = textbook_cmd(alg.textbook, textbook_sha(alg.textbook), t);
                let (mut uf, mut un, mut us) = (f64::MAX, f64::MAX, f64::MAX);
                for _ in 0..2 {
                    let (u, a) =
                        usec_per_call(&rt, &redis, calls, "fcall", floodgate_cmd(&cap, false));
                    uf = uf.min(u);
                    row.admitted_fg_drv = a;
                    let (u, _) =
                        usec_per_call(&rt, &redis, calls, "fcall", floodgate_cmd(&cap, true));
                    un = un.min(u);
                    let (u, a) = usec_per_call(&rt, &redis, calls, "evalsha", textbook.clone());
                    us = us.min(u);
                    row.admitted_textbook_drv = a;
                }
                row.usec_fg = uf;
                row.usec_fg_now = un;
                row.usec_textbook = us;

                eprintln!(
                    "  run {} {:<14} {:<5} rb-P16 {:>8} rb-P1 {:>8} floodgate {:>8} p99 {:.2} ms  usec {:.2} (client now {:.2}) vs textbook {:.2}",
                    run + 1,
                    alg.name,
                    t.name(),
                    int(row.rb_p16),
                    int(row.rb_p1),
                    int(row.fg),
                    row.p99_sched,
                    row.usec_fg,
                    row.usec_fg_now,
                    row.usec_textbook
                );
                rows.push((alg.name.to_string(), t, row));
            }
        }
        results.push(rows);
    }
    println!("load average at end: {}", support::loadavg());
    report(&opts, &results, &version);
    println!(
        "\nredis-benchmark commands (PORT: the server above; the function is floodgate's library):"
    );
    for c in commands {
        println!("{c}");
    }
}

/// The medians over runs, as one table.
fn report(opts: &Opts, results: &[Vec<(String, Traffic, Row)>], version: &str) {
    let runs = results.len();
    println!();
    println!(
        "## Limiter::check on RedisStore vs redis-benchmark (same script), \
         median of {runs} run(s); Redis {version}, nproc {}{}",
        support::nproc(),
        if opts.quick {
            ", QUICK (smoke only)"
        } else {
            ""
        }
    );
    println!();
    println!("| algorithm | traffic | rb -c50 -P16 /s | rb -c50 /s | floodgate 64 tasks /s | × P16 (≥ 0.8) | × P1 (≥ 1.2) | × lesson TB script -P16 (≥ 1.3) | Redis µs per decision | × one call each: decisions/s, Redis µs per decision (≤ 0.7) | admitted | FCALL + (PING + UNWATCH) per decision | p50 / p99 at {} of that rate, ms (≤ 1) | server µs/call: floodgate (TIME) | floodgate (client now) | textbook | × textbook, like for like (≤ 1.0) | × textbook, TIME |", opts.latency_at);
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let n = results[0].len();
    for i in 0..n {
        let (name, t, _) = &results[0][i];
        let col = |f: &dyn Fn(&Row) -> f64| -> f64 {
            median(&results.iter().map(|r| f(&r[i].2)).collect::<Vec<_>>())
        };
        let p16 = col(&|r| r.rb_p16);
        let p1 = col(&|r| r.rb_p1);
        let fg = col(&|r| r.fg);
        let r16 = col(&|r| r.fg / r.rb_p16);
        let r1 = col(&|r| r.fg / r.rb_p1);
        let rl = col(&|r| r.fg / r.rb_lesson);
        let upd = col(&|r| r.usec_per_decision);
        let vs_one = col(&|r| r.fg / r.fg_one);
        let cpu_one = col(&|r| r.usec_per_decision / r.usec_per_decision_one);
        let uf = col(&|r| r.usec_fg);
        let un = col(&|r| r.usec_fg_now);
        let us = col(&|r| r.usec_textbook);
        let ur = col(&|r| r.usec_fg_now / r.usec_textbook);
        let urt = col(&|r| r.usec_fg / r.usec_textbook);
        let lat = if *t == Traffic::Admit {
            format!(
                "{:.2} / {:.2} (at {}/s; p99 from issue {:.2})",
                col(&|r| r.p50_sched),
                col(&|r| r.p99_sched),
                int(col(&|r| r.lat_rate)),
                col(&|r| r.p99_issue)
            )
        } else {
            "–".into()
        };
        let mark = |ok: bool| if ok { "" } else { " ✗" };
        println!(
            "| {name} | {} | {} | {} | {} | {:.2}{} | {:.2}{} | {rl:.2}{} | {upd:.2} | {vs_one:.2}, {cpu_one:.2}{} | {:.1}%{} | {:.2} + {:.2} | {lat} | {uf:.2} | {un:.2} | {us:.2} | {ur:.2}{} | {urt:.2} |",
            t.name(),
            int(p16),
            int(p1),
            int(fg),
            r16,
            mark(r16 >= 0.8),
            r1,
            mark(r1 >= 1.2),
            mark(rl >= 1.3),
            mark(cpu_one <= 0.7),
            col(&|r| r.fg_admitted) * 100.0,
            if col(&|r| r.fg_errors) > 0.0 {
                format!(", {} errors", col(&|r| r.fg_errors))
            } else {
                String::new()
            },
            col(&|r| r.fcall_per_decision),
            col(&|r| r.ping_per_decision),
            mark(ur <= 1.0),
        );
    }
    println!();
    println!("Admitted share in the server-CPU phase (floodgate / textbook), median:");
    for i in 0..n {
        let (name, t, _) = &results[0][i];
        let col = |f: &dyn Fn(&Row) -> f64| -> f64 {
            median(&results.iter().map(|r| f(&r[i].2)).collect::<Vec<_>>())
        };
        println!(
            "  {name} {}: {:.1}% / {:.1}%; µs/call of floodgate's FCALL under Limiter::check traffic: {:.2}",
            t.name(),
            col(&|r| r.admitted_fg_drv) * 100.0,
            col(&|r| r.admitted_textbook_drv) * 100.0,
            col(&|r| r.fg_usec_live)
        );
    }
    println!();
    println!(
        "Redis's own ceiling for the × lesson row: redis-server's CPU (user + system, /proc) \
         a floodgate decision and a call of the lesson's script, each with Redis's busy share \
         of the wall time; with Redis saturated by floodgate, the ratio would be at most \
         (1 / µs a decision) / the lesson's rate:"
    );
    for i in 0..n {
        let (name, t, _) = &results[0][i];
        let col = |f: &dyn Fn(&Row) -> f64| -> f64 {
            median(&results.iter().map(|r| f(&r[i].2)).collect::<Vec<_>>())
        };
        println!(
            "  {name} {}: {:.2} µs a decision ({:.0}% busy) / {:.2} µs a lesson call ({:.0}% busy): \
             ceiling {:.2}× the lesson's rate",
            t.name(),
            col(&|r| r.redis_cpu_fg),
            col(&|r| r.redis_busy_fg) * 100.0,
            col(&|r| r.redis_cpu_lesson),
            col(&|r| r.redis_busy_lesson) * 100.0,
            col(&|r| 1e6 / r.redis_cpu_fg / r.rb_lesson),
        );
    }
}
