//! Test harness: Redis Sentinel. A primary, one replica and three
//! `redis-server --sentinel` processes watching them, all on free loopback
//! ports, each sentinel with its own config file in one temporary folder.
//! Dropping the handle kills every process and removes the folder; a small
//! `sh` reaper kills the sentinels if the test process dies without
//! unwinding (the data nodes are [`RedisServer`]s, with their own).

use super::tls::run_cli;
use super::{free_port, RedisServer, INSTALL};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The name the sentinels monitor the primary under.
pub const MASTER_NAME: &str = "mymaster";

/// A running primary, replica and three sentinels.
pub struct SentinelSet {
    /// The data nodes: the primary first at the start; after a failover,
    /// see [`SentinelSet::primary_port`].
    nodes: Vec<RedisServer>,
    sentinels: Vec<(u16, Option<Child>)>,
    reaper: Option<Child>,
    dir: PathBuf,
    password: Option<String>,
    /// The sentinels' own password (`requirepass` of the sentinel
    /// processes, and `sentinel sentinel-pass` between them), if any.
    sentinel_password: Option<String>,
    /// The primary's port as last known: at the start, then as
    /// [`SentinelSet::wait_for_failover`] found it.
    primary: u16,
}

fn eventually(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One command to a sentinel at `port` (plain connection, no password).
fn sentinel_query<T: redis::FromRedisValue>(
    port: u16,
    password: Option<&str>,
    args: &[&str],
) -> redis::RedisResult<T> {
    let auth = password.map(|p| format!(":{p}@")).unwrap_or_default();
    let mut conn = super::admin_connection(&format!("redis://{auth}127.0.0.1:{port}"))?;
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut conn)
}

/// `SENTINEL MASTER mymaster` as field/value pairs.
fn master_fields(port: u16, password: Option<&str>) -> Option<Vec<(String, String)>> {
    let flat: Vec<String> =
        sentinel_query(port, password, &["SENTINEL", "MASTER", MASTER_NAME]).ok()?;
    Some(
        flat.chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0].clone(), c[1].clone()))
            .collect(),
    )
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

impl SentinelSet {
    /// Without passwords.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// With `password` on the data nodes (`requirepass`, `masterauth`, and
    /// the sentinels' `auth-pass`), if given. The sentinels have none.
    pub fn start_with(password: Option<&str>) -> Self {
        Self::start_full(password, None)
    }

    /// As [`start_with`](Self::start_with), and with `sentinel_password`
    /// on the sentinels themselves, if given.
    pub fn start_full(password: Option<&str>, sentinel_password: Option<&str>) -> Self {
        let t = Instant::now();
        // No 5 s wait before a full sync (the default delay), on either
        // node: each is the primary at some point.
        let no_delay = ["--repl-diskless-sync-delay", "0"];
        let primary = RedisServer::start_with(&no_delay);
        let primary_port = primary.port();
        let replica = RedisServer::start_with(
            &[
                &no_delay[..],
                &["--replicaof", "127.0.0.1", &primary_port.to_string()],
            ]
            .concat(),
        );
        let mut set = Self {
            dir: std::env::temp_dir().join(format!(
                "floodgate-sentinel-{}-{primary_port}",
                std::process::id()
            )),
            nodes: vec![primary, replica],
            sentinels: Vec::new(),
            reaper: None,
            password: password.map(str::to_string),
            sentinel_password: sentinel_password.map(str::to_string),
            primary: primary_port,
        };
        std::fs::create_dir_all(&set.dir).expect("temp dir for the sentinels");
        let replica_port = set.nodes[1].port();
        // Through `url`: without the password before it is set (AUTH to a
        // server without one is an error), with it after.
        let in_sync = |url: &str| {
            super::admin_connection(url)
                .and_then(|mut c| {
                    redis::cmd("INFO")
                        .arg("replication")
                        .query::<String>(&mut c)
                })
                .is_ok_and(|i| i.contains("master_link_status:up"))
        };
        let plain_url = format!("redis://127.0.0.1:{replica_port}");
        eventually(
            "the replica in sync with the primary",
            // Sets start in parallel (one per test): 10 s was short once.
            Duration::from_secs(30),
            || in_sync(&plain_url),
        );
        if let Some(pw) = password {
            // Set once the replica is in sync: the harness's readiness
            // probe (no password) saw both nodes up, and the replica's link,
            // authenticated before `requirepass`, stays up. Set during the
            // replica's first handshake, it could miss its AUTH step and
            // leave the link down (CI saw it: not in sync within 30 s).
            for n in &set.nodes {
                n.cmd::<()>(&["CONFIG", "SET", "masterauth", pw]);
            }
            for n in &set.nodes {
                n.cmd::<()>(&["CONFIG", "SET", "requirepass", pw]);
            }
        }
        if password.is_some() {
            eventually(
                "the replica still in sync once passwords are set",
                Duration::from_secs(30),
                || in_sync(&set.node_url(replica_port)),
            );
        }
        for _ in 0..3 {
            let s = set.spawn_sentinel();
            set.sentinels.push(s);
        }
        set.spawn_reaper();
        // Ready: every sentinel sees the primary, its replica, the two
        // other sentinels, and a quorum able to fail over.
        for &(port, _) in &set.sentinels {
            eventually(
                &format!("sentinel on {port} sees the whole set"),
                Duration::from_secs(30),
                || {
                    let pw = set.sentinel_password.as_deref();
                    let Some(f) = master_fields(port, pw) else {
                        return false;
                    };
                    field(&f, "num-slaves") == Some("1")
                        && field(&f, "num-other-sentinels") == Some("2")
                        && sentinel_query::<String>(
                            port,
                            pw,
                            &["SENTINEL", "CKQUORUM", MASTER_NAME],
                        )
                        .is_ok()
                },
            );
        }
        eprintln!("sentinel set ready in {:?}", t.elapsed());
        set
    }

