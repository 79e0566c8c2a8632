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

use crate::algorithm::{Reply, Spec};
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
    /// `now` is `None` to use the store's own clock: Redis' `TIME`, or the
    /// system clock for memory.
    pub(crate) async fn decide(
        &self,
        spec: &Spec,
        key: &str,
        now: Option<u64>,
        cost: u64,
        dry: bool,
    ) -> Result<Reply, StoreError> {
        match self {
            Store::Memory(m) => {
                let now =
                    now.unwrap_or_else(|| crate::clock::Clock::now_ms(&crate::clock::SystemClock));
                m.decide(spec, key, now, cost, dry)
            }
            Store::Redis(r) => r.decide(spec, key, now, cost, dry).await,
            Store::RedisCluster(c) => c.decide(spec, key, now, cost, dry).await,
        }
    }
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
