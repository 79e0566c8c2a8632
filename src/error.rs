//! The error of a decision that could not be made. (Configuration errors,
//! which name their field, are `config_error.rs`: a leaf, so that the
//! store's builders use it without depending on this module.)

use std::fmt;

/// A decision could not be made: the store failed and the failure policy is
/// [`ReturnError`](crate::failure::FailurePolicy::ReturnError) (or a
/// fallback limiter returned this).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The store failed: Redis unreachable, timed out, or answered an error.
    Store(crate::store::StoreError),
    /// The limiter's limits cannot do what was asked (a
    /// [`block`](crate::Limiter::block) of a window, which keeps no
    /// schedule to push): the error names the limits and says why.
    Unsupported(crate::ConfigError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Store(e) => write!(f, "rate-limit store: {e}"),
            Error::Unsupported(e) => write!(f, "not possible with these limits: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Store(e) => Some(e),
            Error::Unsupported(e) => Some(e),
        }
    }
}

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Self {
        Error::Store(e)
    }
}