    fn spawn_sentinel(&self) -> (u16, Option<Child>) {
        for _ in 0..5 {
            let port = free_port();
            let conf = self.dir.join(format!("sentinel-{port}.conf"));
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\ndir {}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
                 sentinel failover-timeout {MASTER_NAME} 5000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                self.dir.display(),
                self.primary
            );
            if let Some(pw) = &self.password {
                text = text + "sentinel auth-pass " + MASTER_NAME + " " + pw + "\n";
            }
            if let Some(pw) = &self.sentinel_password {
                text = text + "requirepass " + pw + "\nsentinel sentinel-pass " + pw + "\n";
            }
            std::fs::write(&conf, text).expect("write a sentinel config");
            let mut cmd = Command::new("redis-server");
            cmd.arg(&conf)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL}"),
                Err(e) => panic!("could not start redis-server --sentinel: {e}"),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                // A port taken since `free_port` makes it exit at once.
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                let pw = self.sentinel_password.as_deref();
                // Ours, not another test's server that took the port first.
                let ours = sentinel_query::<String>(port, pw, &["INFO", "server"])
                    .is_ok_and(|info| super::says_process(&info, child.id()));
                if ours {
                    return (port, Some(child));
                }
                assert!(
                    Instant::now() < deadline,
                    "sentinel on {port} not ready in 10 s"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("redis-server --sentinel did not start (5 attempts)");
    }

    /// Kills the sentinels if this test process dies without running `Drop`.
    fn spawn_reaper(&mut self) {
        let pids: Vec<String> = self
            .sentinels
            .iter()
            .filter_map(|(_, c)| c.as_ref().map(|c| c.id().to_string()))
            .collect();
        let script = format!(
            "while kill -0 {} 2>/dev/null; do sleep 0.5; done; kill -9 {} 2>/dev/null; rm -rf '{}'",
            std::process::id(),
            pids.join(" "),
            self.dir.display()
        );
        self.reaper = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/mymaster`
    /// (no password: see [`SentinelSet::password`]).
    pub fn url(&self) -> String {
        format!("redis+sentinel://{}/{MASTER_NAME}", self.hosts())
    }

    /// [`url`](Self::url) with `password` for the data nodes.
    pub fn url_with_password(&self, password: &str) -> String {
        format!(
            "redis+sentinel://:{password}@{}/{MASTER_NAME}",
            self.hosts()
        )
    }

    /// `host:port` of each sentinel still running, comma-separated.
    fn hosts(&self) -> String {
        let hosts: Vec<String> = self
            .sentinel_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        hosts.join(",")
    }

    /// The data nodes' password, if any.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Ports of the sentinels still running.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels
            .iter()
            .filter(|(_, c)| c.is_some())
            .map(|(p, _)| *p)
            .collect()
    }

    /// The primary's port: at the start, or as the last
    /// [`SentinelSet::wait_for_failover`] found it.
    pub fn primary_port(&self) -> u16 {
        self.primary
    }

    /// The port of the other data node (the replica at the start).
    pub fn replica_port(&self) -> u16 {
        self.nodes
            .iter()
            .map(RedisServer::port)
            .find(|&p| p != self.primary)
            .expect("two data nodes")
    }

    /// `redis://` URL of the data node at `port`, with the password.
    pub fn node_url(&self, port: u16) -> String {
        match &self.password {
            Some(pw) => format!("redis://:{pw}@127.0.0.1:{port}"),
            None => format!("redis://127.0.0.1:{port}"),
        }
    }

    fn node_query<T: redis::FromRedisValue>(
        &self,
        port: u16,
        args: &[&str],
    ) -> redis::RedisResult<T> {
        let mut conn = super::admin_connection(&self.node_url(port))?;
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut conn)
    }

