//! The shared stores: Redis ([`RedisStore`]) and Redis Cluster
//! ([`RedisClusterStore`]). Both run floodgate's code the same way
//! (`invoke.rs`, over the `Transport` of `connection.rs` or `cluster.rs`),
//! one atomic call per decision.

mod cluster;
mod connection;
mod invoke;
mod library;
mod redirect;

pub use self::cluster::RedisClusterStore;

use self::connection::Connections;
use self::invoke::Remote;
use crate::store::Store;
use crate::ConfigError;
use std::fmt;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

/// Default number of multiplexed connections a [`RedisStore`] shares.
const DEFAULT_CONNECTIONS: usize = 2;

/// Why a connection could not be made: the Redis stores make theirs on
/// Tokio tasks.
const NO_RUNTIME: &str =
    "no Tokio runtime: the Redis stores make their connections on Tokio tasks, call them from within a Tokio runtime";

/// Default bound on making one connection.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Keeps rate-limit state in Redis, so every app server behind a load
/// balancer sees the same counters.
///
/// Each decision is one `FCALL` of floodgate's Redis Function library: read,
/// decide and write happen atomically on Redis' command thread, so no
/// number of concurrent app servers can overshoot a limit. When Redis does
/// not have the function (a fresh server, `FUNCTION FLUSH`, a new floodgate
/// version), that call runs as `EVAL` of the same code while the library is
/// loaded in the background: transparently, in one round trip. Where
/// functions cannot be used (Redis before 7.0, or an ACL that forbids them)
/// decisions are `EVALSHA` of the same code as a script, and `EVAL` on
/// `NOSCRIPT`.
///
/// Calls share a few multiplexed connections ([`connections`](Self::connections),
/// default 2) round-robin; each pipelines concurrent calls, so no call waits
/// for a connection of its own. Connections are made lazily, in the
/// background, each within [`connect_timeout`](Self::connect_timeout). A
/// connection that breaks (reset, closed, killed by `CLIENT KILL`) is dropped
/// and replaced, and the call that found it broken is repeated once on the
/// new one (if Redis had run it before the connection broke, the request is
/// charged twice: strict, never loose); a call that finds Redis unreachable
/// fails at once for the next 100 ms instead of trying again. How long a
/// decision may wait, and what happens when it cannot be made, is the
/// limiter's business: see [`crate::failure`].
///
/// Cheap to clone: clones share the connections.
///
/// Needs a Tokio runtime, with its time driver (`#[tokio::main]` has both):
/// connections are made on Tokio tasks and calls are timed by Tokio. Called
/// outside one, it does not panic: each decision fails with
/// [`StoreError::Unavailable`](crate::store::StoreError::Unavailable),
/// "no Tokio runtime", and the failure policy answers.
///
/// ```no_run
/// # fn main() -> Result<(), floodgate::ConfigError> {
/// use floodgate::store::RedisStore;
/// use std::num::NonZeroUsize;
/// use std::time::Duration;
/// let store = RedisStore::from_url("redis://127.0.0.1:6379")?
///     .connections(NonZeroUsize::new(4).unwrap())
///     .connect_timeout(Duration::from_millis(500));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    remote: Remote<Connections>,
}

impl RedisStore {
    /// A store over connections to `url`
    /// (`redis://[user:password@]host:port[/db]`; TLS is not built in yet,
    /// so `rediss://` is refused). Connections are made lazily: this
    /// fails only on a malformed URL (an error naming `url`), not when Redis
    /// is down.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `url` when it is not a Redis URL.
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        let client = redis::Client::open(url)
            .map_err(|e| ConfigError::new("url", format!("not a Redis URL: {e}")))?;
        Ok(Self::with(Connections::new(
            client,
            DEFAULT_CONNECTIONS,
            DEFAULT_CONNECT_TIMEOUT,
        )))
    }

    fn with(connections: Connections) -> Self {
        Self {
            remote: Remote::new(connections),
        }
    }

    /// Share `n` multiplexed connections (default 2). One connection already
    /// pipelines any number of concurrent calls; a second spreads the
    /// client-side work over two driver tasks. More rarely help: Redis runs
    /// scripts on one thread.
    #[must_use]
    pub fn connections(self, n: NonZeroUsize) -> Self {
        let c = self.remote.transport();
        Self::with(c.with(n.get(), c.connect_timeout()))
    }

    /// Give up making a connection after `timeout` (default 1 s). Callers
    /// never wait longer than their own timeout for it: the connection is
    /// made in the background.
    #[must_use]
    pub fn connect_timeout(self, timeout: Duration) -> Self {
        let c = self.remote.transport();
        Self::with(c.with(c.count(), timeout))
    }
}

impl From<RedisStore> for Store {
    fn from(s: RedisStore) -> Self {
        Store::new(Arc::new(s.remote))
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.remote.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::invoke::Transport;
    use super::*;
    use crate::store::StoreError;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// The first poll of `f`, outside any Tokio runtime.
    fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
        pin!(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    /// Outside a Tokio runtime, a store that would make a connection
    /// fails naming what is missing, instead of panicking in `tokio::spawn`.
    #[test]
    fn outside_a_runtime_no_connection_is_made() {
        let cmd = redis::cmd("PING");
        let store = RedisStore::from_url("redis://127.0.0.1:1").unwrap();
        let cluster = RedisClusterStore::from_nodes(["redis://127.0.0.1:1"]).unwrap();
        for sent in [
            poll_once(store.remote.transport().send(&cmd, false)),
            poll_once(cluster.remote.transport().send(&cmd, false)),
        ] {
            match sent {
                Poll::Ready(Err(StoreError::Unavailable(why))) => {
                    assert!(why.starts_with("no Tokio runtime"), "{why}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    /// Outside a Tokio runtime, a limiter over Redis decides by its failure
    /// policy: an error naming the missing runtime, or failing open.
    #[test]
    fn outside_a_runtime_the_failure_policy_decides() {
        use crate::algorithm::Gcra;
        use crate::failure::FailurePolicy;
        use crate::Limiter;
        let store = RedisStore::from_url("redis://127.0.0.1:1").unwrap();
        let gcra = Gcra::new(1, Duration::from_secs(1));
        let strict = Limiter::builder(store.clone(), gcra)
            .on_store_failure(FailurePolicy::ReturnError)
            .build()
            .unwrap();
        match poll_once(strict.check("k", 1)) {
            Poll::Ready(Err(e)) => assert!(e.to_string().contains("no Tokio runtime"), "{e}"),
            other => panic!("{other:?}"),
        }
        let open = Limiter::new(store, gcra);
        assert!(matches!(poll_once(open.check("k", 1)), Poll::Ready(Ok(_))));
    }

    #[test]
    fn malformed_urls_name_the_field() {
        assert_eq!(RedisStore::from_url("nope://x").unwrap_err().field(), "url");
        assert!(RedisStore::from_url("redis://127.0.0.1:1").is_ok());
        let cluster = RedisClusterStore::from_url("nope://x").unwrap_err();
        assert_eq!(cluster.field(), "nodes");
        assert!(RedisClusterStore::from_nodes(["redis://127.0.0.1:1"]).is_ok());
    }
}
