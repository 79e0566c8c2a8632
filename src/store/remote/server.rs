//! What a [`RedisStore`](super::RedisStore) connects to: one server, over
//! TCP or TLS, or the primary that the sentinels name; and the URLs and
//! certificates that say so.

use super::connect::Connector;
use super::library::load_library;
use super::tls::{tls_provider, warn_if_insecure, warn_insecure, Certificates};
use crate::store::StoreError;
use crate::ConfigError;
use redis::aio::MultiplexedConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{AsyncConnectionConfig, Client, Cmd, ConnectionAddr, RedisError, TlsMode, Value};
use std::fmt;

/// The sentinels' own credentials (not the data nodes').
#[derive(Clone, Default)]
pub(super) struct SentinelAuth {
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
}

/// Makes the connections of a [`RedisStore`](super::RedisStore).
pub(super) enum ServerConnector {
    /// One server at a fixed address.
    Direct { client: Client, to: String },
    /// The primary the sentinels name, asked again on every connection.
    Sentinel {
        client: tokio::sync::Mutex<SentinelClient>,
        to: String,
        tls: bool,
    },
}

impl ServerConnector {
    /// The connector for `url` (see [`RedisStore::from_url`](super::RedisStore::from_url)).
    pub(super) fn from_url(
        url: &str,
        certs: &Certificates,
        sentinel: &SentinelAuth,
    ) -> Result<Self, ConfigError> {
        tls_provider();
        if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            return Self::sentinel(rest, false, certs, sentinel);
        }
        if let Some(rest) = url.strip_prefix("rediss+sentinel://") {
            return Self::sentinel(rest, true, certs, sentinel);
        }
        if sentinel.username.is_some() || sentinel.password.is_some() {
            return Err(ConfigError::new(
                "sentinel_password",
                "set, but the URL is not a redis+sentinel:// URL",
            ));
        }
        let client = Client::open(url).map_err(|e| {
            ConfigError::new(
                "url",
                format!(
                    "not a Redis URL (redis://, rediss://, redis+sentinel://, \
                     rediss+sentinel://, unix://): {e}"
                ),
            )
        })?;
        let tls = matches!(
            client.get_connection_info().addr(),
            ConnectionAddr::TcpTls { .. }
        );
        let client = if certs.is_empty() {
            client
        } else if !tls {
            return Err(ConfigError::new(
                if certs.ca.is_some() {
                    "ca_certificate"
                } else {
                    "client_certificate"
                },
                "TLS certificates need a rediss:// URL",
            ));
        } else {
            Client::build_with_tls(url, certs.to_redis()?)
                .map_err(|e| ConfigError::new("url", format!("cannot use TLS: {e}")))?
        };
        warn_if_insecure(client.get_connection_info().addr());
        let to = format!("redis at {}", client.get_connection_info().addr());
        Ok(Self::Direct { client, to })
    }

    /// The connector of a Sentinel URL (`tls`: `rediss+sentinel://`).
    fn sentinel(
        rest: &str,
        tls: bool,
        certs: &Certificates,
        auth: &SentinelAuth,
    ) -> Result<Self, ConfigError> {
        let url = SentinelUrl::parse(rest)?;
        let sentinels: Vec<ConnectionAddr> = url
            .sentinels
            .iter()
            .map(|(host, port)| {
                if tls {
                    ConnectionAddr::TcpTls {
                        host: host.clone(),
                        port: *port,
                        insecure: url.insecure,
                        tls_params: None,
                    }
                } else {
                    ConnectionAddr::Tcp(host.clone(), *port)
                }
            })
            .collect();
        let to = format!(
            "the primary of `{}` (sentinels {})",
            url.service,
            url.sentinels
                .iter()
                .map(|(h, p)| format!("{h}:{p}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let invalid = |e: RedisError| ConfigError::new("url", format!("not a Sentinel URL: {e}"));
        let mut b = SentinelClientBuilder::new(sentinels, &url.service, SentinelServerType::Master)
            .map_err(invalid)?;
        if let Some(db) = url.db {
            b = b.set_client_to_redis_db(db);
        }
        if let Some(user) = url.username.filter(|u| !u.is_empty()) {
            b = b.set_client_to_redis_username(user);
        }
        if let Some(p) = url.password {
            b = b.set_client_to_redis_password(p);
        }
        if let Some(user) = &auth.username {
            b = b.set_client_to_sentinel_username(user);
        }
        if let Some(p) = &auth.password {
            b = b.set_client_to_sentinel_password(p);
        }
        if tls {
            let mode = if url.insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            };
            b = b
                .set_client_to_redis_tls_mode(mode)
                .set_client_to_sentinel_tls_mode(mode);
            if !certs.is_empty() {
                let c = certs.to_redis()?;
                b = b
                    .set_client_to_redis_certificates(c.clone())
                    .set_client_to_sentinel_certificates(c);
            }
            if url.insecure {
                warn_insecure(&to);
            }
        } else if !certs.is_empty() {
            return Err(ConfigError::new(
                certs.field(),
                "TLS certificates need a rediss+sentinel:// URL",
            ));
        }
        let client = b.build().map_err(invalid)?;
        Ok(Self::Sentinel {
            client: tokio::sync::Mutex::new(client),
            to,
            tls,
        })
    }

    /// What the connections lead to, for messages.
    pub(super) fn to(&self) -> &str {
        match self {
            Self::Direct { to, .. } | Self::Sentinel { to, .. } => to,
        }
    }

    /// Whether the connections use TLS.
    pub(super) fn tls(&self) -> bool {
        match self {
            Self::Direct { client, .. } => {
                matches!(
                    client.get_connection_info().addr(),
                    ConnectionAddr::TcpTls { .. }
                )
            }
            Self::Sentinel { tls, .. } => *tls,
        }
    }
}

/// A connection with no response timeout of redis-rs' own: every call is
/// bounded by its limiter's timeout, and a stalled connection is replaced.
fn config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_response_timeout(None)
        .set_connection_timeout(None)
}