    /// Run one command on the data node at `port` (with the password).
    pub fn cmd_on<T: redis::FromRedisValue>(&self, port: u16, args: &[&str]) -> T {
        self.node_query(port, args)
            .unwrap_or_else(|e| panic!("{args:?} on {port}: {e}"))
    }

    /// Run one command on the sentinel at `port`.
    pub fn sentinel_cmd<T: redis::FromRedisValue>(&self, port: u16, args: &[&str]) -> T {
        sentinel_query(port, self.sentinel_password.as_deref(), args)
            .unwrap_or_else(|e| panic!("{args:?} on sentinel {port}: {e}"))
    }

    /// `SENTINEL get-master-addr-by-name mymaster` of the sentinel at
    /// `port`, asked with `redis-cli`: the port it names.
    pub fn primary_seen_by(&self, port: u16) -> Option<u16> {
        let mut cli = Command::new("redis-cli");
        if let Some(pw) = &self.sentinel_password {
            cli.env("REDISCLI_AUTH", pw);
        }
        let out = run_cli(cli.args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "SENTINEL",
            "get-master-addr-by-name",
            MASTER_NAME,
        ]))
        .ok()?;
        out.lines().nth(1)?.trim().parse().ok()
    }

    /// Kill the primary (SIGKILL). Returns its port.
    pub fn kill_primary(&mut self) -> u16 {
        let port = self.primary;
        // With nothing the replica lacks, as `RedisCluster::kill_in_sync`
        // says why: writes paused, the replica caught up, then the kill.
        let replicas: Vec<u16> = self
            .nodes
            .iter()
            .map(RedisServer::port)
            .filter(|&p| p != port)
            .collect();
        let _ = self.node_query::<()>(port, &["CLIENT", "PAUSE", "10000", "WRITE"]);
        let info = |p: u16| self.node_query::<String>(p, &["INFO", "replication"]).ok();
        super::caught_up(port, &replicas, info);
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .expect("the primary")
            .kill();
        port
    }

    /// Kill the sentinel at `port` (SIGKILL).
    pub fn kill_sentinel(&mut self, port: u16) {
        if let Some((_, c)) = self.sentinels.iter_mut().find(|(p, _)| *p == port) {
            if let Some(mut c) = c.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// After [`SentinelSet::kill_primary`]: wait until every running
    /// sentinel names another primary and that node says `role:master`.
    /// Returns its port (also [`SentinelSet::primary_port`] from now on).
    pub fn wait_for_failover(&mut self, timeout: Duration) -> u16 {
        let t = Instant::now();
        let old = self.primary;
        let mut new = 0;
        eventually("sentinels fail over", timeout, || {
            let seen: Vec<Option<u16>> = self
                .sentinel_ports()
                .into_iter()
                .map(|p| self.primary_seen_by(p))
                .collect();
            let Some(Some(first)) = seen.first().copied() else {
                return false;
            };
            if first == old || seen.iter().any(|s| *s != Some(first)) {
                return false;
            }
            new = first;
            self.node_query::<String>(first, &["INFO", "replication"])
                .is_ok_and(|i| i.contains("role:master"))
        });
        eprintln!("failover from {old} to {new} seen in {:?}", t.elapsed());
        self.primary = new;
        new
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        for (_, c) in &mut self.sentinels {
            if let Some(mut c) = c.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        if let Some(mut r) = self.reaper.take() {
            let _ = r.kill();
            let _ = r.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
