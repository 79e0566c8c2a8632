//! What a [`RedisStore`](super::RedisStore) connects to: one server, over
//! TCP or TLS, or the primary that the sentinels name; and the URLs and
//! certificates that say so.

use super::connect::Connector;
use super::library::load_library;
use super::tls::{tls_provider, warn_if_insecure, warn_insecure, Certificates};
use crate::store::error::Trust;
use crate::store::{StoreError, StoreErrorKind};
use crate::ConfigError;
use redis::aio::MultiplexedConnection;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{AsyncConnectionConfig, Client, Cmd, ConnectionAddr, RedisError, TlsMode, Value};
use std::fmt;
use std::time::Duration;

/// The sentinels' own credentials (not the data nodes').
#[derive(Clone, Default)]
pub(super) struct SentinelAuth {
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
}

/// Makes the connections of a [`RedisStore`](super::RedisStore).
pub(super) enum ServerConnector {
    /// One server at a fixed address.
    Direct {
        client: Client,
        to: String,
        trust: Trust,
    },
    /// The primary the sentinels name, asked again on every connection.
    Sentinel {
        client: tokio::sync::Mutex<SentinelClient>,
        to: String,
        tls: bool,
        trust: Trust,
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
        let trust = if certs.ca.is_some() {
            Trust::Given
        } else {
            Trust::Platform
        };
        Ok(Self::Direct { client, to, trust })
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
            trust: if certs.ca.is_some() {
                Trust::Given
            } else {
                Trust::Platform
            },
        })
    }

    /// What the connections lead to, for messages.
    pub(super) fn to(&self) -> &str {
        match self {
            Self::Direct { to, .. } | Self::Sentinel { to, .. } => to,
        }
    }

    /// `host:port` as the URL names it; `None` for the primary the
    /// sentinels name (it changes).
    pub(super) fn address(&self) -> Option<String> {
        match self {
            Self::Direct { client, .. } => Some(client.get_connection_info().addr().to_string()),
            Self::Sentinel { .. } => None,
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
        let trust = match self {
            Self::Direct { trust, .. } | Self::Sentinel { trust, .. } => *trust,
        };
        result.map_err(|e| StoreError::connect(self.to(), trust, e))
    }

    /// A TLS connection that never finished may have been made to a port
    /// that speaks plain text (a plain Redis waits for the end of a line
    /// the TLS greeting does not send): asked in plain text, it answers.
    async fn no_connection(&self, within: Duration) -> StoreError {
        let unavailable = StoreError::unavailable(format!(
            "no connection to {} within {within:?}: is it running and reachable?",
            self.to()
        ));
        let Self::Direct { client, .. } = self else {
            return unavailable;
        };
        let ConnectionAddr::TcpTls { host, port, .. } = client.get_connection_info().addr() else {
            return unavailable;
        };
        if plain_text_at(host, *port).await {
            StoreError::new(
                StoreErrorKind::Tls,
                format!(
                    "TLS with {} failed: the server answers in plain text on this port, not \
                     TLS; use a redis:// URL for it, or the port the server's `tls-port` names",
                    self.to()
                ),
            )
        } else {
            unavailable
        }
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

/// Whether a Redis at `host:port` answers a `PING` in plain text (within
/// a short bound).
async fn plain_text_at(host: &str, port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        stream.write_all(b"PING\r\n").await.ok()?;
        let mut reply = [0u8; 8];
        let n = stream.read(&mut reply).await.ok()?;
        // `+PONG`, or an error such as `-NOAUTH`: RESP either way.
        Some(n > 0 && matches!(reply[0], b'+' | b'-'))
    };
    tokio::time::timeout(Duration::from_millis(500), ask)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
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
