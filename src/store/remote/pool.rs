//! A [`RedisStore`](super::RedisStore) over the app's own deadpool-redis
//! pool (feature `deadpool`): one checkout per call.

use super::library::load_library;
use crate::store::error::Trust;
use crate::store::StoreError;
use deadpool_redis::{Pool, PoolError};
use redis::{Cmd, Value};
use std::fmt;

/// Calls on connections checked out of a pool the app already has.
pub(super) struct PoolTransport {
    pool: Pool,
}

impl PoolTransport {
    pub(super) fn new(pool: Pool) -> Self {
        Self { pool }
    }

    /// A connection from the pool: one the pool holds, or a new one. A
    /// pool's own errors are in floodgate's words.
    async fn checkout(&self) -> Result<deadpool_redis::Connection, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => {
                StoreError::connect("redis through the app's pool", Trust::AppClient, e)
            }
            PoolError::Timeout(_) => {
                StoreError::unavailable("no connection free in the pool within its wait timeout")
            }
            other => StoreError::unavailable(format!("pool: {other}")),
        })
    }

    /// `cmd` on a checked-out connection. The pool promises no connection
    /// in particular, so `ordered` cannot be kept: the release that undoes a
    /// lease acquire given up on (the limiter's timeout) may reach Redis
    /// before that acquire, which then holds its slot until the lease
    /// expires (its TTL), as a crashed app server's would. On floodgate's
    /// own connections the release follows the acquire on one connection.
    pub(super) async fn send(&self, cmd: &Cmd, _ordered: bool) -> Result<Value, StoreError> {
        let mut conn = self.checkout().await?;
        let v = conn
            .send_packed_command(cmd)
            .await
            .and_then(super::library::top_error)?;
        Ok(v)
    }

    pub(super) async fn load(&self, _key: Option<&[u8]>) -> Result<(), StoreError> {
        self.send(&load_library(), false).await.map(drop)
    }
}

impl fmt::Debug for PoolTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.pool.status();
        f.debug_struct("Pool")
            .field("size", &status.size)
            .field("available", &status.available)
            .field("max_size", &status.max_size)
            .finish()
    }
}
