//! [`RedisClusterStore`], and its transport: one redis-rs cluster
//! connection, every call routed by its key to the shard that owns it.

use super::builder::RedisClusterStoreBuilder;
use super::connect::{Connector, Links};
use super::invoke::{Remote, Transport};
use super::joined::{self, Joiner};
use super::library::load_library;
use super::probe::ProbeReport;
use crate::store::error::Trust;
use crate::store::{Store, StoreError};
use crate::ConfigError;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr,
};
use redis::{Cmd, RedisError, Value};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Retries of one call (redirections, backoffs, reconnections) before its
/// error reaches the caller.
const RETRIES: u32 = 10;
/// Backoff between retries after `TRYAGAIN`/`CLUSTERDOWN`: a random wait
/// between `MIN_RETRY_WAIT_MS` and `min(10 ms × 2^retry, MAX_RETRY_WAIT_MS)`.
const MIN_RETRY_WAIT_MS: u64 = 10;
const MAX_RETRY_WAIT_MS: u64 = 400;
/// Connecting to one node.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(1);
/// One attempt on one node.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
/// A whole call, all retries included.
const OVERALL_TIMEOUT: Duration = Duration::from_secs(3);

/// Keeps rate-limit state in a Redis Cluster: each client's state on the
/// shard that owns its key, so load spreads over all primaries.
///
/// A drop-in replacement for [`RedisStore`](super::RedisStore): build it,
/// pass it to [`Limiter::builder`](crate::Limiter::builder), and nothing else
/// changes. Each decision is one atomic call on one shard: the same code,
/// called the same way, and the same decisions, as on a single Redis.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use floodgate::{algorithm::Gcra, store::RedisClusterStore, Limiter};
/// use std::time::Duration;
///
/// let store = RedisClusterStore::from_nodes([
///     "redis://127.0.0.1:7000",
///     "redis://127.0.0.1:7001",
///     "redis://127.0.0.1:7002",
/// ])?;
/// let limiter = Limiter::builder(store, Gcra::new(100, Duration::from_secs(60))).build()?;
/// let d = limiter.check("ana", 1).await?;
/// # Ok(()) }
/// ```
///
/// Cheap to clone: clones share one cluster connection, which multiplexes
/// all calls over one TCP connection per node. It is made in the background
/// on the first decision, on that decision's Tokio runtime, and lives on
/// that runtime: use one store per runtime.
///
/// # One hash tag per call, one shard per client
///
/// Every key a floodgate call touches is
/// `{prefix}:{name}:{alg}:{<escaped user key>}`. The braces are a Redis
/// Cluster *hash tag*: only the text between them is hashed to pick the
/// slot, so the slot is `CRC16(escaped user key) mod 16384`, the same for
/// all the limits of one request. The user key is escaped so that it never
/// contains a brace: a client can neither move its key to another slot nor
/// make a call span two slots (`CROSSSLOT`). All of one client's state
/// lives on one shard, each decision is one atomic call there, and
/// different clients spread evenly over all shards.
///
/// # Functions and scripts on many nodes
///
/// Each node has its own functions (saved with its data and replicated,
/// but gone after `FUNCTION FLUSH` or on a node added empty) and its own
/// script cache (lost on restart and on `SCRIPT FLUSH`). A decision is an
/// `FCALL` routed by its key. When the node answers that the function is
/// not found (it did not run), the call is sent as `EVAL` with the same
/// code's source, which works on any node, while floodgate's library is
/// loaded on the node that owns the key's slot in the background (one load
/// at a time): the next calls there are `FCALL`s again. On a cluster without functions (Redis < 7) decisions
/// are `EVALSHA`, and on `NOSCRIPT` `EVAL`, routed by the same key: it runs
/// the script *and* caches it on exactly the node that owns the key. Code
/// is thus loaded on every primary that serves a key, lazily, without a
/// fan-out to all nodes that would fail whenever any node is down.
///
/// # Which retries are safe
///
/// Retries happen inside redis-rs' cluster connection, configured by
/// [`client_builder`](Self::client_builder):
///
/// * `MOVED` (the slot belongs to another node: after resharding or a
///   failover) and `ASK` (the slot is being migrated and the key is already on
///   the target): the script did **not** run. The call is redirected, and on
///   `MOVED` the slot map is refreshed. Always safe. redis-rs sends `ASKING`
///   and the redirected call as two requests on a connection other calls
///   share, so under load another call can consume the `ASKING` and the
///   redirections ping-pong until the retries run out; floodgate then sends
///   `ASKING` and the call as one pipeline, and starts over on a last
///   `MOVED` (at most 3 rounds).
/// * `TRYAGAIN`, `CLUSTERDOWN`, `MASTERDOWN`, `LOADING`: nothing ran. The call
///   is retried after a short random backoff. Always safe.
/// * `READONLY` (the node was demoted to replica): nothing ran. The slot map
///   is refreshed and the call retried. Always safe.
/// * `NOSCRIPT`, function not found: nothing ran. Sent once more as `EVAL`
///   (above). Always safe.
/// * A broken connection or a timeout *after* the call was sent: the script
///   may or may not have run, and redis-rs sends it again, so the cost may be
///   **charged twice**. That never admits more than the limit allows: the
///   caller sees only the last run's decision, and every admission it sees
///   was charged by a run of the script, so admissions seen ≤ capacity
///   charged ≤ the limit. The price is a possible false denial: that client's
///   quota shrinks by one cost. Charging twice is safe for the limit;
///   admitting twice is not, and no retry here can admit twice.
///
/// What no retry can fix: Redis replicates asynchronously, so a failover can
/// lose the last writes the old primary acknowledged but had not yet sent to
/// its replica (a window of a few milliseconds). A client charged in that
/// window gets those charges back. Redis Cluster makes no stronger promise.
/// During the outage itself (until a replica is promoted: about the
/// cluster's `cluster-node-timeout` plus a second) calls for keys of the
/// failed shard cannot be decided: the limiter's
/// [`timeout`](crate::LimiterBuilder::timeout) ends them and its
/// [failure policy](crate::LimiterBuilder::on_store_failure) decides; calls
/// for keys of the other shards go on, apart from the moment the whole
/// cluster answers `CLUSTERDOWN`, which the retries above ride out.
///
/// Needs a Tokio runtime, with its time driver (`#[tokio::main]` has both):
/// the connection is made on a Tokio task and calls are timed by Tokio.
/// Called outside one, it does not panic: each decision fails with
/// an error of kind [`Unavailable`](crate::store::StoreErrorKind::Unavailable),
/// "no Tokio runtime", and the failure policy answers.
#[derive(Clone)]
pub struct RedisClusterStore {
    pub(super) remote: Remote<Links<ClusterConnector>>,
}

