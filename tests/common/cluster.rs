//! Test harness: a real Redis Cluster of `redis-server` child processes on
//! free loopback ports (3 primaries with one replica each by default).
//!
//! Every node runs in one temporary folder of the cluster. Dropping the
//! handle kills every node and removes the folder, also when the test fails;
//! a small `sh` reaper does the same if the test process dies without
//! unwinding (killed, aborted). A missing `redis-server` or `redis-cli`
//! fails the test with the way to install them.
//!
//! [`RedisCluster::start_tls`]: the same over TLS only (`--port 0`, TLS
//! client port, cluster bus and replication), `rediss://` node URLs; the
//! harness then reaches the nodes with `openssl s_client`
//! ([`super::tls::tls_query`]) and `redis-cli --tls`.

use super::tls::{tls_query, TestCerts};
use super::{admin_connection, free_port, output_within, says_process, watchdog, INSTALL};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

struct Node {
    port: u16,
    child: Option<Child>,
}

/// A running cluster.
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: PathBuf,
    reaper: Option<Child>,
    /// The certificates of a TLS cluster.
    tls: Option<Arc<TestCerts>>,
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    pub failed: bool,
    /// The primary's id, for a replica.
    pub primary_id: Option<String>,
    /// Slot ranges served (inclusive), for a primary.
    pub slots: Vec<(u16, u16)>,
}

fn spawn_or_install_hint(cmd: &mut Command, what: &str) -> Child {
    match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL}"),
        Err(e) => panic!("could not start {what}: {e}"),
    }
}

fn query<T: redis::FromRedisValue>(
    tls: Option<&TestCerts>,
    port: u16,
    args: &[&str],
) -> redis::RedisResult<T> {
    if let Some(certs) = tls {
        return tls_query(certs, port, args);
    }
    let mut conn = admin_connection(&format!("redis://127.0.0.1:{port}"))?;
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut conn)
}

