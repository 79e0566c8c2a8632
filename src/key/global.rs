//! One key for every request.

use std::borrow::Cow;

use super::{KeyExtractor, KeyRejection};

/// Gives every request the same key: one limit for the whole service, e.g.
/// to protect a backend that can take only so much.
///
/// ```
/// use floodgate::key::{Global, KeyExtractor};
///
/// let req = http::Request::new(());
/// assert_eq!(Global::new().extract(&req).unwrap(), "global");
/// assert_eq!(Global::named("search").extract(&req).unwrap(), "search");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Global {
    key: Cow<'static, str>,
}

impl Global {
    /// The key `"global"`.
    pub fn new() -> Self {
        Self::named("global")
    }

    /// The key `key`, to keep several global limits apart.
    pub fn named(key: impl Into<Cow<'static, str>>) -> Self {
        Self { key: key.into() }
    }
}

impl Default for Global {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyExtractor for Global {
    fn extract<'r, B>(&self, _: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        Ok(self.key.clone())
    }
}
