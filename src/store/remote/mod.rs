//! The shared stores: Redis ([`RedisStore`]) and Redis Cluster
//! ([`RedisClusterStore`]). Both run floodgate's code the same way
//! (`invoke.rs`, over the `Transport` of `connection.rs` or `cluster.rs`),
//! one atomic call per decision.

mod builder;
mod cluster;
mod connect;
mod foreign;
mod invoke;
mod joined;
mod library;
#[cfg(feature = "deadpool")]
mod pool;
mod probe;
mod redirect;
mod server;
mod split;
mod tls;

pub use self::builder::{RedisClusterStoreBuilder, RedisStoreBuilder};
pub use self::cluster::RedisClusterStore;
pub use self::probe::{NodeReport, ProbeReport};

use self::connect::Links;
use self::invoke::{Remote, Transport};
use self::joined::Joiner;
use self::server::ServerConnector;
use crate::store::error::Trust;
use crate::store::{Store, StoreError};
use crate::ConfigError;
use redis::{Cmd, Value};
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
/// Where it connects: one server over TCP (`redis://`) or TLS
/// (`rediss://`), or the primary that Redis Sentinel names
/// (`redis+sentinel://`); see [`from_url`](Self::from_url) and, for
/// certificates, [`builder`](Self::builder). Or over connections you
/// already have: [`from_client`](Self::from_client), and with the
/// `deadpool` feature `from_pool`. Call [`probe`](Self::probe) at start-up:
/// it says what the store found, and fails when it cannot work there.
///
/// Calls share a few multiplexed connections ([`connections`](Self::connections),
/// default 2) round-robin; each pipelines concurrent calls, so no call waits
/// for a connection of its own. Connections are made lazily, in the
/// background, each within [`connect_timeout`](Self::connect_timeout). A
/// connection that breaks (reset, closed, killed by `CLIENT KILL`) is dropped
/// and replaced, and the call that found it broken is repeated once on the
/// new one (if Redis had run it before the connection broke, the request is
/// charged twice: strict, never loose); a connection that answers
/// `READONLY` (its server was demoted by a failover) is replaced the same
/// way, after asking the sentinels again where the primary is. A call that
/// finds Redis unreachable fails at once for the next 100 ms instead of
/// trying again. How long a decision may wait, and what happens when it
/// cannot be made, is the limiter's business: see [`crate::failure`].
///
/// Cheap to clone: clones share the connections.
///
/// Needs a Tokio runtime, with its time driver (`#[tokio::main]` has both):
/// connections are made on Tokio tasks and calls are timed by Tokio. Called
/// outside one, it does not panic: each decision fails with an error of
/// kind [`Unavailable`](crate::store::StoreErrorKind::Unavailable),
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
    remote: Remote<ServerTransport>,
}

impl RedisStore {
    /// A store over connections to `url`:
    ///
    /// * `redis://[user:password@]host:port[/db]`: one server over TCP;
    /// * `rediss://[user:password@]host:port[/db]`: over TLS, the server's
    ///   certificate verified against the platform's trust store (which
    ///   honours `SSL_CERT_FILE` and `SSL_CERT_DIR`); for a CA of your own
    ///   or a client certificate, see [`builder`](Self::builder). A
    ///   `#insecure` fragment skips verification (tests only: a warning is
    ///   logged once). TLS is rustls with its `aws-lc-rs` cryptography, which
    ///   floodgate installs as the process's rustls provider unless the app
    ///   installed one first;
    /// * `redis+sentinel://[user:password@]host:port[,host:port...]/service_name[/db]`:
    ///   the primary that these sentinels name for `service_name`, asked
    ///   again whenever a connection breaks or answers `READONLY`; user and
    ///   password are the data nodes' (the sentinels' own are set with
    ///   [`RedisStoreBuilder::sentinel_password`]); `rediss+sentinel://`
    ///   speaks TLS to sentinels and nodes;
    /// * `unix:///path/to/redis.sock`.
    ///
    /// Connections are made lazily: this fails only on a malformed URL (an
    /// error naming `url`), not when Redis is down. Call
    /// [`probe`](Self::probe) to find out at start-up.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `url` when it is not one of the above.
    pub fn from_url(url: &str) -> Result<Self, ConfigError> {
        Self::builder(url).build()
    }

