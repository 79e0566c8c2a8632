//! Shared by the tools in `benches/` (each has `mod support;`): a private
//! `redis-server`, Redis statistics, CPU accounting from `/proc`, the
//! closed-loop throughput run and options of `redis_throughput` and
//! `cluster_throughput`, and small statistics helpers. Not a bench target:
//! Cargo takes `benches/*.rs` and `benches/*/main.rs` as targets, not
//! `benches/support/mod.rs`.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A `redis-server` of our own on a free loopback port (killed on drop), or
/// the server at `REDIS_URL`.
pub struct Redis {
    pub url: String,
    pub host: String,
    pub port: u16,
    child: Option<Child>,
    dir: Option<PathBuf>,
}

impl Redis {
    /// `REDIS_URL` if set, else a new server.
    pub fn from_env_or_start() -> Redis {
        match std::env::var("REDIS_URL") {
            Ok(url) => Self::existing(&url),
            Err(_) => Self::start(),
        }
    }

    /// An existing server (`redis://host:port[/db]`). Its statistics are
    /// reset and its keys flushed by the tools: never point it at a server
    /// holding data you need.
    pub fn existing(url: &str) -> Redis {
        let rest = url
            .strip_prefix("redis://")
            .unwrap_or_else(|| panic!("REDIS_URL must be redis://host:port, got {url}"));
        let hostport = rest.rsplit('@').next().unwrap().split('/').next().unwrap();
        let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "6379"));
        Redis {
            url: url.to_string(),
            host: host.to_string(),
            port: port.parse().expect("a port in REDIS_URL"),
            child: None,
            dir: None,
        }
    }

    /// A new `redis-server` on a free port: no persistence, loopback only.
    pub fn start() -> Redis {
        Self::start_with(&[])
    }

    /// [`start`](Self::start), with more `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Redis {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free loopback port");
        let dir = std::env::temp_dir().join(format!(
            "floodgate-bench-redis-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir for redis");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "could not start redis-server ({e}); install it (Debian/Ubuntu \
                     `apt-get install redis-server`) or set REDIS_URL"
                )
            });
        let r = Redis {
            url: format!("redis://127.0.0.1:{port}"),
            host: "127.0.0.1".into(),
            port,
            child: Some(child),
            dir: Some(dir),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = r.try_conn() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "redis-server not ready in 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
        r
    }

    fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url.as_str())?.get_connection()
    }

    /// A plain synchronous connection for administration.
    pub fn conn(&self) -> redis::Connection {
        self.try_conn().expect("connect to redis")
    }

    /// One command, its reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.conn())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// The server's process id (`INFO server`).
    pub fn pid(&self) -> u32 {
        self.info_field("server", "process_id")
            .and_then(|v| v.parse().ok())
            .expect("process_id in INFO")
    }

    pub fn version(&self) -> String {
        self.info_field("server", "redis_version")
            .unwrap_or_else(|| "?".into())
    }

    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let info: String = self.cmd(&["INFO", section]);
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_string())
    }

    /// `CONFIG RESETSTAT`: command statistics start again from zero.
    pub fn reset_stats(&self) {
        self.cmd::<()>(&["CONFIG", "RESETSTAT"]);
    }

    /// `INFO commandstats`: (calls, usec) of `command` (lower case), zero if
    /// it was not called.
    pub fn command_stats(&self, command: &str) -> (u64, u64) {
        let info: String = self.cmd(&["INFO", "commandstats"]);
        let line = info
            .lines()
            .find(|l| l.starts_with(&format!("cmdstat_{command}:")));
        let Some(line) = line else { return (0, 0) };
        let field = |name: &str| {
            line.split([':', ','])
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        (field("calls"), field("usec"))
    }

    pub fn flushall(&self) {
        self.cmd::<()>(&["FLUSHALL"]);
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// CPU time (user + system) of a process, from `/proc/<pid>/stat`; `None`
/// where there is no `/proc`.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    cpu_of_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU time of this process's threads whose name starts with `prefix`.
pub fn threads_cpu(prefix: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if comm.trim_end().starts_with(prefix) {
            if let Some(t) = std::fs::read_to_string(path.join("stat"))
                .ok()
                .and_then(|s| cpu_of_stat(&s))
            {
                total += t;
            }
        }
    }
    Some(total)
}

/// Read and write system calls (`syscr`, `syscw` of `/proc/.../io`) made so
/// far by this process's threads whose name starts with `prefix`.
pub fn threads_syscalls(prefix: &str) -> Option<(u64, u64)> {
    let (mut r, mut w) = (0, 0);
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        let io = std::fs::read_to_string(path.join("io")).unwrap_or_default();
        for line in io.lines() {
            if let Some(v) = line.strip_prefix("syscr: ") {
                r += v.trim().parse::<u64>().unwrap_or(0);
            } else if let Some(v) = line.strip_prefix("syscw: ") {
                w += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some((r, w))
}

fn cpu_of_stat(stat: &str) -> Option<Duration> {
    // Fields after the `(comm)`, which may hold spaces: utime is the 14th
    // field of the line, stime the 15th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(Duration::from_millis(ticks * 10))
}

/// `/proc/loadavg`'s first three fields: how busy the machine was (other
/// processes share the cores with the measurement).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "?".into(),
        |l| l.split(' ').take(3).collect::<Vec<_>>().join(" "),
    )
}

pub fn nproc() -> usize {
    std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
}

pub fn median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    }
}

/// The options of the closed-loop tools (`redis_throughput`,
/// `cluster_throughput`).
pub struct RunArgs {
    pub tasks: usize,
    pub secs: f64,
    pub runs: usize,
    /// `--connections N`, where the tool takes it.
    pub connections: Option<usize>,
}

impl RunArgs {
    /// `--tasks N` (64), `--secs S` (3), `--runs N` (3), and with
    /// `connections` also `--connections N`; the `--bench` that `cargo bench`
    /// passes is ignored.
    pub fn parse(connections: bool) -> RunArgs {
        let mut a = RunArgs {
            tasks: 64,
            secs: 3.0,
            runs: 3,
            connections: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().expect("a value after the flag");
            match flag.as_str() {
                "--tasks" => a.tasks = value().parse().expect("--tasks N"),
                "--secs" => a.secs = value().parse().expect("--secs S"),
                "--runs" => a.runs = value().parse().expect("--runs N"),
                "--connections" if connections => {
                    a.connections = Some(value().parse().expect("--connections N"));
                }
                "--bench" => {}
                other => panic!(
                    "unknown argument {other}; use --tasks N, --secs S, --runs N{}",
                    if connections { ", --connections N" } else { "" }
                ),
            }
        }
        a
    }
}

/// Runs `tasks` tasks calling `one(task, i)` in a loop for `secs`; returns
/// decisions per second.
pub async fn measure<F, Fut>(tasks: usize, secs: f64, one: F) -> f64
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let one = Arc::new(one);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    // Warm up: connections made, scripts loaded (a tool with more to warm,
    // such as every shard of a cluster, does that first).
    for t in 0..tasks.min(8) {
        one(t, 0).await;
    }
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (one, stop, count) = (one.clone(), stop.clone(), count.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    one(t, i).await;
                    i += 1;
                }
                count.fetch_add(i, Ordering::Relaxed);
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.await.expect("task");
    }
    count.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

/// The `q`-quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// A small, fast, seedable generator (xorshift64*): the same key sequence
/// on every run, no dependency.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Milliseconds since the Unix epoch (the textbook scripts' `now`).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Formats a number with thin grouping: 123456.7 -> "123 457".
pub fn int(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let s = format!("{x:.0}");
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}
