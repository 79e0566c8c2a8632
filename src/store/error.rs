//! [`StoreError`]: why a store could not decide, in floodgate's words.

use redis::RedisError;
use std::borrow::Cow;
use std::fmt;

/// What kind of failure a [`StoreError`] is: what went wrong, in terms that
/// do not change with the Redis client's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The call took longer than the limiter's timeout.
    Timeout,
    /// No connection could be had: Redis down, refused, unreachable, still
    /// reconnecting, no primary known to the sentinels, or no Tokio runtime.
    Unavailable,
    /// The connection broke during the call (reset, closed, I/O error).
    Connection,
    /// TLS failed: the server's certificate did not verify (unknown issuer,
    /// wrong host, expired), the server wants a client certificate, or the
    /// handshake failed.
    Tls,
    /// The user may not do this: a wrong password or user (`WRONGPASS`,
    /// `NOAUTH`), or an ACL that forbids a command or a key (`NOPERM`).
    Permission,
    /// Redis answered with an error (e.g. `OOM`, `BUSY`, `READONLY`, a
    /// key holding data floodgate did not write).
    Server,
    /// The server cannot run floodgate's code: neither functions (`FCALL`)
    /// nor scripts (`EVALSHA`, `EVAL`) are available.
    Scripting,
    /// A key floodgate uses holds data floodgate did not write (another
    /// type, or a value it cannot read): the message names the key.
    ForeignData,
    /// Redis answered something floodgate's code never returns.
    Protocol,
}

impl StoreErrorKind {
    /// A short name for logs and metric labels: `timeout`, `unavailable`,
    /// `connection`, `tls`, `permission`, `server`, `scripting`,
    /// `foreign_data`, `protocol`.
    pub fn as_str(&self) -> &'static str {
        match self {
            StoreErrorKind::Timeout => "timeout",
            StoreErrorKind::Unavailable => "unavailable",
            StoreErrorKind::Connection => "connection",
            StoreErrorKind::Tls => "tls",
            StoreErrorKind::Permission => "permission",
            StoreErrorKind::Server => "server",
            StoreErrorKind::Scripting => "scripting",
            StoreErrorKind::ForeignData => "foreign_data",
            StoreErrorKind::Protocol => "protocol",
        }
    }
}

impl fmt::Display for StoreErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A store could not make a decision: its [`kind`](Self::kind), a message
/// that says what happened (and where: the server's address when it is
/// known), and the Redis client's error as its
/// [`source`](std::error::Error::source).
///
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: Cow<'static, str>,
    source: Option<RedisError>,
}

impl StoreError {
    /// An error of `kind` that says `message`.
    pub(crate) fn new(kind: StoreErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// No connection could be had, for the reason `message` gives.
    pub(crate) fn unavailable(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StoreErrorKind::Unavailable, message)
    }

    /// The call took longer than the limiter's timeout.
    pub(crate) fn timeout() -> Self {
        Self::new(StoreErrorKind::Timeout, "the store did not answer in time")
    }

    /// The error of a call that reached Redis (or tried to), by what the
    /// client's error says.
    pub(crate) fn from_redis(e: RedisError) -> Self {
        let kind = classify(&e);
        Self {
            kind,
            message: e.to_string().into(),
            source: Some(e),
        }
    }

