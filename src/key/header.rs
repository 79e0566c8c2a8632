//! A header value as the key, e.g. an API key.

use std::borrow::Cow;
use std::sync::Arc;

use http::HeaderName;

use super::{KeyExtractor, KeyRejection};
use crate::ConfigError;

/// Keys on the value of a request header, such as `x-api-key`.
///
/// The request is rejected (never put into a shared bucket) when the header
/// is missing, empty, sent more than once, longer than
/// [`max_len`](Self::max_len) bytes (default 256), or has bytes other than
/// visible ASCII and spaces. Spaces are allowed for values like
/// `Bearer abc`; leading and trailing ones are trimmed. Rejections name the
/// header, never its value.
///
/// Limiting on a credential counts requests *before* your auth layer checks
/// it when the limiter runs first: random keys then get fresh buckets. Put
/// the limiter after authentication, or combine with an IP key.
///
/// ```
/// use floodgate::key::{Header, KeyExtractor};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let key = Header::try_new("x-api-key")?.prefix("key:");
/// let req = http::Request::builder().header("x-api-key", "abc123").body(())?;
/// assert_eq!(key.extract(&req)?, "key:abc123");
///
/// let req = http::Request::new(());
/// assert_eq!(key.extract(&req).unwrap_err().reason(), "missing `x-api-key` header");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a layer or extractor does nothing until it is used"]
pub struct Header {
    name: HeaderName,
    prefix: Arc<str>,
    max_len: usize,
}

impl Header {
    /// The default bound on a value's length, in bytes.
    pub const DEFAULT_MAX_LEN: usize = 256;

    /// Keys on the header `name`.
    pub fn new(name: HeaderName) -> Self {
        Self {
            name,
            prefix: Arc::from(""),
            max_len: Self::DEFAULT_MAX_LEN,
        }
    }

    /// Keys on the header `name`; fails if it is not a valid header name.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `name` when it is not a header name.
    pub fn try_new(name: &str) -> Result<Self, ConfigError> {
        HeaderName::try_from(name)
            .map(Self::new)
            .map_err(|_| ConfigError::new("name", format!("{name:?} is not a valid header name")))
    }

    /// Puts `prefix` in front of the value, e.g. `"key:"`, so keys of
    /// different kinds cannot collide.
    pub fn prefix(mut self, prefix: impl Into<Arc<str>>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Rejects values longer than `max` bytes (default
    /// [`DEFAULT_MAX_LEN`](Self::DEFAULT_MAX_LEN)). Fails if `max` is 0.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `max_len` when `max` is 0.
    pub fn max_len(mut self, max: usize) -> Result<Self, ConfigError> {
        if max == 0 {
            return Err(ConfigError::new("max_len", "must be at least 1 byte"));
        }
        self.max_len = max;
        Ok(self)
    }
}

impl KeyExtractor for Header {
    fn extract<'r, B>(&self, req: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        let name = &self.name;
        let mut values = req.headers().get_all(name).iter();
        let value = match (values.next(), values.next()) {
            (Some(v), None) => v,
            (None, _) => return Err(KeyRejection::new(format!("missing `{name}` header"))),
            (Some(_), Some(_)) => {
                return Err(KeyRejection::new(format!(
                    "`{name}` header sent more than once"
                )))
            }
        };
        let trimmed = value.as_bytes().trim_ascii();
        if trimmed.is_empty() {
            return Err(KeyRejection::new(format!("empty `{name}` header")));
        }
        if trimmed.len() > self.max_len {
            return Err(KeyRejection::new(format!(
                "`{name}` header is longer than {} bytes",
                self.max_len
            )));
        }
        // `to_str` admits visible ASCII, spaces and tabs (and gives the
        // `str` without a second pass); a tab left inside the trimmed
        // value is refused with the other invisible bytes.
        let value = match value.to_str() {
            Ok(s) => s.trim_ascii(),
            Err(_) => return Err(invisible(name)),
        };
        if value.as_bytes().contains(&b'\t') {
            return Err(invisible(name));
        }
        if self.prefix.is_empty() {
            // The header's own bytes: nothing copied for the decision.
            return Ok(Cow::Borrowed(value));
        }
        let mut key = String::with_capacity(self.prefix.len() + value.len());
        key.push_str(&self.prefix);
        key.push_str(value);
        Ok(Cow::Owned(key))
    }
}

fn invisible(name: &HeaderName) -> KeyRejection {
    KeyRejection::new(format!(
        "`{name}` header has bytes that are not visible ASCII"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(values: &[&[u8]]) -> http::Request<()> {
        let mut r = http::Request::new(());
        for v in values {
            r.headers_mut()
                .append("x-api-key", HeaderValue::from_bytes(v).unwrap());
        }
        r
    }

    #[test]
    fn values() {
        let h = Header::try_new("X-Api-Key").unwrap();
        assert_eq!(
            h.extract(&with(&[b"  Bearer a.b  "])).unwrap(),
            "Bearer a.b"
        );
    }

    #[test]
    fn rejections() {
        let h = Header::try_new("x-api-key").unwrap().max_len(4).unwrap();
        let cases: &[(&[&[u8]], &str)] = &[
            (&[], "missing `x-api-key` header"),
            (&[b"   "], "empty `x-api-key` header"),
            (&[b"a", b"b"], "`x-api-key` header sent more than once"),
            (&[b"abcde"], "`x-api-key` header is longer than 4 bytes"),
            (
                &[b"a\tb"],
                "`x-api-key` header has bytes that are not visible ASCII",
            ),
            (
                &[b"\xc3\xa9"],
                "`x-api-key` header has bytes that are not visible ASCII",
            ),
            (
                &[b"\xff"],
                "`x-api-key` header has bytes that are not visible ASCII",
            ),
        ];
        for (values, reason) in cases {
            assert_eq!(h.extract(&with(values)).unwrap_err().reason(), *reason);
        }
    }

    #[test]
    fn config_errors() {
        assert_eq!(Header::try_new("bad name").unwrap_err().field(), "name");
        let h = Header::new(HeaderName::from_static("x"));
        assert_eq!(h.max_len(0).unwrap_err().field(), "max_len");
    }
}
