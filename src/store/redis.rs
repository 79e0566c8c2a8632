//! The shared store: one atomic Lua script per decision on Redis.
//!
//! Connections: a few multiplexed connections, each checked out of a
//! deadpool-redis pool once and kept, shared round-robin by all calls. A
//! multiplexed connection pipelines concurrent calls by itself, so a
//! decision costs exactly one `EVALSHA` round trip: no checkout, no `PING`
//! to recycle a connection (which deadpool pays on every `get`, halving
//! throughput). The pool still creates the connections and bounds their
//! number; a connection that breaks is detached from it and replaced in the
//! background, at most one attempt per slot at a time.

use super::StoreError;
use crate::algorithm::{parse_value, script_cmd, Mode, Reply, Spec, LEASE_SCRIPT, LIBRARY, SCRIPT};
use deadpool_redis::{Connection, Manager, Pool, Runtime};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, ErrorKind, RedisError, Script, ServerErrorKind, Value};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Default number of multiplexed connections a [`RedisStore`] shares.
const DEFAULT_CONNECTIONS: usize = 2;

/// Default bound on making one connection.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// After a failed connection attempt, calls that need that connection fail at
/// once for this long instead of trying again: no storm of reconnects against
/// a Redis that is down.
const RECONNECT_INTERVAL: Duration = Duration::from_millis(100);

/// A connection on which every call has been given up (timed out) for this
/// long, with no answer in between, is replaced: a peer that vanished
/// without closing the connection never answers again.
const STALL_LIMIT_MS: u64 = 2_000;

/// Keeps rate-limit state in Redis, so every app server behind a load
/// balancer sees the same counters.
///
/// Each decision is one `FCALL` of floodgate's Redis Function library: read,
/// decide and write happen atomically on Redis' command thread, so no
/// number of concurrent app servers can overshoot a limit. When Redis does
/// not have the function (a fresh server, `FUNCTION FLUSH`, a new floodgate
/// version) the library is loaded (`FUNCTION LOAD`) and the call
/// repeated on the same connection, transparently. On Redis before 7.0
/// (no functions) decisions are `EVALSHA` of the same code as a script,
/// loaded again on `NOSCRIPT`.
///
/// Calls share a few multiplexed connections ([`connections`](Self::connections),
/// default 2) round-robin; each pipelines concurrent
/// calls, so no call waits for a connection of its own. Connections are made
/// lazily, in the background, each within
/// [`connect_timeout`](Self::connect_timeout). A connection that breaks
/// (reset, closed, killed by `CLIENT KILL`) is dropped and replaced, and the
/// call that found it broken is repeated once on the new one (if Redis had
/// run it before the connection broke, the request is charged twice: strict,
/// never loose); a call that
/// finds Redis unreachable fails at once for the next 100 ms instead of
/// trying again. How long a decision may wait, and what happens when it
/// cannot be made, is the limiter's business: see [`crate::failure`].
///
/// Cheap to clone: clones share the connections.
///
/// ```no_run
/// # async fn demo() -> Result<(), floodgate::store::StoreError> {
/// use floodgate::store::RedisStore;
/// use std::time::Duration;
/// let store = RedisStore::from_url("redis://127.0.0.1:6379")?
///     .connections(4)
///     .connect_timeout(Duration::from_millis(500));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    shared: Arc<Shared>,
}

struct Shared {
    pool: Pool,
    /// The pool was made by [`RedisStore::from_url`]: it may be resized.
    owns_pool: bool,
    slots: Box<[Slot]>,
    next: AtomicUsize,
    connect_timeout: Duration,
    epoch: Instant,
    /// The server knows no `FCALL` (Redis < 7): decisions use `EVALSHA`.
    no_functions: AtomicBool,
    /// Bumped by each load of the library, under its lock: of the calls
    /// that found the function missing at once, one loads it.
    loads: tokio::sync::Mutex<u64>,
    loaded: AtomicU64,
}

