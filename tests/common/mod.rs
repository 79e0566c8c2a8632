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
pub mod sf;
pub mod twins;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
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
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(&self.dir)
        .args(&self.extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL}"),
            Err(e) => panic!("could not start redis-server: {e}"),
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
            if let Ok(mut c) = redis::Client::open(self.url()).and_then(|c| c.get_connection()) {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return;
                }
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

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A plain synchronous connection, for inspecting state.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to test redis")
    }

    /// Run one command and return its reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
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
