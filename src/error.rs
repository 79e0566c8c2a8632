//! Errors: configuration errors that name the field, and the error of a
//! decision that could not be made.

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

/// A decision could not be made: the store failed and the failure policy is
/// [`ReturnError`](crate::failure::FailurePolicy::ReturnError) (or a
/// fallback limiter returned this).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The store failed: Redis unreachable, timed out, or answered an error.
    Store(crate::store::StoreError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Store(e) => write!(f, "rate-limit store: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Store(e) => Some(e),
        }
    }
}

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Self {
        Error::Store(e)
    }
}
