//! [`AnyAlgorithm`]: one of the six algorithms, chosen at run time.

use super::sealed::{One, Sealed};
use super::spec::Spec;
use super::TokenBucket;
use super::{Algorithm, FixedWindow, Gcra, LeakyBucket, Single, SlidingLog, SlidingWindow};
use crate::Quota;
use std::sync::Arc;

/// One of the six algorithms, chosen at run time: when a configuration file
/// (with the `serde` feature: see the `floodgate::config` module), a database
/// or a command line says which. A limiter over it decides exactly as one
/// over the algorithm it holds, and [`Limits`](super::Limits) takes it like
/// any single algorithm.
///
/// ```
/// # fn main() -> Result<(), floodgate::ConfigError> {
/// use floodgate::algorithm::{AnyAlgorithm, Gcra, Limits, SlidingLog};
/// use floodgate::{store::MemoryStore, Limiter};
/// use std::time::Duration;
///
/// let strict = true; // read from somewhere at run time
/// let login: AnyAlgorithm = if strict {
///     SlidingLog::try_new(5, Duration::from_secs(900))?.into()
/// } else {
///     Gcra::try_new(5, Duration::from_secs(900))?.into()
/// };
/// let limits = Limits::try_new("login", login)?;
/// let limiter = Limiter::builder(MemoryStore::new(), limits).name("login").build()?;
/// # let _ = limiter; Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum AnyAlgorithm {
    /// A [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// A [`SlidingLog`].
    SlidingLog(SlidingLog),
    /// A [`SlidingWindow`].
    SlidingWindow(SlidingWindow),
    /// A [`TokenBucket`].
    TokenBucket(TokenBucket),
    /// A [`LeakyBucket`].
    LeakyBucket(LeakyBucket),
    /// A [`Gcra`].
    Gcra(Gcra),
}

impl AnyAlgorithm {
    /// The limit as it reads on the wire (`RateLimit-Policy`): the quota of
    /// the algorithm it holds.
    pub fn quota(&self) -> Quota {
        self.spec().quota()
    }
}

impl From<FixedWindow> for AnyAlgorithm {
    fn from(a: FixedWindow) -> Self {
        AnyAlgorithm::FixedWindow(a)
    }
}

impl From<SlidingLog> for AnyAlgorithm {
    fn from(a: SlidingLog) -> Self {
        AnyAlgorithm::SlidingLog(a)
    }
}

impl From<SlidingWindow> for AnyAlgorithm {
    fn from(a: SlidingWindow) -> Self {
        AnyAlgorithm::SlidingWindow(a)
    }
}

impl From<TokenBucket> for AnyAlgorithm {
    fn from(a: TokenBucket) -> Self {
        AnyAlgorithm::TokenBucket(a)
    }
}

impl From<LeakyBucket> for AnyAlgorithm {
    fn from(a: LeakyBucket) -> Self {
        AnyAlgorithm::LeakyBucket(a)
    }
}

impl From<Gcra> for AnyAlgorithm {
    fn from(a: Gcra) -> Self {
        AnyAlgorithm::Gcra(a)
    }
}

// `Spec` is the crate's own: see `sealed`.
#[allow(private_interfaces)]
impl One for AnyAlgorithm {
    fn spec(&self) -> Spec {
        match self {
            AnyAlgorithm::FixedWindow(a) => a.spec(),
            AnyAlgorithm::SlidingLog(a) => a.spec(),
            AnyAlgorithm::SlidingWindow(a) => a.spec(),
            AnyAlgorithm::TokenBucket(a) => a.spec(),
            AnyAlgorithm::LeakyBucket(a) => a.spec(),
            AnyAlgorithm::Gcra(a) => a.spec(),
        }
    }
}

#[allow(private_interfaces)]
impl Sealed for AnyAlgorithm {
    fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
        vec![(None, self.spec())]
    }
}

impl Algorithm for AnyAlgorithm {}
impl Single for AnyAlgorithm {}
