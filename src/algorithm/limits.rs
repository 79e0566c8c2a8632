use super::sealed::Sealed;
use super::spec::Spec;
use super::{Algorithm, Quota, Single};
use crate::ConfigError;
use std::sync::Arc;

/// Several limits on one key, checked together, all or nothing: when one
/// denies, none is charged. On Redis they are decided in one call, so
/// concurrent requests can never slip between them.
///
/// Each limit has a name: it names the limit in `RateLimit-Policy` (every
/// limit is listed) and in `RateLimit` (the most restrictive is reported).
/// A `Limits` is built with its first limit, so it is never empty, and holds
/// only single algorithms ([`Single`]), so limits never nest.
///
/// ```
/// # fn main() -> Result<(), floodgate::ConfigError> {
/// use floodgate::algorithm::{FixedWindow, Limits, SlidingWindow};
/// use std::time::Duration;
///
/// let limits = Limits::new("second", SlidingWindow::new(10, Duration::from_secs(1)))
///     .try_with("hour", SlidingWindow::new(1_000, Duration::from_secs(3_600)))?
///     .try_with("day", FixedWindow::new(10_000, Duration::from_secs(86_400)))?;
/// assert_eq!(limits.quotas().count(), 3);
/// assert!(limits.clone().try_with("hour", FixedWindow::new(1, Duration::from_secs(1))).is_err());
/// # Ok(()) }
/// ```
///
/// A `Limits` without a limit cannot be written:
///
/// ```compile_fail
/// let none = floodgate::algorithm::Limits::new();
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Never empty.
    parts: Vec<(Arc<str>, Spec)>,
}

/// The most limits one [`Limits`] takes: each is one key in one store call.
pub const MAX_LIMITS: usize = 16;

impl Limits {
    /// Limits whose first is `algorithm`, named `name` (1 to 32 characters of
    /// `A-Z a-z 0-9 _ - .`); add more with [`try_with`](Self::try_with).
    ///
    /// # Panics
    /// When the name is invalid (see [`try_new`](Self::try_new)); the panic
    /// points at the caller.
    #[track_caller]
    pub fn new<A: Single>(name: &str, algorithm: A) -> Self {
        match Self::try_new(name, algorithm) {
            Ok(limits) => limits,
            Err(e) => panic!("{e}"),
        }
    }

    /// Like [`new`](Self::new), returning an error that names the field.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `name` when it is not 1 to 32 characters of
    /// `A-Z a-z 0-9 _ - .`.
    pub fn try_new<A: Single>(name: &str, algorithm: A) -> Result<Self, ConfigError> {
        let name = checked_name(name)?;
        Ok(Self {
            parts: vec![(name, algorithm.spec())],
        })
    }

    /// Add the limit `algorithm` named `name`: an error that names the field
    /// when the name is invalid or already taken, or when there would be
    /// more than [`MAX_LIMITS`].
    ///
    /// # Errors
    /// A [`ConfigError`] naming `name` (invalid, or taken) or `limits` (more
    /// than [`MAX_LIMITS`]).
    pub fn try_with<A: Single>(mut self, name: &str, algorithm: A) -> Result<Self, ConfigError> {
        let name = checked_name(name)?;
        if self.parts.iter().any(|(n, _)| *n == name) {
            return Err(ConfigError::new("name", format!("`{name}` is used twice")));
        }
        if self.parts.len() == MAX_LIMITS {
            return Err(ConfigError::new("limits", format!("at most {MAX_LIMITS}")));
        }
        self.parts.push((name, algorithm.spec()));
        Ok(self)
    }

    /// Each limit's name and quota, in order.
    pub fn quotas(&self) -> impl Iterator<Item = (&str, Quota)> {
        self.parts.iter().map(|(n, s)| (&**n, s.quota()))
    }
}

fn checked_name(name: &str) -> Result<Arc<str>, ConfigError> {
    if name.is_empty() || name.len() > 32 || !name.chars().all(super::validate::is_name_char) {
        return Err(ConfigError::new(
            "name",
            "must be 1 to 32 characters of A-Z a-z 0-9 _ - .",
        ));
    }
    Ok(name.into())
}

// `Spec` is the crate's own: see `sealed`.
#[allow(private_interfaces)]
impl Sealed for Limits {
    fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
        self.parts
            .iter()
            .map(|(n, s)| (Some(n.clone()), *s))
            .collect()
    }
}

impl Algorithm for Limits {}
