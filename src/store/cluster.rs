//! The shared store on Redis Cluster: the same function library and
//! scripts as [`RedisStore`](super::RedisStore), each call routed by its key
//! to the shard that owns it.
//!
//! Every call touches keys of one hash tag, the escaped user key, so one
//! client's state lives on one shard and clients spread over all of them.
//! A missing function is loaded on the node that owns the key; `NOSCRIPT` is
//! answered with `EVAL` of the source on the same route; redirections and cluster-down errors are retried by redis-rs'
//! cluster connection, and no retry can admit more than the limit (a retry
//! after a broken connection can only charge twice). The details, for users
//! as well, are on [`RedisClusterStore`].

use super::redis::{function_missing, load_library_cmd, no_function_here};
use super::StoreError;
use crate::algorithm::{
    parse_value, script_cmd, Mode, Reply, Spec, LEASE_SCRIPT, LEASE_SOURCE, LIBRARY, SCRIPT,
    SCRIPT_SOURCE,
};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{
    Cmd, ErrorKind, IntoConnectionInfo, RedisError, RedisResult, Script, ServerErrorKind, Value,
};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

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
/// After a failed connection attempt, calls fail at once for this long.
const RECONNECT_INTERVAL: Duration = Duration::from_millis(100);

/// Keeps rate-limit state in a Redis Cluster: each client's state on the
/// shard that owns its key, so load spreads over all primaries.
///
/// A drop-in replacement for [`RedisStore`](super::RedisStore): build it,
/// pass it to [`Limiter::builder`](crate::Limiter::builder), and nothing else
/// changes. Each decision is one atomic script on one shard: the same
/// scripts, and the same decisions, as on a single Redis.
///
/// ```no_run
/// # async fn demo() -> Result<(), floodgate::Error> {
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
/// # One key per script, one shard per client
///
/// Every floodgate script touches exactly one key,
/// `{prefix}:{name}:{alg}:{<escaped user key>}`. The braces are a Redis
/// Cluster *hash tag*: only the text between them is hashed to pick the
/// slot, so the slot is `CRC16(escaped user key) mod 16384`. The user key is
/// escaped so that it never contains a brace: a client can neither move its
/// key to another slot nor make a script span two slots (`CROSSSLOT`). All of
/// one client's state lives on one shard, each decision is one atomic script
/// there, and different clients spread evenly over all shards.
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
/// * `NOSCRIPT`, function not found: nothing ran. Sent once more after
///   loading, or as `EVAL` (above). Always safe.
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
#[derive(Clone)]
pub struct RedisClusterStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: ClusterClient,
    /// The cluster knows no `FCALL` (Redis < 7): decisions use `EVALSHA`.
    no_functions: AtomicBool,
    /// A task is loading the library on a node.
    loading: AtomicBool,
    state: Mutex<Conn>,
    /// Wakes the callers waiting for a connection attempt to end.
    notify: Notify,
}

/// The one cluster connection: once made, redis-rs keeps it up (it
/// reconnects to nodes and refreshes the slot map by itself).
#[derive(Default)]
enum Conn {
    /// Never tried.
    #[default]
    Idle,
    /// The last attempt failed at that time, for that reason.
    Failed(Instant, String),
    /// A background task is connecting.
    Connecting,
    Ready(ClusterConnection),
}

