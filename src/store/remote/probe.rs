//! `probe()`: connect, and say what the store found there, or why floodgate
//! cannot work there.

use super::invoke::{Remote, Transport};
use crate::algorithm::Spec;
use crate::store::{Answer, Backend, Batch, Mode, StoreError, StoreErrorKind, Target};
use redis::Value;
use std::time::Duration;

/// The longest a whole probe may take.
pub(super) const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What [`RedisStore::probe`](super::RedisStore::probe) or
/// [`RedisClusterStore::probe`](super::RedisClusterStore::probe) found: the
/// servers, and what to look at before going to production.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ProbeReport {
    nodes: Vec<NodeReport>,
    functions: bool,
    warnings: Vec<String>,
}

impl ProbeReport {
    /// Each server: the one server, or each node of a cluster.
    pub fn nodes(&self) -> &[NodeReport] {
        &self.nodes
    }

    /// Whether decisions run as floodgate's function library (`FCALL`), or
    /// as scripts (`EVALSHA`: Redis before 7.0, or an ACL without `FCALL`).
    pub fn functions(&self) -> bool {
        self.functions
    }

    /// What may go wrong later, in words: an eviction policy that can
    /// evict floodgate's keys (a key at its limit that is evicted starts
    /// again from zero), a replica where a primary was expected, settings
    /// the user may not read.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}

/// One server, as [`ProbeReport::nodes`] lists it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeReport {
    address: String,
    server: String,
    version: String,
    role: String,
    tls: bool,
    maxmemory: Option<u64>,
    maxmemory_policy: Option<String>,
}

impl NodeReport {
    /// Where it is, `host:port`: as the URL names it, or for a primary
    /// found through Sentinel or reached through the app's pool, as the
    /// server says it was reached (`CLIENT INFO`; `unknown` on a server too
    /// old to say).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Which server answers: `redis`, `valkey`, or what another server
    /// calls itself.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Its version, e.g. `7.0.15`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// `master` (a primary) or `replica`.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// Whether the store speaks TLS to it.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// Its `maxmemory` in bytes (0: no limit), when the user may read
    /// `INFO`.
    pub fn maxmemory(&self) -> Option<u64> {
        self.maxmemory
    }

    /// Its `maxmemory-policy`, when the user may read `INFO`.
    pub fn maxmemory_policy(&self) -> Option<&str> {
        self.maxmemory_policy.as_deref()
    }
}

/// `redis 7.0.15 (master) at 10.0.0.5:6379, TLS`.
impl std::fmt::Display for NodeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} ({}) at {}",
            self.server, self.version, self.role, self.address
        )?;
        if self.tls {
            f.write_str(", TLS")?;
        }
        Ok(())
    }
}

/// The server's own address in a `CLIENT INFO` reply (`laddr=host:port`).
pub(super) fn local_address(client_info: &Value) -> Option<String> {
    let text = match client_info {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::VerbatimString { text, .. } | Value::SimpleString(text) => text.clone(),
        _ => return None,
    };
    text.split_whitespace()
        .find_map(|f| f.strip_prefix("laddr="))
        .map(str::to_owned)
}

/// A node's report from its answers to `HELLO` and `INFO` (either may have
/// been refused); adds what to warn about to `warnings`. `primary`: the
/// store writes to this node, so a replica there is a mistake (a cluster's
/// replicas are not).
pub(super) fn node(
    address: String,
    tls: bool,
    primary: bool,
    hello: Option<&Value>,
    info: Option<&Value>,
    warnings: &mut Vec<String>,
) -> NodeReport {
    let hello = hello.map(pairs).unwrap_or_default();
    let info = info.map(info_fields).unwrap_or_default();
    let get = |pairs: &[(String, String)], k: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    let server = get(&hello, "server")
        .or_else(|| get(&info, "server_name"))
        .unwrap_or_else(|| "redis".into());
    let version = get(&hello, "version")
        .or_else(|| get(&info, "valkey_version"))
        .or_else(|| get(&info, "redis_version"))
        .unwrap_or_else(|| "unknown".into());
    let role = get(&hello, "role")
        .or_else(|| get(&info, "role"))
        .unwrap_or_else(|| "unknown".into());
    let maxmemory = get(&info, "maxmemory").and_then(|m| m.parse().ok());
    let policy = get(&info, "maxmemory_policy");
    if primary && (role == "replica" || role == "slave") {
        warnings.push(format!(
            "{address} is a replica: floodgate writes, and a replica answers READONLY"
        ));
    }
    match (maxmemory, policy.as_deref()) {
        (None, _) | (_, None) => warnings.push(format!(
            "{address}: cannot read maxmemory and maxmemory-policy (INFO not allowed?): \
             check that the server cannot evict floodgate's keys"
        )),
        (Some(0), _) | (_, Some("noeviction")) => {}
        (Some(max), Some(p)) => warnings.push(format!(
            "{address}: maxmemory-policy {p} with maxmemory {max} may evict floodgate's keys \
             (every one has a TTL); a key at its limit that is evicted starts again from zero. \
             Give floodgate a Redis of its own with noeviction and headroom"
        )),
    }
    NodeReport {
        address,
        server,
        version,
        role,
        tls,
        maxmemory,
        maxmemory_policy: policy,
    }
}