    /// A builder for a store over `url` (the forms of
    /// [`from_url`](Self::from_url)), for what a URL cannot say: a CA and a
    /// client certificate for TLS, the sentinels' own password.
    pub fn builder(url: &str) -> RedisStoreBuilder {
        RedisStoreBuilder::new(url)
    }

    /// A store over connections made by a client you configured yourself
    /// (redis-rs's, re-exported as [`floodgate::store::redis`](crate::store::redis)),
    /// e.g. one built with `redis::Client::build_with_tls`. floodgate makes
    /// its own multiplexed connections with it, as for
    /// [`from_url`](Self::from_url).
    pub fn from_client(client: redis::Client) -> Self {
        tls::tls_provider();
        let to = format!("redis at {}", client.get_connection_info().addr());
        let connector = ServerConnector::Direct {
            client,
            to,
            trust: Trust::AppClient,
        };
        let links = Links::new(connector, DEFAULT_CONNECTIONS, DEFAULT_CONNECT_TIMEOUT);
        Self::over(links, joined::DEFAULT_MAX)
    }

    /// A store over a deadpool-redis pool the app already has (feature
    /// `deadpool`): each call checks a connection out, sends, and gives it
    /// back. For plans that cap connections per database, where floodgate's
    /// own connections would count against the cap; otherwise the built-in
    /// multiplexed connections ([`from_url`](Self::from_url)) cost less per
    /// decision (BENCHMARKS.md has the ratio). A connection that breaks is
    /// the pool's to replace; a broken call is not repeated. A concurrency
    /// lease whose acquire the limiter gave up on may hold its slot until
    /// the lease expires (on floodgate's own connections it is released).
    #[cfg(feature = "deadpool")]
    pub fn from_pool(pool: deadpool_redis::Pool) -> Self {
        tls::tls_provider();
        Self {
            remote: Remote::new(
                ServerTransport::Pool(pool::PoolTransport::new(pool)),
                Joiner::new(joined::DEFAULT_MAX, false),
            ),
        }
    }

    fn over(links: Links<ServerConnector>, max_per_call: usize) -> Self {
        Self {
            remote: Remote::new(
                ServerTransport::Links(links),
                Joiner::new(max_per_call, false),
            ),
        }
    }

    /// Share `n` multiplexed connections (default 2). One connection already
    /// pipelines any number of concurrent calls; a second spreads the
    /// client-side work over two driver tasks. More rarely help: Redis runs
    /// scripts on one thread. No effect on a store over a pool.
    #[must_use]
    pub fn connections(self, n: NonZeroUsize) -> Self {
        match self.remote.transport() {
            ServerTransport::Links(c) => Self::over(
                c.with(n.get(), c.connect_timeout()),
                self.remote.max_per_call(),
            ),
            #[cfg(feature = "deadpool")]
            ServerTransport::Pool(_) => self,
        }
    }

    /// Give up making a connection after `timeout` (default 1 s). Callers
    /// never wait longer than their own timeout for it: the connection is
    /// made in the background. No effect on a store over a pool.
    #[must_use]
    pub fn connect_timeout(self, timeout: Duration) -> Self {
        match self.remote.transport() {
            ServerTransport::Links(c) => {
                Self::over(c.with(c.count(), timeout), self.remote.max_per_call())
            }
            #[cfg(feature = "deadpool")]
            ServerTransport::Pool(_) => self,
        }
    }
}