/// The slot of `key`, computed here: CRC16 (XMODEM) of its hash tag, or of
/// the whole key without one, mod 16384.
pub fn key_slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let hashed = b
        .iter()
        .position(|&c| c == b'{')
        .and_then(|open| {
            let rest = &b[open + 1..];
            let close = rest.iter().position(|&c| c == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(b);
    let mut crc: u16 = 0;
    for &byte in hashed {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

/// `field:value` lines of `INFO` or `CLUSTER INFO`.
fn fields(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn eventually(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl RedisCluster {
    /// 3 primaries, one replica each.
    pub fn start() -> Self {
        Self::start_with(3, 1)
    }

    /// `primaries` primaries (at least 3) with `replicas` replicas each.
    pub fn start_with(primaries: usize, replicas: usize) -> Self {
        Self::launch(primaries, replicas, None)
    }

    /// 3 primaries, one replica each, over TLS only with `certs`.
    pub fn start_tls(certs: &Arc<TestCerts>) -> Self {
        Self::start_tls_with(3, 1, certs)
    }

    /// [`RedisCluster::start_with`] over TLS only with `certs`.
    pub fn start_tls_with(primaries: usize, replicas: usize, certs: &Arc<TestCerts>) -> Self {
        Self::launch(primaries, replicas, Some(certs.clone()))
    }

    fn launch(primaries: usize, replicas: usize, tls: Option<Arc<TestCerts>>) -> Self {
        watchdog();
        // A node that lost its port to another test's server, seen too
        // late, can keep `redis-cli --cluster create` from ever agreeing:
        // a cluster of new nodes on new ports, a few times.
        let mut failures = Vec::new();
        for _ in 0..3 {
            match Self::try_launch(primaries, replicas, tls.clone()) {
                Ok(cluster) => return cluster,
                Err(why) => {
                    eprintln!("a cluster did not form: {why}; starting another");
                    failures.push(why);
                }
            }
        }
        panic!("no cluster formed in 3 attempts: {failures:#?}");
    }

    fn try_launch(
        primaries: usize,
        replicas: usize,
        tls: Option<Arc<TestCerts>>,
    ) -> Result<Self, String> {
        let t = Instant::now();
        let dir = std::env::temp_dir().join(format!(
            "floodgate-cluster-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir for the cluster");
        let mut cluster = Self {
            nodes: Vec::new(),
            dir,
            reaper: None,
            tls,
        };
        for _ in 0..primaries * (1 + replicas) {
            let node = cluster.spawn_node();
            cluster.nodes.push(node);
        }
        cluster.spawn_reaper();
        let mut create = cluster.redis_cli();
        create.args(["--cluster", "create"]);
        for n in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", n.port));
        }
        create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null());
        // redis-cli waits for the nodes to agree on the configuration
        // without a bound of its own.
        let out = match output_within(&mut create, Duration::from_secs(60)) {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{INSTALL}"),
            Err(e) => return Err(format!("redis-cli --cluster create: {e}")),
        };
        if !out.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let created = t.elapsed();
        cluster.wait_ok();
        eprintln!(
            "cluster of {} nodes: created in {created:?}, ready in {:?}",
            cluster.nodes.len(),
            t.elapsed()
        );
        Ok(cluster)
    }

    /// A cluster shared by the tests of one binary that run at the same
    /// time; torn down when the last of them drops its handle. Only for
    /// tests that neither change the topology nor read whole-node counts.
    pub fn shared() -> Arc<Self> {
        static SHARED: Mutex<Weak<RedisCluster>> = Mutex::new(Weak::new());
        let mut slot = SHARED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = slot.upgrade() {
            return c;
        }
        let c = Arc::new(Self::start());
        *slot = Arc::downgrade(&c);
        c
    }

    fn spawn_node(&self) -> Node {
        for _ in 0..5 {
            let (port, bus) = (free_port(), free_port());
            if port == bus {
                continue;
            }
            let mut cmd = Command::new("redis-server");
            match &self.tls {
                None => cmd.args(["--port", &port.to_string()]),
                Some(certs) => cmd.args(certs.cluster_node_args(port)),
            };
            cmd.args(["--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-port", &bus.to_string()])
                .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
                .args(["--cluster-node-timeout", "1000"])
                .args(["--repl-diskless-sync-delay", "0"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&self.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let mut child = spawn_or_install_hint(&mut cmd, "redis-server");
            // A port taken since `free_port` makes the server exit at once.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                // Ours, not another test's server that took the port first.
                let ours = self
                    .q::<String>(port, &["INFO", "server"])
                    .is_ok_and(|info| says_process(&info, child.id()));
                if ours {
                    return Node {
                        port,
                        child: Some(child),
                    };
                }
                assert!(
                    Instant::now() < deadline,
                    "redis-server on {port} not ready in 10 s"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        panic!("redis-server did not start in cluster mode (5 attempts)");
    }

    /// Kills every node if this test process dies without running `Drop`.
    fn spawn_reaper(&mut self) {
        let pids: Vec<String> = self
            .nodes
            .iter()
            .filter_map(|n| n.child.as_ref().map(|c| c.id().to_string()))
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

    /// One command to the node at `port`, over TLS on a TLS cluster.
    fn q<T: redis::FromRedisValue>(&self, port: u16, args: &[&str]) -> redis::RedisResult<T> {
        query(self.tls.as_deref(), port, args)
    }

    /// `redis-cli`, with `--tls` and the certificates on a TLS cluster.
    pub fn redis_cli(&self) -> Command {
        let mut cmd = Command::new("redis-cli");
        if let Some(certs) = &self.tls {
            cmd.args(certs.cli_args());
        }
        cmd
    }

    /// The certificates of a TLS cluster.
    pub fn certs(&self) -> Option<&Arc<TestCerts>> {
        self.tls.as_ref()
    }

    /// The folder of the nodes' config files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Ports of the nodes still running.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.port)
            .collect()
    }

    /// `redis://` URLs of the nodes still running (`rediss://` on a TLS
    /// cluster): seeds for a client.
    pub fn urls(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        self.ports()
            .into_iter()
            .map(|p| format!("{scheme}://127.0.0.1:{p}"))
            .collect()
    }

    /// Run one command on the node at `port`.
    pub fn cmd_on<T: redis::FromRedisValue>(&self, port: u16, args: &[&str]) -> T {
        match self.q(port, args) {
            Ok(v) => v,
            // A fresh admin connection dropped before its answer (seen once
            // in CI, under load, on `CLUSTER SETSLOT`): the admin commands
            // are idempotent, so ask once more; a dead node fails again.
            Err(e) if e.is_connection_dropped() || e.is_io_error() => {
                eprintln!("{args:?} on {port}: {e}; asking again");
                std::thread::sleep(Duration::from_millis(100));
                self.q(port, args)
                    .unwrap_or_else(|e| panic!("{args:?} on {port}: {e}"))
            }
            Err(e) => panic!("{args:?} on {port}: {e}"),
        }
    }

    /// `CLUSTER NODES` as one running node sees it.
    pub fn topology(&self) -> Vec<NodeInfo> {
        let port = self.ports()[0];
        let text: String = self.cmd_on(port, &["CLUSTER", "NODES"]);
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let addr = f[1].split('@').next().unwrap();
                let port = addr.rsplit(':').next().unwrap().parse().unwrap();
                let flags: Vec<&str> = f[2].split(',').collect();
                let slots = f[8..]
                    .iter()
                    .filter(|s| !s.starts_with('['))
                    .map(|s| match s.split_once('-') {
                        Some((a, b)) => (a.parse().unwrap(), b.parse().unwrap()),
                        None => (s.parse().unwrap(), s.parse().unwrap()),
                    })
                    .collect();
                NodeInfo {
                    id: f[0].to_string(),
                    port,
                    primary: flags.contains(&"master"),
                    failed: flags.contains(&"fail") || flags.contains(&"fail?"),
                    primary_id: (f[3] != "-").then(|| f[3].to_string()),
                    slots,
                }
            })
            .collect()
    }

    /// Ports of the primaries that serve slots.
    pub fn primaries(&self) -> Vec<u16> {
        let mut p: Vec<u16> = self
            .topology()
            .into_iter()
            .filter(|n| n.primary && !n.failed && !n.slots.is_empty())
            .map(|n| n.port)
            .collect();
        p.sort_unstable();
        p
    }

    /// Ports of the replicas of the primary at `port`.
    pub fn replicas_of(&self, port: u16) -> Vec<u16> {
        let topo = self.topology();
        let id = &topo.iter().find(|n| n.port == port).expect("node").id;
        topo.iter()
            .filter(|n| n.primary_id.as_ref() == Some(id))
            .map(|n| n.port)
            .collect()
    }

    fn node_id(&self, port: u16) -> String {
        self.cmd_on(port, &["CLUSTER", "MYID"])
    }

    /// The slot of `key`, as Redis computes it.
    pub fn slot_of(&self, key: &str) -> u16 {
        self.cmd_on(self.ports()[0], &["CLUSTER", "KEYSLOT", key])
    }

    /// The port of the primary serving each slot, by slot.
    pub fn owners(&self) -> Vec<u16> {
        let mut owners = vec![0; SLOTS as usize];
        for n in self.topology() {
            if n.primary && !n.failed {
                for &(a, b) in &n.slots {
                    for slot in a..=b {
                        owners[slot as usize] = n.port;
                    }
                }
            }
        }
        owners
    }

    /// The port of the primary that serves `slot`.
    pub fn owner_of(&self, slot: u16) -> u16 {
        self.topology()
            .into_iter()
            .find(|n| n.primary && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
            .map_or_else(|| panic!("no primary serves slot {slot}"), |n| n.port)
    }

    /// Wait until every running node says `cluster_state:ok` with all slots
    /// served, knows every running node, and every replica is in sync.
    pub fn wait_ok(&self) {
        let ports = self.ports();
        eventually(
            "cluster state ok on every node",
            Duration::from_secs(30),
            || {
                ports.iter().all(|&p| {
                    let Ok(info) = self.q::<String>(p, &["CLUSTER", "INFO"]) else {
                        return false;
                    };
                    let f = fields(&info);
                    let known: usize = f
                        .get("cluster_known_nodes")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    f.get("cluster_state").map(String::as_str) == Some("ok")
                        && f.get("cluster_slots_ok").map(String::as_str) == Some("16384")
                        && known >= ports.len()
                        && self.replica_synced(p)
                })
            },
        );
    }

    fn replica_synced(&self, port: u16) -> bool {
        let Ok(info) = self.q::<String>(port, &["INFO", "replication"]) else {
            return false;
        };
        let f = fields(&info);
        f.get("role").map(String::as_str) != Some("slave")
            || f.get("master_link_status").map(String::as_str) == Some("up")
    }

    /// Kill the node at `port` (SIGKILL: nothing saved, connections break).
    pub fn kill(&mut self, port: u16) {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of this cluster");
        if let Some(mut c) = node.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kill the primary at `port` with nothing its replica lacks: writes
    /// paused first (`CLIENT PAUSE .. WRITE`: clients' decisions wait
    /// unanswered, as they would for a dead node), then, for at most 2 s,
    /// until each replica has applied every write so far
    /// ([`super::caught_up`]; `WAIT` is itself held by a pause), then
    /// SIGKILL. Redis replicates asynchronously, and a replica that lags
    /// when its primary dies loses what it had not received (the guide says
    /// so); under CPU starvation that lag reached hundreds of milliseconds
    /// once (1 659 admissions on 106 keys forgotten), and `WAIT` alone left
    /// the writes admitted between its answer and the kill. A test of
    /// floodgate's failover should not measure Redis's replication.
    /// Returns the replicas that caught up.
    pub fn kill_in_sync(&mut self, port: u16) -> i64 {
        let replicas = self.replicas_of(port);
        let _ = self.q::<()>(port, &["CLIENT", "PAUSE", "10000", "WRITE"]);
        let info = |p: u16| self.q::<String>(p, &["INFO", "replication"]).ok();
        let synced = super::caught_up(port, &replicas, info);
        self.kill(port);
        synced
    }

    /// After killing the primary at `dead`: wait until one of its replicas
    /// serves its slots and the cluster is ok again. Returns the new
    /// primary's port.
    pub fn wait_for_failover(&self, dead: u16) -> u16 {
        let topo = self.topology();
        let dead_id = topo
            .iter()
            .find(|n| n.port == dead)
            .expect("node")
            .id
            .clone();
        let replicas: Vec<u16> = topo
            .iter()
            .filter(|n| n.primary_id.as_ref() == Some(&dead_id))
            .map(|n| n.port)
            .collect();
        assert!(!replicas.is_empty(), "{dead} had no replica");
        let mut promoted = 0;
        eventually("a replica promoted", Duration::from_secs(30), || {
            for &r in &replicas {
                let Ok(info) = self.q::<String>(r, &["INFO", "replication"]) else {
                    continue;
                };
                if fields(&info).get("role").map(String::as_str) == Some("master") {
                    promoted = r;
                    return true;
                }
            }
            false
        });
        self.wait_ok();
        promoted
    }

    /// Move `slots` to the primary at `to`, one slot at a time, the way
    /// `redis-cli --cluster reshard` does: `IMPORTING` on the target,
    /// `MIGRATING` on the source, `MIGRATE` of the slot's keys in batches,
    /// then `SETSLOT NODE` on every primary. `pause` is slept while the slot
    /// is half-moved, to widen the window of `ASK` redirections.
    pub fn migrate_slots(&self, slots: impl IntoIterator<Item = u16>, to: u16, pause: Duration) {
        let to_id = self.node_id(to);
        for slot in slots {
            let from = self.owner_of(slot);
            if from == to {
                continue;
            }
            let from_id = self.node_id(from);
            let s = slot.to_string();
            self.cmd_on::<()>(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]);
            self.cmd_on::<()>(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]);
            std::thread::sleep(pause);
            loop {
                let keys: Vec<String> = self.cmd_on(from, &["CLUSTER", "GETKEYSINSLOT", &s, "50"]);
                if keys.is_empty() {
                    break;
                }
                let port = to.to_string();
                let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
                args.extend(keys.iter().map(String::as_str));
                self.cmd_on::<()>(from, &args);
                std::thread::sleep(pause);
            }
            self.cmd_on::<()>(to, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
            self.cmd_on::<()>(from, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
            for p in self.primaries() {
                if p != to && p != from {
                    let _ = self.q::<()>(p, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
                }
            }
        }
    }

    /// Move `n` slots from the primary at `from` to the one at `to` with
    /// `redis-cli --cluster reshard`.
    pub fn reshard(&self, from: u16, to: u16, n: u16) {
        let mut cli = self.redis_cli();
        cli.args(["--cluster", "reshard", &format!("127.0.0.1:{from}")])
            .args(["--cluster-from", &self.node_id(from)])
            .args(["--cluster-to", &self.node_id(to)])
            .args(["--cluster-slots", &n.to_string(), "--cluster-yes"])
            .stdin(Stdio::null());
        let out = output_within(&mut cli, Duration::from_secs(120)).expect("redis-cli");
        assert!(
            out.status.success(),
            "reshard failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `DBSIZE` of every primary, by port.
    pub fn dbsize_per_primary(&self) -> Vec<(u16, u64)> {
        self.primaries()
            .into_iter()
            .map(|p| (p, self.cmd_on(p, &["DBSIZE"])))
            .collect()
    }

    /// Keys matching `pattern` on every primary, by port (`SCAN`, for a
    /// cluster shared with other tests).
    pub fn keys_per_primary(&self, pattern: &str) -> Vec<(u16, u64)> {
        self.primaries()
            .into_iter()
            .map(|p| {
                let mut cursor = 0u64;
                let mut n = 0;
                loop {
                    let (next, keys): (u64, Vec<String>) = self.cmd_on(
                        p,
                        &[
                            "SCAN",
                            &cursor.to_string(),
                            "MATCH",
                            pattern,
                            "COUNT",
                            "1000",
                        ],
                    );
                    n += keys.len() as u64;
                    if next == 0 {
                        break (p, n);
                    }
                    cursor = next;
                }
            })
            .collect()
    }

    /// `SCRIPT FLUSH` on every running node.
    pub fn flush_scripts(&self) {
        for p in self.ports() {
            self.cmd_on::<()>(p, &["SCRIPT", "FLUSH"]);
        }
    }

    /// `FUNCTION FLUSH` on every node.
    pub fn flush_functions(&self) {
        for p in self.ports() {
            self.cmd_on::<()>(p, &["FUNCTION", "FLUSH"]);
        }
    }

    /// Whether each primary has the function library `name`, by port.
    pub fn library_on_primaries(&self, name: &str) -> Vec<(u16, bool)> {
        self.primaries()
            .into_iter()
            .map(|p| {
                let v: Vec<redis::Value> =
                    self.cmd_on(p, &["FUNCTION", "LIST", "LIBRARYNAME", name]);
                (p, !v.is_empty())
            })
            .collect()
    }

    /// `SCRIPT EXISTS sha` on every primary, by port.
    pub fn script_on_primaries(&self, sha: &str) -> Vec<(u16, bool)> {
        self.primaries()
            .into_iter()
            .map(|p| {
                let v: Vec<bool> = self.cmd_on(p, &["SCRIPT", "EXISTS", sha]);
                (p, v[0])
            })
            .collect()
    }

    /// Error replies starting with `code` (e.g. `MOVED`, `ASK`, `NOSCRIPT`)
    /// counted by the running nodes (`INFO errorstats`).
    pub fn errors(&self, code: &str) -> u64 {
        self.ports()
            .into_iter()
            .filter_map(|p| self.q::<String>(p, &["INFO", "errorstats"]).ok())
            .filter_map(|info| {
                fields(&info)
                    .get(&format!("errorstat_{code}"))
                    .and_then(|v| v.strip_prefix("count="))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .sum()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
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
