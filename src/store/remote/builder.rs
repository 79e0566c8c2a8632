//! The builders of the Redis stores, for what a URL cannot say: TLS
//! certificates, the sentinels' own credentials, connection settings.

use super::cluster::RedisClusterStore;
use super::connect::Links;
use super::server::{SentinelAuth, ServerConnector};
use super::tls::Certificates;
use super::{RedisStore, DEFAULT_CONNECTIONS, DEFAULT_CONNECT_TIMEOUT};
use crate::store::error::Trust;
use crate::ConfigError;
use std::num::NonZeroUsize;
use std::time::Duration;

/// Builds a [`RedisStore`]; see [`RedisStore::builder`].
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use floodgate::store::RedisStore;
///
/// // A server whose certificate is signed by a CA of your own (e.g. a
/// // managed service's server CA), asking for a client certificate.
/// let store = RedisStore::builder("rediss://redis.internal:6380")
///     .ca_certificate(std::fs::read("/etc/floodgate/redis-ca.pem")?)
///     .client_certificate(
///         std::fs::read("/etc/floodgate/client.pem")?,
///         std::fs::read("/etc/floodgate/client.key")?,
///     )
///     .build()?;
/// # Ok(()) }
/// ```
#[must_use]
#[derive(Clone)]
pub struct RedisStoreBuilder {
    url: String,
    certs: Certificates,
    sentinel: SentinelAuth,
    connections: NonZeroUsize,
    connect_timeout: Duration,
    max_per_call: NonZeroUsize,
}

impl RedisStoreBuilder {
    pub(super) fn new(url: &str) -> Self {
        Self {
            url: url.to_owned(),
            certs: Certificates::default(),
            sentinel: SentinelAuth::default(),
            connections: NonZeroUsize::new(DEFAULT_CONNECTIONS).unwrap_or(NonZeroUsize::MIN),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_per_call: NonZeroUsize::new(super::joined::DEFAULT_MAX)
                .unwrap_or(NonZeroUsize::MIN),
        }
    }

    /// Trust the CA certificates in `pem` (instead of the platform's trust
    /// store) to verify the server: for a `rediss://` or
    /// `rediss+sentinel://` URL.
    pub fn ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.certs.ca = Some(pem.into());
        self
    }

    /// Show this client certificate (PEM, with its chain) and prove it with
    /// `key_pem` (its private key, PEM) to servers that ask for one (mutual
    /// TLS, e.g. `tls-auth-clients yes`).
    pub fn client_certificate(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.certs.client = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// The sentinels' own user (`requirepass`/ACL of the sentinel
    /// processes), for a `redis+sentinel://` URL.
    pub fn sentinel_username(mut self, username: impl Into<String>) -> Self {
        self.sentinel.username = Some(username.into());
        self
    }

    /// The sentinels' own password, for a `redis+sentinel://` URL (the
    /// password in the URL is the data nodes').
    pub fn sentinel_password(mut self, password: impl Into<String>) -> Self {
        self.sentinel.password = Some(password.into());
        self
    }

    /// Share `n` multiplexed connections (default 2); see
    /// [`RedisStore::connections`].
    pub fn connections(mut self, n: NonZeroUsize) -> Self {
        self.connections = n;
        self
    }

    /// Give up making a connection after `timeout` (default 1 s); see
    /// [`RedisStore::connect_timeout`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// At most `n` decisions in one call to Redis (default 32; 1: one call
    /// per decision, as before). Decisions that wait for Redis at the same
    /// moment go out together, as one call of floodgate's code that decides
    /// each in turn: each request's limits all or nothing, and apart from
    /// the others (one's denial never charges or denies another). A call
    /// never waits to fill: an idle service sends each decision alone.
    /// Under load this spares Redis and the app the cost of a command per
    /// decision (BENCHMARKS.md has the measured gain). Leases of a
    /// concurrency limiter always go alone.
    pub fn max_decisions_per_call(mut self, n: NonZeroUsize) -> Self {
        self.max_per_call = n;
        self
    }

    /// The store. Nothing is connected yet.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `url` when it is not a Redis URL,
    /// `ca_certificate` or `client_certificate` when they are not usable
    /// PEM or the URL does not use TLS, `sentinel_password` when the URL is
    /// not a Sentinel URL.
    pub fn build(self) -> Result<RedisStore, ConfigError> {
        let connector = ServerConnector::from_url(&self.url, &self.certs, &self.sentinel)?;
        let links = Links::new(connector, self.connections.get(), self.connect_timeout);
        Ok(RedisStore::over(links, self.max_per_call.get()))
    }
}