impl RedisClusterStore {
    /// A store over the cluster that `nodes` belong to
    /// (`redis://[user:password@]host:port` each, or `rediss://` for TLS,
    /// verified against the platform's trust store; a CA of your own or a
    /// client certificate: [`builder`](Self::builder)). One reachable node
    /// is enough: the others are discovered. Uses floodgate's retry and
    /// timeout settings, see [`client_builder`](Self::client_builder).
    ///
    /// Nothing is connected yet: this fails only on a malformed URL (an
    /// error naming `nodes`), not when the cluster is down. Call
    /// [`probe`](Self::probe) to find out at start-up.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `nodes` when one is not a Redis URL.
    pub fn from_nodes<I, S>(nodes: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::builder(nodes).build()
    }

    /// A builder for a store over the cluster that `nodes` belong to, for
    /// what the URLs cannot say: a CA and a client certificate for TLS.
    pub fn builder<I, S>(nodes: I) -> RedisClusterStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        RedisClusterStoreBuilder::new(nodes.into_iter().map(|s| s.as_ref().to_owned()).collect())
    }

    /// A store over the cluster that the node at `url` belongs to; the same
    /// as [`from_nodes([url])`](Self::from_nodes).
    ///
    /// # Errors
    /// A [`ConfigError`] naming `nodes` when `url` is not a Redis URL.
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        Self::from_nodes([url])
    }

    /// A store over a cluster client you configured yourself (auth,
    /// timeouts, retries); start from
    /// [`client_builder`](Self::client_builder) to keep floodgate's defaults
    /// for what you do not set. The client is redis-rs's, re-exported as
    /// [`floodgate::store::redis`](crate::store::redis).
    pub fn from_client(client: ClusterClient) -> Self {
        Self::over(client, Trust::AppClient, joined::DEFAULT_MAX)
    }

    /// A store over `client`, at most `max_per_call` decisions a call.
    pub(super) fn over(client: ClusterClient, trust: Trust, max_per_call: usize) -> Self {
        super::tls::tls_provider();
        // One cluster connection: it multiplexes all calls over one TCP
        // connection per node. Bounded like any call (`OVERALL_TIMEOUT`).
        let links = Links::new(ClusterConnector::new(client, trust), 1, OVERALL_TIMEOUT);
        Self {
            remote: Remote::new(links, Joiner::new(max_per_call, true)),
        }
    }

    /// The cluster client builder [`from_nodes`](Self::from_nodes) uses:
    /// 10 retries per call; after `TRYAGAIN` or `CLUSTERDOWN` a random
    /// backoff from 10 ms up to 400 ms, doubling; 1 s to connect to a node,
    /// 1 s per attempt, 3 s per call with all its retries. These only bound
    /// the work redis-rs does: how long a decision may wait is the limiter's
    /// [`timeout`](crate::LimiterBuilder::timeout), normally far shorter,
    /// and a call the limiter gives up on is not retried further.
    pub fn client_builder<I, T>(nodes: I) -> ClusterClientBuilder
    where
        I: IntoIterator<Item = T>,
        T: redis::IntoConnectionInfo,
    {
        ClusterClientBuilder::new(nodes)
            .retries(RETRIES)
            .min_retry_wait(MIN_RETRY_WAIT_MS)
            .max_retry_wait(MAX_RETRY_WAIT_MS)
            .retry_wait_formula(10, 2)
            .connection_timeout(CONNECTION_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .overall_response_timeout(Some(OVERALL_TIMEOUT))
    }

    /// The cluster client.
    pub fn client(&self) -> &ClusterClient {
        self.remote.transport().connector().client()
    }
}