impl RedisClusterStore {
    /// A store over the cluster that `nodes` belong to
    /// (`redis://[user:password@]host:port` each). One reachable node is
    /// enough: the others are discovered. Uses floodgate's retry and timeout
    /// settings, see [`client_builder`](Self::client_builder).
    ///
    /// Nothing is connected yet: this fails only on a malformed URL, not
    /// when the cluster is down.
    pub fn from_nodes<I, T>(nodes: I) -> Result<Self, StoreError>
    where
        I: IntoIterator<Item = T>,
        T: IntoConnectionInfo,
    {
        let client = Self::client_builder(nodes)
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self::from_client(client))
    }

    /// A store over the cluster that the node at `url` belongs to; the same
    /// as [`from_nodes([url])`](Self::from_nodes).
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        Self::from_nodes([url])
    }

    /// A store over a cluster client you configured yourself (TLS, auth,
    /// timeouts, retries); start from
    /// [`client_builder`](Self::client_builder) to keep floodgate's defaults
    /// for what you do not set.
    pub fn from_client(client: ClusterClient) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                no_functions: AtomicBool::new(false),
                loading: AtomicBool::new(false),
                state: Mutex::new(Conn::Idle),
                notify: Notify::new(),
            }),
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
        T: IntoConnectionInfo,
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
        &self.inner.client
    }

    /// The shared connection, made on first use by a task of its own, so
    /// that a caller that gives up (the limiter's timeout) does not cancel
    /// it. After a failed attempt, calls fail at once for 100 ms instead of
    /// trying again: no storm of connection attempts at a cluster that is
    /// down.
    async fn connection(&self) -> Result<ClusterConnection, StoreError> {
        let inner = &self.inner;
        loop {
            // Registered before looking, so the end of an attempt is not missed.
            let notified = inner.notify.notified();
            {
                let mut state = lock(&inner.state);
                match &*state {
                    Conn::Ready(conn) => return Ok(conn.clone()),
                    Conn::Connecting => {}
                    Conn::Failed(at, why) if at.elapsed() < RECONNECT_INTERVAL => {
                        return Err(StoreError::Unavailable(why.clone()))
                    }
                    Conn::Idle | Conn::Failed(..) => {
                        *state = Conn::Connecting;
                        tokio::spawn(connect(inner.clone()));
                    }
                }
            }
            notified.await;
        }
    }

    /// One script call deciding `targets` together. They share one hash
    /// tag (the user key), so they live on one shard.
    pub(crate) async fn decide(
        &self,
        targets: &[(&str, &Spec)],
        now: Option<u64>,
        cost: u64,
        mode: Mode,
    ) -> Result<Vec<Reply>, StoreError> {
        let cmd = |verb: &str, script: &str| script_cmd(verb, script, targets, now, cost, mode);
        let key = targets.first().map_or("", |(k, _)| *k);
        let v = self.fcall(key, cmd).await?;
        parse_value(&v, targets.len())
            .ok_or_else(|| StoreError::Protocol(format!("unexpected script reply {v:?}")))
    }

    /// One call of `lua/concurrency.lua`.
    pub(crate) async fn lease(
        &self,
        key: &str,
        now: Option<u64>,
        op: &str,
        id: &str,
        max: u64,
        lease_ms: u64,
    ) -> Result<[i64; 4], StoreError> {
        let v = self
            .eval(&LEASE_SCRIPT, LEASE_SOURCE, |verb, script| {
                super::redis::lease_cmd(verb, script, key, now, op, id, max, lease_ms)
            })
            .await?;
        super::redis::parse_lease(&v)
    }

    /// `FCALL` of floodgate's library, routed by the command's key. When
    /// the node lacks the function, this call runs as `EVAL` of the source
    /// (as many round trips as `EVALSHA` + `EVAL` before functions) while
    /// the library is loaded on that node in the background.
    async fn fcall(&self, key: &str, cmd: impl Fn(&str, &str) -> Cmd) -> Result<Value, StoreError> {
        if self.inner.no_functions.load(Ordering::Relaxed) {
            return self.eval(&SCRIPT, &SCRIPT_SOURCE, cmd).await;
        }
        let mut conn = self.connection().await?;
        match query(&mut conn, &cmd("FCALL", &LIBRARY.name)).await {
            Ok(v) => Ok(v),
            Err(e) if no_function_here(&e) => {
                self.inner.no_functions.store(true, Ordering::Relaxed);
                self.eval(&SCRIPT, &SCRIPT_SOURCE, cmd).await
            }
            Err(e) if function_missing(&e) => {
                self.load_library(key);
                query(&mut conn, &cmd("EVAL", &SCRIPT_SOURCE))
                    .await
                    .map_err(store_error)
            }
            Err(e) => Err(store_error(e)),
        }
    }

    /// Load the library on the node owning `key`'s slot (by the slot map:
    /// not a fan-out), in a task of its own, one at a time.
    fn load_library(&self, key: &str) {
        if self.inner.loading.swap(true, Ordering::AcqRel) {
            return;
        }
        struct Done(Arc<Inner>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.loading.store(false, Ordering::Release);
            }
        }
        let store = self.clone();
        let route = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_slot(
            Slot::for_key(key),
            SlotAddr::Master,
        )));
        tokio::spawn(async move {
            let _done = Done(store.inner.clone());
            if let Ok(mut conn) = store.connection().await {
                if let Err(e) = conn.route_command(load_library_cmd(), route).await {
                    if no_function_here(&e) {
                        store.inner.no_functions.store(true, Ordering::Relaxed);
                    }
                }
            }
        });
    }

    /// `EVALSHA`, routed by the command's key; on `NOSCRIPT` the script did
    /// not run: run it by its source, which also caches it on the node that
    /// owns the key.
    async fn eval(
        &self,
        script: &Script,
        source: &str,
        cmd: impl Fn(&str, &str) -> Cmd,
    ) -> Result<Value, StoreError> {
        let mut conn = self.connection().await?;
        match query(&mut conn, &cmd("EVALSHA", script.get_hash())).await {
            Ok(v) => Ok(v),
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                query(&mut conn, &cmd("EVAL", source))
                    .await
                    .map_err(store_error)
            }
            Err(e) => Err(store_error(e)),
        }
    }
}

