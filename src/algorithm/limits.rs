use super::sealed::Sealed;
use super::spec::Spec;
use super::{Algorithm, Policy};
use crate::ConfigError;
use std::sync::Arc;

/// Several limits on one key, checked together, all or nothing: when one
/// denies, none is charged. On Redis they are decided in one script call,
/// so concurrent requests can never slip between them.
///
/// Each limit has a name: it names the policy in `RateLimit-Policy` (every
/// limit is listed) and in `RateLimit` (the most restrictive is reported).
///
/// ```
/// use floodgate::algorithm::{FixedWindow, Limits, SlidingWindow};
/// use std::time::Duration;
///
/// let limits = Limits::new()
///     .with("second", SlidingWindow::new(10, Duration::from_secs(1)))
///     .with("hour", SlidingWindow::new(1_000, Duration::from_secs(3_600)))
///     .with("day", FixedWindow::new(10_000, Duration::from_secs(86_400)));
/// assert_eq!(limits.len(), 3);
/// assert!(Limits::new().try_with("bad name", SlidingWindow::new(1, Duration::from_secs(1))).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    parts: Vec<(Arc<str>, Spec)>,
}

/// The most limits one [`Limits`] takes: each is one key in one script call.
pub const MAX_LIMITS: usize = 16;

impl Limits {
    /// No limits yet; add them with [`with`](Self::with).
    pub fn new() -> Self {
        Self::default()
    }

    /// Add the limit `algorithm` named `name`.
    ///
    /// # Panics
    /// When the name is invalid or taken; see [`try_with`](Self::try_with).
    pub fn with<A: Algorithm>(self, name: &str, algorithm: A) -> Self {
        super::validate::or_panic(self.try_with(name, algorithm))
    }

    /// Like [`with`](Self::with), returning an error that names the field:
    /// `name` must be 1 to 32 characters of `A-Z a-z 0-9 _ -`, unique; at
    /// most [`MAX_LIMITS`] limits; no `Limits` inside `Limits`.
    pub fn try_with<A: Algorithm>(mut self, name: &str, algorithm: A) -> Result<Self, ConfigError> {
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-');
        if name.is_empty() || name.len() > 32 || !name.chars().all(ok) {
            return Err(ConfigError::new(
                "name",
                "must be 1 to 32 characters of A-Z a-z 0-9 _ -",
            ));
        }
        if self.parts.iter().any(|(n, _)| &**n == name) {
            return Err(ConfigError::new("name", format!("`{name}` is used twice")));
        }
        if self.parts.len() == MAX_LIMITS {
            return Err(ConfigError::new("limits", format!("at most {MAX_LIMITS}")));
        }
        let mut parts = algorithm.parts();
        match (parts.pop(), parts.is_empty()) {
            (Some((None, spec)), true) => self.parts.push((name.into(), spec)),
            _ => {
                return Err(ConfigError::new(
                    "algorithm",
                    "a Limits cannot hold another Limits",
                ))
            }
        }
        Ok(self)
    }

    /// How many limits.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether there is none (a limiter refuses to be built with none).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Each limit's name and quota.
    pub fn policies(&self) -> impl Iterator<Item = (&str, Policy)> {
        self.parts.iter().map(|(n, s)| (&**n, s.policy()))
    }
}

impl Sealed for Limits {
    fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
        self.parts
            .iter()
            .map(|(n, s)| (Some(n.clone()), *s))
            .collect()
    }
}

impl Algorithm for Limits {}