struct Slot {
    state: Mutex<SlotState>,
    /// Wakes callers waiting for a connection attempt to end.
    notify: Notify,
    /// `Shared::now_ms` of the first call given up on since the last answer
    /// on this slot's connection; 0 while it answers.
    stalled_since: AtomicU64,
}

#[derive(Default)]
struct SlotState {
    live: Option<Live>,
    /// A background task is making this slot's connection.
    connecting: bool,
    /// When the last attempt failed, and why.
    failed: Option<(Instant, String)>,
    generation: u64,
}

struct Live {
    /// What calls use (clones share the connection).
    conn: MultiplexedConnection,
    /// Kept checked out of the pool for as long as the connection is used.
    object: Connection,
    generation: u64,
}

impl RedisStore {
    /// A store over an existing deadpool-redis pool. It keeps
    /// 2 of the pool's connections checked out (at
    /// most the pool's `max_size`).
    pub fn from_pool(pool: Pool) -> Self {
        Self::build(pool, false, DEFAULT_CONNECTIONS, DEFAULT_CONNECT_TIMEOUT)
    }

    /// A store over a new pool of connections to `url`
    /// (`redis://[user:password@]host:port[/db]`, or `rediss://` for TLS
    /// when redis-rs is built with TLS). Connections are made lazily: this
    /// does not fail when Redis is down.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        // No response timeout of redis-rs' own: the limiter's timeout is the
        // one. The connection timeout is `connect_timeout`, applied here.
        let config = AsyncConnectionConfig::new()
            .set_response_timeout(None)
            .set_connection_timeout(None);
        let manager = Manager::new_with_config(url, config)
            .map_err(|e| StoreError::Config(format!("redis url: {e}")))?;
        let pool = Pool::builder(manager)
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self::build(
            pool,
            true,
            DEFAULT_CONNECTIONS,
            DEFAULT_CONNECT_TIMEOUT,
        ))
    }

    /// Share `n` multiplexed connections (at least 1; default
    /// 2). One connection already pipelines any number
    /// of concurrent calls; a second spreads the client-side work over two
    /// driver tasks. More rarely help: Redis runs scripts on one thread.
    /// With [`from_pool`](Self::from_pool), at most the pool's `max_size`.
    pub fn connections(self, n: usize) -> Self {
        let s = &self.shared;
        let mut n = n.max(1);
        let max = s.pool.status().max_size;
        if n > max {
            if s.owns_pool {
                s.pool.resize(n);
            } else {
                n = max.max(1);
            }
        }
        Self::build(s.pool.clone(), s.owns_pool, n, s.connect_timeout)
    }

    /// Give up making a connection after `timeout` (default 1 s). Callers
    /// never wait longer than their own timeout for it: the connection is
    /// made in the background.
    pub fn connect_timeout(self, timeout: Duration) -> Self {
        let s = &self.shared;
        Self::build(s.pool.clone(), s.owns_pool, s.slots.len(), timeout)
    }

    fn build(pool: Pool, owns_pool: bool, n: usize, connect_timeout: Duration) -> Self {
        let slots = (0..n.max(1))
            .map(|_| Slot {
                state: Mutex::new(SlotState::default()),
                notify: Notify::new(),
                stalled_since: AtomicU64::new(0),
            })
            .collect();
        Self {
            shared: Arc::new(Shared {
                pool,
                owns_pool,
                slots,
                next: AtomicUsize::new(0),
                connect_timeout,
                epoch: Instant::now(),
                no_functions: AtomicBool::new(false),
                loads: tokio::sync::Mutex::new(0),
                loaded: AtomicU64::new(0),
            }),
        }
    }

    /// The underlying pool.
    pub fn pool(&self) -> &Pool {
        &self.shared.pool
    }

    /// One script call deciding `targets` together (one key each).
    pub(crate) async fn decide(
        &self,
        targets: &[(&str, &Spec)],
        now: Option<u64>,
        cost: u64,
        mode: Mode,
    ) -> Result<Vec<Reply>, StoreError> {
        let no_functions = &self.shared.no_functions;
        let v = if no_functions.load(Ordering::Relaxed) {
            None
        } else {
            let cmd = script_cmd("FCALL", &LIBRARY.name, targets, now, cost, mode);
            match self.call(Load::Library, &cmd).await {
                Err(StoreError::Redis(e)) if no_function_here(&e) => {
                    no_functions.store(true, Ordering::Relaxed);
                    None
                }
                other => Some(other?),
            }
        };
        let v = match v {
            Some(v) => v,
            None => {
                let cmd = script_cmd("EVALSHA", SCRIPT.get_hash(), targets, now, cost, mode);
                self.call(Load::Script(&SCRIPT), &cmd).await?
            }
        };
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
        let cmd = lease_cmd(
            "EVALSHA",
            LEASE_SCRIPT.get_hash(),
            key,
            now,
            op,
            id,
            max,
            lease_ms,
        );
        let v = self.call(Load::Script(&LEASE_SCRIPT), &cmd).await?;
        parse_lease(&v)
    }

    /// Run `cmd` (an `FCALL` or `EVALSHA` of what `load` loads) on a shared
    /// connection.
    async fn call(&self, load: Load<'_>, cmd: &Cmd) -> Result<Value, StoreError> {
        let shared = &self.shared;
        let mut i = shared.pick();
        let mut retried = false;
        loop {
            let (mut conn, slot, generation) = Shared::connection(shared, i, retried).await?;
            let watch = Watch {
                shared,
                slot,
                generation,
                answered: false,
            };
            let result = run(shared, &mut conn, load, cmd).await;
            watch.answered();
            match result {
                Ok(v) => return Ok(v),
                // The connection is gone (reset, closed, killed): replace it,
                // and repeat the call once, on its replacement.
                Err(e) if broken(&e) => {
                    shared.detach(slot, generation);
                    if retried {
                        return Err(e.into());
                    }
                    retried = true;
                    i = slot;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The concurrency script's call (see `lua/concurrency.lua` for ARGV).
#[allow(clippy::too_many_arguments)]
pub(super) fn lease_cmd(
    verb: &str,
    script: &str,
    key: &str,
    now: Option<u64>,
    op: &str,
    id: &str,
    max: u64,
    lease_ms: u64,
) -> Cmd {
    let mut cmd = redis::cmd(verb);
    cmd.arg(script).arg(1).arg(key);
    match now {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    cmd.arg(op).arg(id).arg(max).arg(lease_ms);
    cmd
}

/// The concurrency script's reply.
pub(super) fn parse_lease(v: &Value) -> Result<[i64; 4], StoreError> {
    if let Value::Array(items) = v {
        if let [Value::Int(a), Value::Int(b), Value::Int(c), Value::Int(d)] = items[..] {
            return Ok([a, b, c, d]);
        }
    }
    Err(StoreError::Protocol(format!(
        "unexpected lease reply {v:?}"
    )))
}

impl Shared {
    fn pick(&self) -> usize {
        match self.slots.len() {
            1 => 0,
            n => self.next.fetch_add(1, Ordering::Relaxed) % n,
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64 + 1
    }

    /// A connection for a call that picked slot `i`: slot `i`'s, or while
    /// that one is being made (or could not be), any other live one; `fresh`
    /// (a repeat after a broken connection) insists on slot `i`'s next one.
    /// Returns the connection, the slot it belongs to, and its generation.
    async fn connection(
        this: &Arc<Self>,
        i: usize,
        fresh: bool,
    ) -> Result<(MultiplexedConnection, usize, u64), StoreError> {
        let slot = &this.slots[i];
        if let Some(live) = &lock(&slot.state).live {
            return Ok((live.conn.clone(), i, live.generation));
        }
        loop {
            // Registered before looking, so the end of an attempt is not missed.
            let notified = slot.notify.notified();
            let failed = {
                let mut st = lock(&slot.state);
                if let Some(live) = &st.live {
                    return Ok((live.conn.clone(), i, live.generation));
                }
                let mut failed = None;
                if !st.connecting {
                    match &st.failed {
                        Some((at, why)) if at.elapsed() < RECONNECT_INTERVAL => {
                            failed = Some(why.clone());
                        }
                        _ => {
                            st.connecting = true;
                            tokio::spawn(Self::connect(this.clone(), i));
                        }
                    }
                }
                failed
            };
            if !fresh {
                if let Some(other) = this.any_live(i) {
                    return Ok(other);
                }
            }
            if let Some(why) = failed {
                return Err(StoreError::Unavailable(why));
            }
            notified.await;
        }
    }

    /// Another slot's live connection, if any.
    fn any_live(&self, but: usize) -> Option<(MultiplexedConnection, usize, u64)> {
        let n = self.slots.len();
        (1..n).map(|k| (but + k) % n).find_map(|j| {
            let st = lock(&self.slots[j].state);
            st.live.as_ref().map(|l| (l.conn.clone(), j, l.generation))
        })
    }

    /// Make slot `i`'s connection (one attempt, bounded), then wake whoever
    /// waits for it.
    async fn connect(this: Arc<Self>, i: usize) {
        let mut attempt = Attempt {
            shared: &this,
            slot: i,
            result: Some(Err("connection attempt abandoned".into())),
        };
        let result = match tokio::time::timeout(this.connect_timeout, this.pool.get()).await {
            Ok(Ok(object)) => Ok(object),
            Ok(Err(e)) => Err(format!("cannot connect to redis: {e}")),
            Err(_) => Err(format!(
                "cannot connect to redis within {:?}",
                this.connect_timeout
            )),
        };
        attempt.result = Some(result);
    }

    fn install(&self, i: usize, result: Result<Connection, String>) {
        let slot = &self.slots[i];
        let mut st = lock(&slot.state);
        st.connecting = false;
        match result {
            Ok(object) => {
                st.generation += 1;
                st.live = Some(Live {
                    conn: MultiplexedConnection::clone(&object),
                    object,
                    generation: st.generation,
                });
                st.failed = None;
                slot.stalled_since.store(0, Ordering::Relaxed);
            }
            Err(why) => st.failed = Some((Instant::now(), why)),
        }
        drop(st);
        slot.notify.notify_waiters();
    }

    /// Drop slot `i`'s connection if it is still `generation`, and take it
    /// out of the pool for good: the next call makes a new one.
    fn detach(&self, i: usize, generation: u64) {
        let mut st = lock(&self.slots[i].state);
        if st.live.as_ref().is_some_and(|l| l.generation == generation) {
            let live = st.live.take();
            drop(st);
            if let Some(live) = live {
                drop(Connection::take(live.object));
            }
        }
    }
}

/// The end of a connection attempt, also when its task is dropped.
struct Attempt<'a> {
    shared: &'a Shared,
    slot: usize,
    result: Option<Result<Connection, String>>,
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if let Some(result) = self.result.take() {
            self.shared.install(self.slot, result);
        }
    }
}

/// Notices calls given up on (their future dropped, i.e. timed out) with no
/// answer from the connection, and replaces a connection that stalled.
struct Watch<'a> {
    shared: &'a Shared,
    slot: usize,
    generation: u64,
    answered: bool,
}

impl Watch<'_> {
    fn answered(mut self) {
        self.answered = true;
        let since = &self.shared.slots[self.slot].stalled_since;
        if since.load(Ordering::Relaxed) != 0 {
            since.store(0, Ordering::Relaxed);
        }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let since = &self.shared.slots[self.slot].stalled_since;
        let now = self.shared.now_ms();
        match since.load(Ordering::Relaxed) {
            0 => {
                let _ = since.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
            }
            t if now.saturating_sub(t) >= STALL_LIMIT_MS => {
                since.store(0, Ordering::Relaxed);
                self.shared.detach(self.slot, self.generation);
            }
            _ => {}
        }
    }
}

/// What a call needs loaded on the server, and loads again when it is gone.
#[derive(Clone, Copy)]
enum Load<'a> {
    /// floodgate's function library, for `FCALL`.
    Library,
    /// A script, for `EVALSHA`.
    Script(&'a Script),
}

/// `cmd`, and when the server lacks its code (the script cache or the
/// functions were emptied, or never had it) load it and send `cmd` again:
/// the first attempt did not run.
async fn run(
    shared: &Shared,
    conn: &mut MultiplexedConnection,
    load: Load<'_>,
    cmd: &Cmd,
) -> redis::RedisResult<Value> {
    let seen = shared.loaded.load(Ordering::Acquire);
    match conn
        .send_packed_command(cmd)
        .await
        .and_then(Value::extract_error)
    {
        Err(e) if load.missing(&e) => {
            match load {
                Load::Library => {
                    // One load per herd: a call that finds a load done
                    // since it sent its FCALL only repeats it.
                    let mut loads = shared.loads.lock().await;
                    if *loads == seen {
                        match load_library_cmd().query_async::<String>(conn).await {
                            Err(e) if !already_loaded(&e) => return Err(e),
                            _ => {}
                        }
                        *loads += 1;
                        shared.loaded.store(*loads, Ordering::Release);
                    }
                }
                Load::Script(script) => {
                    script.load_async(conn).await?;
                }
            }
            conn.send_packed_command(cmd)
                .await
                .and_then(Value::extract_error)
        }
        other => other,
    }
}

impl Load<'_> {
    fn missing(self, e: &RedisError) -> bool {
        match self {
            Load::Library => function_missing(e),
            Load::Script(_) => e.kind() == ErrorKind::Server(ServerErrorKind::NoScript),
        }
    }
}

/// `FUNCTION LOAD` of floodgate's library. Without `REPLACE`: when many
/// calls found it missing at once, the loads after the first are refused
/// before any compiling (the name says the version: same name, same code).
pub(super) fn load_library_cmd() -> Cmd {
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("LOAD").arg(&LIBRARY.source);
    cmd
}

/// The answer to loading a library that another call loaded first.
pub(super) fn already_loaded(e: &RedisError) -> bool {
    e.detail().is_some_and(|d| d.contains("already exists"))
}

/// `FCALL` of a function the server does not have.
pub(super) fn function_missing(e: &RedisError) -> bool {
    e.code() == Some("ERR")
        && e.detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// A server without the command (`FCALL` before Redis 7).
pub(super) fn unknown_command(e: &RedisError) -> bool {
    e.code() == Some("ERR") && e.detail().is_some_and(|d| d.starts_with("unknown command"))
}

/// Functions cannot be used here: no `FCALL`, or `FCALL` or `FUNCTION LOAD`
/// not allowed to this user (ACL). Scripts may still be.
pub(super) fn no_function_here(e: &RedisError) -> bool {
    unknown_command(e) || e.code() == Some("NOPERM")
}

/// The connection cannot be used again.
fn broken(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_unrecoverable_error()
}

/// A poisoned slot only means a thread panicked while holding it; the state
/// is still consistent.
fn lock(m: &Mutex<SlotState>) -> MutexGuard<'_, SlotState> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        let connected = s
            .slots
            .iter()
            .filter(|x| lock(&x.state).live.is_some())
            .count();
        f.debug_struct("RedisStore")
            .field("pool", &s.pool.status())
            .field("connections", &s.slots.len())
            .field("connected", &connected)
            .field("connect_timeout", &s.connect_timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_replies_parse() {
        let ints = |v: &[i64]| Value::Array(v.iter().map(|&n| Value::Int(n)).collect());
        assert_eq!(parse_lease(&ints(&[1, 2, 1, 500])).unwrap(), [1, 2, 1, 500]);
        assert!(parse_lease(&ints(&[1, 2])).is_err());
        assert!(parse_lease(&Value::Nil).is_err());
    }
}
