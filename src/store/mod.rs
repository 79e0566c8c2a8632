//! Where rate-limit state lives: in this process ([`MemoryStore`]), in
//! Redis ([`RedisStore`]) or in a Redis Cluster ([`RedisClusterStore`]). All
//! make the same decisions.

mod cluster;
pub(crate) mod key;
mod memory;
mod redis;

pub use self::cluster::RedisClusterStore;
pub use self::memory::{MemoryStore, DEFAULT_MAX_KEYS};
pub use self::redis::RedisStore;

use crate::algorithm::{Mode, Reply, Spec};
use std::fmt;

/// A store a [`Limiter`](crate::Limiter) keeps its state in.
///
/// Built from any store with `.into()`; the limiter's API is the same.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Store {
    /// State in this process.
    Memory(MemoryStore),
    /// State in Redis.
    Redis(RedisStore),
    /// State in a Redis Cluster, each key on the shard that owns it.
    RedisCluster(RedisClusterStore),
}

impl From<MemoryStore> for Store {
    fn from(s: MemoryStore) -> Self {
        Store::Memory(s)
    }
}

impl From<RedisStore> for Store {
    fn from(s: RedisStore) -> Self {
        Store::Redis(s)
    }
}

impl From<RedisClusterStore> for Store {
    fn from(s: RedisClusterStore) -> Self {
        Store::RedisCluster(s)
    }
}

impl Store {
    /// Decide one key. `now` is `None` to use the store's own clock: Redis'
    /// `TIME`, or the monotonic clock for memory.
    pub(crate) async fn decide_one(
        &self,
        spec: &Spec,
        key: &str,
        now: Option<u64>,
        cost: u64,
        mode: Mode,
    ) -> Result<Reply, StoreError> {
        match self {
            Store::Memory(m) => {
                Ok(m.decide_one(spec, memory::RAW, key, memory_now(now), cost, mode))
            }
            Store::Redis(r) => one(r.decide(&[(key, spec)], now, cost, mode).await?),
            Store::RedisCluster(c) => one(c.decide(&[(key, spec)], now, cost, mode).await?),
        }
    }

    /// Decide several keys all or nothing (in one script call on Redis).
    pub(crate) async fn decide_many(
        &self,
        targets: &[(&str, &Spec)],
        now: Option<u64>,
        cost: u64,
        mode: Mode,
    ) -> Result<Vec<Reply>, StoreError> {
        match self {
            Store::Memory(m) => {
                let raw: Vec<_> = targets.iter().map(|&(k, s)| (memory::RAW, k, s)).collect();
                Ok(m.decide_many(&raw, memory_now(now), cost, mode))
            }
            Store::Redis(r) => r.decide(targets, now, cost, mode).await,
            Store::RedisCluster(c) => c.decide(targets, now, cost, mode).await,
        }
    }
}

impl Store {
    /// Acquire or release a concurrency lease (`lua/concurrency.lua`).
    pub(crate) async fn lease(
        &self,
        key: &str,
        now: Option<u64>,
        op: &str,
        id: &str,
        max: u64,
        lease_ms: u64,
    ) -> Result<[i64; 4], StoreError> {
        match self {
            Store::Memory(m) => Ok(m.lease(key, memory_now(now), op, id, max, lease_ms)),
            Store::Redis(r) => r.lease(key, now, op, id, max, lease_ms).await,
            Store::RedisCluster(c) => c.lease(key, now, op, id, max, lease_ms).await,
        }
    }
}

fn one(mut replies: Vec<Reply>) -> Result<Reply, StoreError> {
    replies
        .pop()
        .ok_or_else(|| StoreError::Protocol("empty reply".into()))
}

pub(crate) fn memory_now(now: Option<u64>) -> u64 {
    now.unwrap_or_else(|| crate::clock::Clock::now_ms(&crate::clock::MonotonicClock))
}

/// A store could not make a decision.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's configuration is invalid (e.g. a malformed Redis URL).
    Config(String),
    /// No connection could be had (Redis down, pool exhausted).
    Unavailable(String),
    /// Redis answered with an error, or the connection broke mid-call.
    Redis(::redis::RedisError),
    /// The call took longer than the configured timeout.
    Timeout,
    /// Redis answered something the script never returns.
    Protocol(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Config(e) => write!(f, "invalid store configuration: {e}"),
            StoreError::Unavailable(e) => write!(f, "no connection to the store: {e}"),
            StoreError::Redis(e) => write!(f, "redis: {e}"),
            StoreError::Timeout => f.write_str("the store did not answer in time"),
            StoreError::Protocol(e) => write!(f, "unexpected answer from the store: {e}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Redis(e) => Some(e),
            _ => None,
        }
    }
}

impl From<::redis::RedisError> for StoreError {
    fn from(e: ::redis::RedisError) -> Self {
        StoreError::Redis(e)
    }
}