impl Connector for ServerConnector {
    type Conn = MultiplexedConnection;

    async fn connect(&self) -> Result<MultiplexedConnection, StoreError> {
        let result = match self {
            Self::Direct { client, .. } => {
                client
                    .get_multiplexed_async_connection_with_config(&config())
                    .await
            }
            Self::Sentinel { client, .. } => {
                let mut client = client.lock().await;
                client.get_async_connection_with_config(&config()).await
            }
        };
        result.map_err(|e| StoreError::connect(self.to(), e))
    }

    async fn send(conn: &mut MultiplexedConnection, cmd: &Cmd) -> Result<Value, RedisError> {
        conn.send_packed_command(cmd).await
    }

    async fn load(
        conn: &mut MultiplexedConnection,
        _key: Option<&[u8]>,
    ) -> Result<Value, RedisError> {
        conn.send_packed_command(&load_library())
            .await
            .and_then(Value::extract_error)
    }
}

impl fmt::Debug for ServerConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.to())
    }
}

/// `redis+sentinel://[user:password@]host:port[,host:port...]/service[/db][#insecure]`,
/// after its scheme.
struct SentinelUrl {
    sentinels: Vec<(String, u16)>,
    service: String,
    db: Option<i64>,
    username: Option<String>,
    password: Option<String>,
    insecure: bool,
}

impl SentinelUrl {
    fn parse(rest: &str) -> Result<Self, ConfigError> {
        let bad = |why: &str| {
            ConfigError::new(
                "url",
                format!(
                    "not a Sentinel URL ({why}): expected \
                     redis+sentinel://[user:password@]host:port[,host:port...]/service_name[/db]"
                ),
            )
        };
        let (rest, insecure) = match rest.strip_suffix("#insecure") {
            Some(r) => (r, true),
            None => (rest, false),
        };
        let (authority, path) = rest.split_once('/').ok_or_else(|| bad("no service name"))?;
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let mut sentinels = Vec::new();
        for host in hosts.split(',') {
            let (name, port) = host
                .rsplit_once(':')
                .ok_or_else(|| bad("a sentinel without :port"))?;
            let port: u16 = port
                .parse()
                .map_err(|_| bad("a port that is not a number"))?;
            let name = name.trim_start_matches('[').trim_end_matches(']');
            if name.is_empty() {
                return Err(bad("a sentinel without a host"));
            }
            sentinels.push((name.to_owned(), port));
        }
        let mut parts = path.splitn(2, '/');
        let service = parts
            .next()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("no service name"))?;
        let db = match parts.next().filter(|s| !s.is_empty()) {
            Some(db) => Some(
                db.parse()
                    .map_err(|_| bad("a database that is not a number"))?,
            ),
            None => None,
        };
        let (username, password) = match userinfo.map(|u| u.split_once(':')) {
            Some(Some((u, p))) => (Some(decode(u)), Some(decode(p))),
            Some(None) => (userinfo.map(decode), None),
            None => (None, None),
        };
        Ok(Self {
            sentinels,
            service: service.to_owned(),
            db,
            username,
            password,
            insecure,
        })
    }
}

/// `%xx` escapes of a URL's user or password.
fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}