/// Run floodgate's code once on a key under `prefix` (a fixed window of 1
/// over 1 s: one key that expires within 2 s), the way every decision runs,
/// and the report of `nodes`.
pub(super) async fn decide_once<T: Transport>(
    remote: &Remote<T>,
    prefix: &str,
    nodes: Vec<NodeReport>,
    mut warnings: Vec<String>,
) -> Result<ProbeReport, StoreError> {
    let spec = Spec::FixedWindow {
        limit: 1,
        window_ms: 1_000,
        jittered: false,
    };
    let target = Target {
        ns: remote.namespace(&crate::store::key::head(
            prefix,
            "floodgate-probe",
            spec.tag(),
        )),
        spec,
        shadow: false,
    };
    let batch = Batch {
        targets: std::slice::from_ref(&target),
        key: "probe",
        keys: &[],
        now: None,
        mode: Mode::Check,
        cost: 1,
        lease: "",
    };
    let decided = match remote.decide(&batch) {
        Answer::Later(fut) => fut.await.map(drop),
        Answer::One(_) | Answer::PerTarget(_) => Ok(()),
    };
    let permission = match decided {
        Err(e) if e.kind() != StoreErrorKind::Permission => return Err(e),
        Err(e) => Some(e),
        Ok(()) => None,
    };
    // Every command floodgate's code may run, not only the fixed window's.
    let missing = missing_commands(remote.transport(), prefix).await;
    if permission.is_some() || !missing.is_empty() {
        let what = if missing.is_empty() {
            format!("the key pattern `~{prefix}:*` or a command")
        } else {
            missing.join(" ")
        };
        let why = format!(
            "the user may not run floodgate's code on keys `{prefix}:*`: it lacks {what} \
             (the rights floodgate needs are in the guide's Deploying page)"
        );
        return Err(match permission {
            Some(e) => e.context(&why),
            None => StoreError::new(StoreErrorKind::Permission, why),
        });
    }
    if !remote.uses_functions() {
        warnings.push(
            "decisions run as scripts (EVALSHA): no FCALL here (Redis before 7.0, or the ACL)"
                .into(),
        );
    }
    Ok(ProbeReport {
        nodes,
        functions: remote.uses_functions(),
        warnings,
    })
}

/// The commands floodgate's code runs inside Redis (ACL checks them there
/// too) that this user may not run on a key under `prefix`, each tried
/// directly on a probe key (which expires within 2 s): `+zadd`, or
/// `~prefix:*` when it is the key the user may not touch.
async fn missing_commands<T: Transport>(transport: &T, prefix: &str) -> Vec<String> {
    let key = format!("{prefix}:floodgate-probe:{{acl}}");
    let set = format!("{prefix}:floodgate-probe:{{acl}}z");
    let tries: [&[&str]; 13] = [
        &["TIME"],
        &["SET", &key, "0", "PX", "2000"],
        &["GET", &key],
        &["PEXPIRE", &key, "2000"],
        &["ZADD", &set, "0", "m"],
        &["PEXPIRE", &set, "2000"],
        &["ZCOUNT", &set, "0", "1"],
        &["ZRANGE", &set, "0", "0"],
        &["ZRANGEBYSCORE", &set, "0", "1"],
        &["ZREVRANGEBYSCORE", &set, "1", "0"],
        &["ZREMRANGEBYSCORE", &set, "2", "3"],
        &["ZREMRANGEBYRANK", &set, "1", "1"],
        &["ZREM", &set, "m"],
    ];
    let mut missing = Vec::new();
    for args in tries {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let Err(e) = transport.send(&cmd, false).await else {
            continue;
        };
        if e.kind() != StoreErrorKind::Permission {
            continue;
        }
        // "no permissions to access one of the keys used as arguments"
        let text = e.to_string();
        let rule = if text.contains("access") && text.contains("key") {
            format!("~{prefix}:*")
        } else {
            format!("+{}", args[0].to_lowercase())
        };
        if !missing.contains(&rule) {
            missing.push(rule);
        }
    }
    missing
}

/// The key/value pairs of a `HELLO` reply (RESP2 flat array or RESP3 map).
fn pairs(v: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    };
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|kv| Some((text(kv.first()?)?, text(kv.get(1)?)?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The `field:value` lines of an `INFO` reply.
fn info_fields(v: &Value) -> Vec<(String, String)> {
    let text = match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::SimpleString(s) => s.clone(),
        _ => String::new(),
    };
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn a_node_and_its_warnings() {
        let hello = Value::Array(vec![
            bulk("server"),
            bulk("valkey"),
            bulk("version"),
            bulk("8.1.0"),
            bulk("role"),
            bulk("master"),
        ]);
        let info = bulk("# Memory\r\nmaxmemory:1048576\r\nmaxmemory_policy:volatile-lru\r\n");
        let mut warnings = Vec::new();
        let n = node(
            "h:1".into(),
            true,
            true,
            Some(&hello),
            Some(&info),
            &mut warnings,
        );
        assert_eq!(
            (n.server(), n.version(), n.role()),
            ("valkey", "8.1.0", "master")
        );
        assert_eq!(
            (n.maxmemory(), n.maxmemory_policy()),
            (Some(1_048_576), Some("volatile-lru"))
        );
        assert!(n.tls());
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("volatile-lru"), "{warnings:?}");

        let safe = bulk("maxmemory:1048576\r\nmaxmemory_policy:noeviction\r\n");
        let mut none = Vec::new();
        node(
            "h:1".into(),
            false,
            true,
            Some(&hello),
            Some(&safe),
            &mut none,
        );
        assert!(none.is_empty(), "{none:?}");

        let mut unknown = Vec::new();
        let n = node("h:1".into(), false, true, None, None, &mut unknown);
        assert_eq!((n.server(), n.version()), ("redis", "unknown"));
        assert!(unknown[0].contains("cannot read maxmemory"), "{unknown:?}");
    }
}