    /// A failed connection attempt to `what` (e.g. `redis at 10.0.0.1:6379`).
    /// Refused, unreachable and timed out are all
    /// [`Unavailable`](StoreErrorKind::Unavailable); TLS and permission
    /// keep their kinds.
    pub(crate) fn connect(what: &str, e: RedisError) -> Self {
        let kind = match classify(&e) {
            StoreErrorKind::Tls => StoreErrorKind::Tls,
            StoreErrorKind::Permission => StoreErrorKind::Permission,
            _ => StoreErrorKind::Unavailable,
        };
        let message = match kind {
            StoreErrorKind::Tls => format!("TLS with {what} failed: {}", tls_reason(&e)),
            _ => format!("cannot connect to {what}: {e}"),
        };
        Self {
            kind,
            message: message.into(),
            source: Some(e),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether the failure is the connection's own (it broke, or none could
    /// be had): a call that met it may be repeated on a new connection.
    pub(crate) fn is_connection(&self) -> bool {
        self.kind == StoreErrorKind::Connection
    }

    /// The Redis client's error, for the store's own retries.
    pub(crate) fn redis(&self) -> Option<&RedisError> {
        self.source.as_ref()
    }

    /// The same error, with `context` in front of its message.
    pub(crate) fn context(mut self, context: &str) -> Self {
        self.message = format!("{context}: {}", self.message).into();
        self
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            StoreErrorKind::Timeout => return f.write_str(&self.message),
            StoreErrorKind::Unavailable => "no connection to the store",
            StoreErrorKind::Connection => "connection to redis broke",
            StoreErrorKind::Tls => "TLS",
            StoreErrorKind::Permission => "not permitted",
            StoreErrorKind::Server => "redis",
            StoreErrorKind::Scripting => "scripting unavailable",
            StoreErrorKind::ForeignData => "foreign data",
            StoreErrorKind::Protocol => "unexpected answer from the store",
        };
        write!(f, "{what}: {}", self.message)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<RedisError> for StoreError {
    fn from(e: RedisError) -> Self {
        Self::from_redis(e)
    }
}

/// The kind of a Redis client error.
fn classify(e: &RedisError) -> StoreErrorKind {
    // A command the ACL forbids inside floodgate's code is reported by the
    // script: "The user executing the script can't run this command".
    let in_script = e
        .detail()
        .is_some_and(|d| d.contains("user executing the script can't run"));
    if matches!(e.code(), Some("NOPERM" | "NOAUTH" | "WRONGPASS"))
        || e.kind() == redis::ErrorKind::AuthenticationFailed
        || in_script
    {
        StoreErrorKind::Permission
    } else if tls_error(e).is_some() || says_tls(e) {
        StoreErrorKind::Tls
    } else if e.is_timeout() {
        StoreErrorKind::Timeout
    } else if e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error() {
        StoreErrorKind::Connection
    } else {
        StoreErrorKind::Server
    }
}

/// The TLS error somewhere in `e`'s sources.
fn tls_error(e: &RedisError) -> Option<&rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = next {
        if let Some(tls) = tls_in(err) {
            return Some(tls);
        }
        next = err.source();
    }
    None
}

/// `err` itself as a TLS error: directly, inside an I/O error (as tokio's
/// TLS streams wrap it), or behind the `Arc` redis-rs keeps its causes in
/// (whose `source()` would skip it).
fn tls_in<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = err.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    if let Some(io) = err.downcast_ref::<std::io::Error>() {
        return io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    }
    if let Some(shared) = err.downcast_ref::<std::sync::Arc<dyn std::error::Error + Send + Sync>>()
    {
        return tls_in(&**shared);
    }
    None
}

/// What rustls says when TLS fails, as far as a message that lost its
/// source (redis-rs's cluster client joins its nodes' errors into one)
/// still says it.
fn says_tls(e: &RedisError) -> bool {
    let text = e.to_string();
    [
        "invalid peer certificate",
        "received fatal alert",
        "peer sent no certificates",
        "TLS",
    ]
    .iter()
    .any(|m| text.contains(m))
}

/// Why TLS failed, in words.
fn tls_reason(e: &RedisError) -> String {
    use rustls::{AlertDescription, CertificateError, Error};
    match tls_error(e) {
        Some(Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            "the server's certificate is not signed by a trusted CA (unknown issuer): \
             give the CA with `ca_certificate`, or install it in the platform's trust store \
             (SSL_CERT_FILE, SSL_CERT_DIR)"
                .into()
        }
        Some(Error::InvalidCertificate(CertificateError::NotValidForName)) => {
            "the server's certificate is not valid for this host name".into()
        }
        Some(Error::AlertReceived(AlertDescription::CertificateRequired)) => {
            "the server requires a client certificate: give one with `client_certificate`".into()
        }
        Some(other) => other.to_string(),
        None => e.to_string(),
    }
}