impl std::fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL itself: it may hold a password.
        f.debug_struct("RedisStoreBuilder")
            .field("ca_certificate", &self.certs.ca.is_some())
            .field("client_certificate", &self.certs.client.is_some())
            .field("connections", &self.connections)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_decisions_per_call", &self.max_per_call)
            .finish_non_exhaustive()
    }
}

/// Builds a [`RedisClusterStore`]; see [`RedisClusterStore::builder`].
#[must_use]
#[derive(Clone)]
pub struct RedisClusterStoreBuilder {
    nodes: Vec<String>,
    certs: Certificates,
    max_per_call: NonZeroUsize,
}

impl RedisClusterStoreBuilder {
    pub(super) fn new(nodes: Vec<String>) -> Self {
        Self {
            nodes,
            certs: Certificates::default(),
            max_per_call: NonZeroUsize::new(super::joined::DEFAULT_MAX)
                .unwrap_or(NonZeroUsize::MIN),
        }
    }

    /// Trust the CA certificates in `pem` to verify the nodes (`rediss://`
    /// node URLs).
    pub fn ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.certs.ca = Some(pem.into());
        self
    }

    /// Show this client certificate (and prove it with `key_pem`) to nodes
    /// that ask for one.
    pub fn client_certificate(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.certs.client = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// At most `n` decisions in one call (default 32; 1: one call per
    /// decision); see [`RedisStoreBuilder::max_decisions_per_call`]. On a
    /// cluster a call holds the requests of one hash slot only, so only
    /// decisions on the same client key (a hot key) share calls.
    pub fn max_decisions_per_call(mut self, n: NonZeroUsize) -> Self {
        self.max_per_call = n;
        self
    }

    /// The store. Nothing is connected yet.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `nodes` when one is not a Redis URL (or
    /// there are none), `ca_certificate` or `client_certificate` when they
    /// are not usable PEM or the nodes' URLs do not use TLS.
    pub fn build(self) -> Result<RedisClusterStore, ConfigError> {
        if self.nodes.is_empty() {
            return Err(ConfigError::new("nodes", "at least one node is needed"));
        }
        let mut builder = RedisClusterStore::client_builder(self.nodes.clone());
        if !self.certs.is_empty() {
            if !self.nodes.iter().all(|n| n.starts_with("rediss://")) {
                let field = if self.certs.ca.is_some() {
                    "ca_certificate"
                } else {
                    "client_certificate"
                };
                return Err(ConfigError::new(
                    field,
                    "TLS certificates need rediss:// node URLs",
                ));
            }
            builder = builder.certs(self.certs.to_redis()?);
        }
        let client = builder
            .build()
            .map_err(|e| ConfigError::new("nodes", format!("not Redis URLs: {e}")))?;
        if self.nodes.iter().any(|n| n.contains("#insecure")) {
            super::tls::warn_insecure("the redis cluster");
        }
        let trust = if self.certs.ca.is_some() {
            Trust::Given
        } else {
            Trust::Platform
        };
        Ok(RedisClusterStore::over(
            client,
            trust,
            self.max_per_call.get(),
        ))
    }
}

impl std::fmt::Debug for RedisClusterStoreBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisClusterStoreBuilder")
            .field("nodes", &self.nodes.len())
            .field("ca_certificate", &self.certs.ca.is_some())
            .field("client_certificate", &self.certs.client.is_some())
            .field("max_decisions_per_call", &self.max_per_call)
            .finish()
    }
}
