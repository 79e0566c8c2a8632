//! [`ConfigError`]: an invalid configuration value, naming its field. A
//! leaf: every module that builds something uses it, and it uses nothing.

use std::borrow::Cow;
use std::fmt;

/// An invalid configuration value. The message names the field and says why.
///
/// Returned when something is built (`try_new`, a builder's `build`): a
/// configuration that was built never fails a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    reason: Cow<'static, str>,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }

    /// The name of the offending field, e.g. `"window"`.
    pub fn field(&self) -> &'static str {
        self.field
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid `{}`: {}", self.field, self.reason)
    }
}

impl std::error::Error for ConfigError {}