impl RedisClusterStore {
    /// Connect now, and say what is there: every node (server, version,
    /// role, TLS, `maxmemory` and eviction policy, with a warning when it
    /// may evict floodgate's keys), and whether decisions run as functions
    /// or scripts; floodgate's code runs once on a key under the default
    /// prefix `floodgate`, as a decision does (that key expires within
    /// 2 s). See [`RedisStore::probe`](super::RedisStore::probe).
    ///
    /// # Errors
    /// As [`RedisStore::probe`](super::RedisStore::probe).
    pub async fn probe(&self) -> Result<ProbeReport, StoreError> {
        self.probe_prefix(crate::store::key::DEFAULT_PREFIX).await
    }

    /// [`probe`](Self::probe), for limiters built with
    /// [`prefix(prefix)`](crate::LimiterBuilder::prefix).
    ///
    /// # Errors
    /// As [`RedisStore::probe`](super::RedisStore::probe).
    pub async fn probe_prefix(&self, prefix: &str) -> Result<ProbeReport, StoreError> {
        let probe = async {
            let mut conn = self.remote.transport().get().await?;
            let tls = self.remote.transport().connector().tls();
            let all = || RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllNodes, None));
            let hello = conn.route_command(redis::cmd("HELLO"), all()).await;
            let info = conn.route_command(redis::cmd("INFO"), all()).await;
            let hello = hello.ok().map(per_node).unwrap_or_default();
            let info = info.ok().map(per_node).unwrap_or_default();
            let mut addresses: Vec<&String> = hello.keys().chain(info.keys()).collect();
            addresses.sort();
            addresses.dedup();
            let mut warnings = Vec::new();
            let nodes = addresses
                .into_iter()
                .map(|a| {
                    let (h, i) = (hello.get(a), info.get(a));
                    super::probe::node(a.clone(), tls, false, h, i, &mut warnings)
                })
                .collect();
            super::probe::decide_once(&self.remote, prefix, nodes, warnings).await
        };
        let within = super::probe::PROBE_TIMEOUT;
        tokio::time::timeout(within, probe)
            .await
            .unwrap_or_else(|_| {
                let place = self.remote.transport().place();
                Err(StoreError::timeout(&place, "the probe", within))
            })
    }
}