impl RedisStore {
    /// Connect now, and say what is there: the server and its version,
    /// its role, TLS, its `maxmemory` and eviction policy (with a warning
    /// when it may evict floodgate's keys), and whether decisions run as
    /// functions or scripts. It runs floodgate's code once, as a decision
    /// does, on a key under the default prefix `floodgate` (use
    /// [`probe_prefix`](Self::probe_prefix) for a limiter with another
    /// prefix): that key expires within 2 s.
    ///
    /// Call it at start-up: with the default fail-open policy, a store that
    /// cannot decide admits every request, and this is where you find out.
    ///
    /// # Errors
    /// The [`StoreError`] that every decision would meet: no connection
    /// ([`Unavailable`](crate::store::StoreErrorKind::Unavailable)), a
    /// certificate that does not verify ([`Tls`](crate::store::StoreErrorKind::Tls)),
    /// a wrong password or an ACL that lacks a command or the key pattern
    /// ([`Permission`](crate::store::StoreErrorKind::Permission), naming
    /// what is missing), no scripting ([`Scripting`](crate::store::StoreErrorKind::Scripting)),
    /// or no answer within 5 s ([`Timeout`](crate::store::StoreErrorKind::Timeout)).
    pub async fn probe(&self) -> Result<ProbeReport, StoreError> {
        self.probe_prefix(crate::store::key::DEFAULT_PREFIX).await
    }

    /// [`probe`](Self::probe), for limiters built with
    /// [`prefix(prefix)`](crate::LimiterBuilder::prefix).
    ///
    /// # Errors
    /// As [`probe`](Self::probe).
    pub async fn probe_prefix(&self, prefix: &str) -> Result<ProbeReport, StoreError> {
        let probe = async {
            let transport = self.remote.transport();
            let (address, tls) = match transport {
                ServerTransport::Links(l) => (l.connector().address(), l.connector().tls()),
                #[cfg(feature = "deadpool")]
                ServerTransport::Pool(_) => (None, false),
            };
            let hello = transport.send(&redis::cmd("HELLO"), false).await;
            // The connection failed: nothing more to learn.
            if let Err(e) = &hello {
                if e.kind() != crate::store::StoreErrorKind::Server
                    && e.kind() != crate::store::StoreErrorKind::Permission
                {
                    return Err(e.clone());
                }
            }
            // All default sections: Redis 6 takes at most one section name.
            let info = transport.send(&redis::cmd("INFO"), false).await;
            let address = if let Some(a) = address {
                a
            } else {
                let mut client_info = redis::cmd("CLIENT");
                client_info.arg("INFO");
                let reply = transport.send(&client_info, false).await;
                let reached = reply.ok().as_ref().and_then(probe::local_address);
                reached.unwrap_or_else(|| "unknown".to_owned())
            };
            let mut warnings = Vec::new();
            let node = probe::node(
                address,
                tls,
                true,
                hello.as_ref().ok(),
                info.as_ref().ok(),
                &mut warnings,
            );
            probe::decide_once(&self.remote, prefix, vec![node], warnings).await
        };
        let within = probe::PROBE_TIMEOUT;
        tokio::time::timeout(within, probe)
            .await
            .unwrap_or_else(|_| {
                let place = self.remote.transport().place();
                Err(StoreError::timeout(&place, "the probe", within))
            })
    }
}

/// How a [`RedisStore`] reaches its server: its own shared connections, or
/// the app's pool.
#[derive(Debug)]
enum ServerTransport {
    Links(Links<ServerConnector>),
    #[cfg(feature = "deadpool")]
    Pool(pool::PoolTransport),
}

impl Transport for ServerTransport {
    async fn send(&self, cmd: &Cmd, ordered: bool) -> Result<Value, StoreError> {
        match self {
            ServerTransport::Links(links) => links.send(cmd, ordered).await,
            #[cfg(feature = "deadpool")]
            ServerTransport::Pool(pool) => pool.send(cmd, ordered).await,
        }
    }

    async fn load(&self, key: Option<&[u8]>) -> Result<(), StoreError> {
        match self {
            ServerTransport::Links(links) => links.load(key).await,
            #[cfg(feature = "deadpool")]
            ServerTransport::Pool(pool) => pool.load(key).await,
        }
    }

    fn place(&self) -> String {
        match self {
            ServerTransport::Links(links) => links.place(),
            #[cfg(feature = "deadpool")]
            ServerTransport::Pool(_) => "redis through the app's pool".to_owned(),
        }
    }
}

impl From<RedisStore> for Store {
    fn from(s: RedisStore) -> Self {
        Store::new(Arc::new(s.remote))
    }
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RedisStore").field(&self.remote).finish()
    }
}

#[cfg(test)]
mod tests;
