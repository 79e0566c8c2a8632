//! Errors: configuration errors that name the field, and runtime errors.

use std::fmt;

/// An invalid configuration value. The message names the field and says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    reason: String,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, reason: impl Into<String>) -> Self {
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

/// A decision could not be made.
#[derive(Debug)]
pub enum Error {
    /// The configuration is invalid.
    Config(ConfigError),
    /// The store failed: Redis unreachable, timed out, or answered an error.
    Store(crate::store::StoreError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(e) => e.fmt(f),
            Error::Store(e) => write!(f, "rate-limit store: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Config(e) => Some(e),
            Error::Store(e) => Some(e),
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Config(e)
    }
}

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Self {
        Error::Store(e)
    }
}
