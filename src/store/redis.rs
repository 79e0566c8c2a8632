//! The shared store: one atomic Lua script per decision on Redis.

use super::StoreError;
use crate::algorithm::{parse_replies, script_args, Mode, Reply, Spec, LEASE_SCRIPT, SCRIPT};
use deadpool_redis::{Config, Pool, Runtime};

/// Keeps rate-limit state in Redis, so every app server behind a load
/// balancer sees the same counters.
///
/// Each decision is one `EVALSHA` of the algorithm's script: read, decide and
/// write happen atomically on Redis' command thread, so no number of
/// concurrent app servers can overshoot a limit. When Redis answers
/// `NOSCRIPT` (after a restart, failover or `SCRIPT FLUSH`) the script is
/// loaded again and the call retried, transparently.
///
/// Cheap to clone: clones share the pool.
///
/// ```no_run
/// # async fn demo() -> Result<(), floodgate::store::StoreError> {
/// use floodgate::store::RedisStore;
/// let store = RedisStore::from_url("redis://127.0.0.1:6379")?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    pool: Pool,
}

impl RedisStore {
    /// A store over an existing deadpool-redis pool.
    pub fn from_pool(pool: Pool) -> Self {
        Self { pool }
    }

    /// A store over a new pool of connections to `url`
    /// (`redis://[user:password@]host:port[/db]`, or `rediss://` for TLS
    /// when redis-rs is built with TLS). Connections are made lazily: this
    /// does not fail when Redis is down.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let pool = Config::from_url(url)
            .create_pool(Some(Runtime::Tokio1))
            .map_err(|e| StoreError::Config(e.to_string()))?;
        Ok(Self { pool })
    }

    /// The underlying pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// One script call deciding `targets` together.
    pub(crate) async fn decide(
        &self,
        targets: &[(&str, &Spec)],
        now: Option<u64>,
        cost: u64,
        mode: Mode,
    ) -> Result<Vec<Reply>, StoreError> {
        let mut conn = self
            .pool
            .get()
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let specs: Vec<Spec> = targets.iter().map(|(_, s)| **s).collect();
        let mut call = SCRIPT.prepare_invoke();
        for (key, _) in targets {
            call.key(*key);
        }
        for arg in script_args(now, mode, cost, &specs) {
            call.arg(arg);
        }
        let v: Vec<i64> = call.invoke_async(&mut conn).await?;
        parse_replies(&v, targets.len())
            .ok_or_else(|| StoreError::Protocol(format!("unexpected script reply {v:?}")))
    }
}

impl RedisStore {
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
        let mut conn = self
            .pool
            .get()
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let now = now.map(|n| n.to_string()).unwrap_or_default();
        let v: Vec<i64> = LEASE_SCRIPT
            .key(key)
            .arg(now)
            .arg(op)
            .arg(id)
            .arg(max)
            .arg(lease_ms)
            .invoke_async(&mut conn)
            .await?;
        v.try_into()
            .map_err(|v| StoreError::Protocol(format!("unexpected lease reply {v:?}")))
    }
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("pool", &self.pool.status())
            .finish()
    }
}
