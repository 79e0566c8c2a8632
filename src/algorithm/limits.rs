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
///
/// A limit can be put in shadow mode ([`shadow`](Self::shadow)) to try it
/// on real traffic before it bites.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Never empty.
    parts: Vec<(Arc<str>, Spec)>,
    /// Bit `i`: part `i` is in shadow mode.
    shadowed: u16,
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
            shadowed: 0,
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

    /// Put the limit named `name` in shadow mode (as envoy's
    /// `shadow_mode`): it decides and is charged as any other, its state
    /// changing as if it were enforced, but it never denies. A request it
    /// alone would deny is admitted, and charged to the other limits;
    /// `floodgate_shadow_denials_total` counts it, with the limit's name
    /// (see [`metrics`](crate::metrics)), and
    /// [`check_all`](crate::Limiter::check_all) still shows the limit's own
    /// decision. The overall decision, and the rate-limit fields the layer
    /// writes, are the other limits' (the shadowed limit's admission only
    /// when every limit is shadowed). The same on every store: Redis
    /// decides it in the same call as the others.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodgate::algorithm::{FixedWindow, Limits};
    /// use floodgate::{clock::ManualClock, store::MemoryStore, Limiter, Reason};
    /// use std::time::Duration;
    ///
    /// let limits = Limits::new("minute", FixedWindow::new(100, Duration::from_secs(60)))
    ///     .try_with("strict", FixedWindow::new(2, Duration::from_secs(60)))?
    ///     .shadow("strict")?;
    /// let limiter = Limiter::builder(MemoryStore::new(), limits)
    ///     .clock(ManualClock::new(0))
    ///     .build()?;
    /// for _ in 0..3 {
    ///     assert!(limiter.check("ana", 1).await?.allowed());
    /// }
    /// let all = limiter.check_all("ana", 1).await?;
    /// assert!(all.overall().allowed());
    /// assert_eq!(all.overall().remaining(), 96); // "minute" charged 4 times
    /// assert_eq!(all.each()[1].decision().reason(), Reason::OverLimit); // "strict" would deny
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A [`ConfigError`] naming `name` when no limit has that name.
    pub fn shadow(mut self, name: &str) -> Result<Self, ConfigError> {
        let Some(i) = self.parts.iter().position(|(n, _)| &**n == name) else {
            return Err(ConfigError::new(
                "name",
                format!("no limit is named `{name}`"),
            ));
        };
        self.shadowed |= 1 << i;
        Ok(self)
    }

    /// Whether the limit named `name` is in shadow mode.
    pub fn is_shadowed(&self, name: &str) -> bool {
        self.parts
            .iter()
            .position(|(n, _)| &**n == name)
            .is_some_and(|i| self.shadowed & (1 << i) != 0)
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

    fn shadowed(&self) -> u16 {
        self.shadowed
    }
}

impl Algorithm for Limits {}
