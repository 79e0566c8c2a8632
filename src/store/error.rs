//! [`StoreError`]: why a store could not decide, in floodgate's words.

use redis::RedisError;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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

/// A store could not make a decision: its [`kind`](Self::kind), and a
/// message that says what happened, where (the server's address when it is
/// known) and, where floodgate can tell, what to change. The message
/// includes the Redis client's own words; for a TLS failure that floodgate
/// words itself, rustls's error is the [`source`](std::error::Error::source)
/// instead, so that a printed cause chain says each thing once.
///
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct StoreError {
    kind: StoreErrorKind,
    message: Cow<'static, str>,
    /// Behind one pointer: an error travels in every decision's `Result`,
    /// which stays as small as the decision.
    causes: Option<Arc<Causes>>,
}

/// What a [`StoreError`] was made from.
#[derive(Debug)]
struct Causes {
    /// The client's error, for the store's own retries (its text is in the
    /// message).
    redis: RedisError,
    /// The TLS error the message words without quoting it: the source.
    tls: Option<rustls::Error>,
}

/// Whose certificates a TLS connection trusted: what a TLS error advises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trust {
    /// The platform's trust store (no `ca_certificate` given).
    Platform,
    /// The CA given with `ca_certificate`.
    Given,
    /// Whatever the app's own client or pool was configured with.
    AppClient,
}

impl StoreError {
    /// An error of `kind` that says `message`.
    pub(crate) fn new(kind: StoreErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            message: message.into(),
            causes: None,
        }
    }

    /// No connection could be had, for the reason `message` gives.
    pub(crate) fn unavailable(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StoreErrorKind::Unavailable, message)
    }

    /// `place` (`redis at host:port`) did not answer `doing` (`a check of
    /// key "user:42" for limiter "api"`) within `within`.
    pub(crate) fn timeout(place: &str, doing: &str, within: Duration) -> Self {
        Self::new(
            StoreErrorKind::Timeout,
            format!(
                "{place} did not answer {doing} within {within:?}: it is overloaded, \
                 paused or unreachable; if this is its usual latency, raise the \
                 limiter's `timeout`"
            ),
        )
    }

    /// The error of a call that reached Redis (or tried to), by what the
    /// client's error says.
    pub(crate) fn from_redis(e: RedisError) -> Self {
        let kind = classify(&e);
        Self {
            kind,
            message: e.to_string().into(),
            causes: Some(Arc::new(Causes {
                redis: e,
                tls: None,
            })),
        }
    }

    /// A failed connection attempt to `what` (e.g. `redis at 10.0.0.1:6379`),
    /// which trusted `trust`'s certificates if it used TLS. Refused,
    /// unreachable and timed out are all
    /// [`Unavailable`](StoreErrorKind::Unavailable); TLS and permission
    /// keep their kinds.
    pub(crate) fn connect(what: &str, trust: Trust, e: RedisError) -> Self {
        let kind = match classify(&e) {
            StoreErrorKind::Tls => StoreErrorKind::Tls,
            StoreErrorKind::Permission => StoreErrorKind::Permission,
            _ => StoreErrorKind::Unavailable,
        };
        let (message, tls) = match kind {
            StoreErrorKind::Tls => match tls_advice(&e, trust) {
                Some((words, cause)) => (format!("TLS with {what} failed: {words}"), Some(cause)),
                None => (format!("TLS with {what} failed: {e}"), None),
            },
            _ => (format!("cannot connect to {what}: {e}"), None),
        };
        Self {
            kind,
            message: message.into(),
            causes: Some(Arc::new(Causes { redis: e, tls })),
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
        self.causes.as_ref().map(|c| &c.redis)
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
        self.causes
            .as_ref()
            .and_then(|c| c.tls.as_ref())
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

/// Why TLS failed, in words, with what to change given `trust`, and the
/// rustls error the words stand for; `None` when floodgate has no words
/// for it (the message then quotes the client's error).
fn tls_advice(e: &RedisError, trust: Trust) -> Option<(String, rustls::Error)> {
    use rustls::{AlertDescription, CertificateError, Error};
    let cause = tls_error(e)?;
    let words = match cause {
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            let what =
                "the server's certificate is not signed by a CA this client trusts (unknown issuer)";
            match trust {
                Trust::Platform => format!(
                    "{what} (none was given with `ca_certificate`, so the platform's trust \
                     store was used): give the CA that signed it with `ca_certificate`, or \
                     add it to the platform's trust store (SSL_CERT_FILE, SSL_CERT_DIR)"
                ),
                Trust::Given => format!(
                    "{what}: the CA given with `ca_certificate` did not sign it; give the CA \
                     that signed the server's certificate (`openssl x509 -noout -issuer` on \
                     the server's certificate names it)"
                ),
                Trust::AppClient => format!(
                    "{what}: give the CA that signed it to the client or pool you built the \
                     store from"
                ),
            }
        }
        Error::InvalidCertificate(CertificateError::NotValidForName) => {
            "the server's certificate is not valid for the host name in the URL: connect by \
             a name the certificate lists"
                .to_owned()
        }
        Error::InvalidCertificate(CertificateError::Expired) => {
            "the server's certificate has expired: renew it on the server".to_owned()
        }
        Error::AlertReceived(AlertDescription::CertificateRequired) => match trust {
            Trust::AppClient => "the server requires a client certificate: configure one on \
                                 the client or pool you built the store from"
                .to_owned(),
            _ => "the server requires a client certificate: give one with `client_certificate`"
                .to_owned(),
        },
        _ => return None,
    };
    Some((words, cause.clone()))
}