/// Rounds of redis-rs' own retries one call may take when they end on a
/// redirection (see [`query`]).
const REDIRECT_ROUNDS: usize = 3;

/// One script call, routed by its key; redirections and backoffs are left
/// to redis-rs, except where it ends on `ASK` or `MOVED`.
///
/// redis-rs (1.8, also 2.0) follows `ASK` by sending `ASKING` and then the
/// command as two requests on the target's shared, multiplexed connection.
/// Any other request sent to that node in between consumes the one-shot
/// `ASKING` flag; the command then gets `MOVED` back to the source, which
/// answers `ASK` again, and under load the retries run out in this
/// ping-pong. So when the error is still `ASK`, the call is sent once more as
/// one pipeline, `ASKING` and the command back to back, which nothing can
/// come between; when it is `MOVED`, the whole call is made again, routed by
/// the slot map redis-rs has refreshed meanwhile. Both are safe: `ASK` and
/// `MOVED` mean the script did not run.
async fn query(conn: &mut ClusterConnection, call: &Cmd) -> RedisResult<Value> {
    let mut round = 0;
    loop {
        round += 1;
        let mut result = call.query_async(conn).await;
        if let Err(e) = &result {
            if let Some((host, port)) = ask_target(e) {
                result = asking(conn, call, host, port).await;
            }
        }
        match result {
            Err(e) if round < REDIRECT_ROUNDS && redirected(&e) => continue,
            other => return other,
        }
    }
}

fn redirected(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::Ask | ServerErrorKind::Moved)
    )
}

/// The node an `ASK` error sends the call to.
fn ask_target(e: &RedisError) -> Option<(String, u16)> {
    if e.kind() != ErrorKind::Server(ServerErrorKind::Ask) {
        return None;
    }
    let (addr, _slot) = e.redirect_node()?;
    let (host, port) = addr.rsplit_once(':')?;
    Some((host.to_string(), port.parse().ok()?))
}

/// `ASKING` and `call` as one pipeline to the node at `host:port`.
async fn asking(
    conn: &mut ClusterConnection,
    call: &Cmd,
    host: String,
    port: u16,
) -> RedisResult<Value> {
    let mut pipe = redis::pipe();
    pipe.cmd("ASKING").add_command(call.clone());
    let replies = conn
        .route_pipeline(pipe, 0, 2, SingleNodeRoutingInfo::ByAddress { host, port })
        .await?;
    let reply = replies
        .into_iter()
        .nth(1)
        .ok_or_else(|| RedisError::from((ErrorKind::Client, "no reply after ASKING")))?;
    reply.extract_error()
}

/// One connection attempt; whatever happens to the task, its end is
/// recorded and the waiting callers are woken.
async fn connect(inner: Arc<Inner>) {
    struct Attempt {
        inner: Arc<Inner>,
        result: Option<Conn>,
    }
    impl Drop for Attempt {
        fn drop(&mut self) {
            let end = self.result.take().unwrap_or_else(|| {
                Conn::Failed(Instant::now(), "connection attempt abandoned".into())
            });
            *lock(&self.inner.state) = end;
            self.inner.notify.notify_waiters();
        }
    }
    let mut attempt = Attempt {
        inner: inner.clone(),
        result: None,
    };
    attempt.result = Some(match inner.client.get_async_connection().await {
        Ok(conn) => Conn::Ready(conn),
        Err(e) => Conn::Failed(
            Instant::now(),
            format!("cannot connect to the redis cluster: {e}"),
        ),
    });
}

fn lock(state: &Mutex<Conn>) -> MutexGuard<'_, Conn> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn store_error(e: RedisError) -> StoreError {
    if e.is_timeout() {
        StoreError::Timeout
    } else {
        StoreError::Redis(e)
    }
}

impl fmt::Debug for RedisClusterStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisClusterStore")
            .field(
                "connected",
                &matches!(*lock(&self.inner.state), Conn::Ready(_)),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_hash_to_the_scripts_evalsha_calls() {
        assert_eq!(Script::new(&SCRIPT_SOURCE).get_hash(), SCRIPT.get_hash());
        assert_eq!(
            Script::new(LEASE_SOURCE).get_hash(),
            LEASE_SCRIPT.get_hash()
        );
    }

    #[test]
    fn malformed_urls_are_config_errors() {
        assert!(matches!(
            RedisClusterStore::from_url("nope://x"),
            Err(StoreError::Config(_))
        ));
        assert!(RedisClusterStore::from_nodes(["redis://127.0.0.1:1"]).is_ok());
    }
}