/// A reply from every node, by node address. Replicas' `role` says so.
fn per_node(v: Value) -> std::collections::BTreeMap<String, Value> {
    let text = |k: &Value| match k {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    match v {
        Value::Map(items) => items.into_iter().map(|(k, v)| (text(&k), v)).collect(),
        other => [("?".to_owned(), other)].into_iter().collect(),
    }
}

impl From<RedisClusterStore> for Store {
    fn from(s: RedisClusterStore) -> Self {
        Store::new(Arc::new(s.remote))
    }
}

impl fmt::Debug for RedisClusterStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RedisClusterStore")
            .field(&self.remote)
            .finish()
    }
}

/// Makes the cluster connection: one redis-rs cluster connection, which
/// keeps a connection to each node and the slot map up to date by itself.
pub(super) struct ClusterConnector {
    client: ClusterClient,
    tls: bool,
    trust: Trust,
}

impl ClusterConnector {
    pub(super) fn new(client: ClusterClient, trust: Trust) -> Self {
        // redis-rs has no accessor for it: its description names the
        // initial nodes' addresses, `TcpTls { .. }` for TLS.
        let tls = format!("{client:?}").contains("TcpTls");
        Self { client, tls, trust }
    }

    pub(super) fn client(&self) -> &ClusterClient {
        &self.client
    }

    /// Whether the nodes are reached over TLS.
    pub(super) fn tls(&self) -> bool {
        self.tls
    }
}

impl Connector for ClusterConnector {
    type Conn = ClusterConnection;
    /// redis-rs re-reads the slot map on `MOVED` and when it has no
    /// connection for a node, but a node that refuses connections (a
    /// primary that died) is only reconnected to: a map read just before
    /// the promotion of its replica keeps the dead primary until something
    /// else makes it read the map again. A call that finds a node's
    /// connection broken or refused replaces the whole cluster connection
    /// (whose first act is reading the map), at most once a second: the
    /// store reads the topology at least once a second while a shard fails.
    const MIN_LIFETIME: Duration = Duration::from_secs(1);

    async fn connect(&self) -> Result<ClusterConnection, StoreError> {
        self.client
            .get_async_connection()
            .await
            .map_err(|e| StoreError::connect("the redis cluster", self.trust, e))
    }

    /// Calls of one key run in the order they were sent: redis-rs keeps one
    /// connection per node.
    async fn send(conn: &mut ClusterConnection, cmd: &Cmd) -> Result<Value, RedisError> {
        super::redirect::query(conn, cmd).await
    }

    /// Load the library on the primary that owns `key`'s slot (by the slot
    /// map: not a fan-out, which would fail whenever any node is down).
    async fn load(conn: &mut ClusterConnection, key: Option<&[u8]>) -> Result<Value, RedisError> {
        let slot = Slot::for_key(key.unwrap_or_default());
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_slot(
            slot,
            SlotAddr::Master,
        )));
        conn.route_command(load_library(), route).await
    }
}

impl fmt::Debug for ClusterConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the redis cluster")
    }
}
