//! The six algorithms, each a small config type.
//!
//! Every algorithm exists twice with the same decisions: as Lua in `lua/`
//! (run atomically inside Redis) and as an in-memory twin in Rust (run by
//! [`MemoryStore`](crate::store::MemoryStore)). Property tests compare the
//! two decision by decision. This module holds the config types and the
//! twins; it knows no store.
//!
//! | type | state per key | exact? | bursts |
//! |---|---|---|---|
//! | [`FixedWindow`] | one counter | no: up to 2× at window boundaries | uncontrolled |
//! | [`SlidingLog`] | one entry per admitted request | yes | none above the limit |
//! | [`SlidingWindow`] | two counters | nearly (weighted estimate) | small overshoot |
//! | [`TokenBucket`] | a backlog and its time | to its definition | up to capacity |
//! | [`LeakyBucket`] | a backlog and its time | to its definition | queued, delayed |
//! | [`Gcra`] | a backlog and its time | to its definition | up to burst |
//!
//! Every constructor is a `const fn`: an invalid constant does not compile,
//! and `try_new` returns a [`ConfigError`](crate::ConfigError) naming the
//! field for values known only at run time. [`Limits`] puts several of them
//! on one key, checked all or nothing. [`AnyAlgorithm`] is one of the
//! six, chosen at run time (from a configuration file too, with the
//! `serde` feature: the `floodgate::config` module).

// The twins compute with doubles as the Lua code does, and compare them as
// it does: every number is bounded below 2^53 by the checks of
// `validate.rs` and by `clock::MAX_TIME_MS`, so these casts are exact.
#![allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap,
    clippy::float_cmp
)]

mod any;
mod buckets;
mod concurrency;
mod fixed_window;
mod gcra;
mod jitter;
mod limits;
mod reply;
mod sliding_log;
mod sliding_window;
mod spec;
mod twin_mode;
mod usage;
pub(crate) mod validate;
mod windows;

pub use crate::quota::Quota;
pub use any::AnyAlgorithm;
pub use buckets::{LeakyBucket, TokenBucket};
pub use gcra::Gcra;
pub use limits::{Limits, MAX_LIMITS};
pub use windows::{FixedWindow, SlidingLog, SlidingWindow, MAX_LOG};

pub(crate) use reply::Reply;
pub(crate) use spec::{Spec, State, TwinMode, Write};
pub(crate) use usage::quota_used;

/// What a [`Limiter`](crate::Limiter) limits with: one of the six algorithm
/// types of this module, or several of them as [`Limits`].
///
/// Sealed, because each needs Lua code and a twin that agree. `PartialEq`
/// tells a change of limits from none
/// ([`Limiter::set_algorithm`](crate::Limiter::set_algorithm)).
pub trait Algorithm:
    sealed::Sealed + Clone + PartialEq + std::fmt::Debug + Send + Sync + 'static
{
}

/// One of the six algorithm types, not a [`Limits`]: what a `Limits` holds,
/// so that limits never nest.
///
/// ```compile_fail
/// use floodgate::algorithm::{Gcra, Limits};
/// use std::time::Duration;
/// let inner = Limits::new("a", Gcra::new(1, Duration::from_secs(1)));
/// let nested = Limits::new("b", inner); // a Limits is not a Single
/// ```
pub trait Single: Algorithm + Copy + sealed::One {}

/// The crate's view of an algorithm: its [`Spec`]s. `Spec` is the crate's
/// own, not public API; the traits are sealed (public, in a private
/// module), so nobody outside can name, call or implement them, and their
/// `Spec` in a public position is allowed here, and only here.
pub(crate) mod sealed {
    #![allow(private_interfaces)]

    use super::{FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, Spec, TokenBucket};
    use std::sync::Arc;

    /// Gives the crate the algorithm's normalized parameters.
    pub trait Sealed {
        /// Each limit: its own name (`None` for a plain algorithm, whose
        /// limit takes the limiter's name) and its parameters. Never empty.
        fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)>;
        /// Which parts are in shadow mode (bit `i` for part `i`): decided
        /// and charged, but never denying.
        fn shadowed(&self) -> u16 {
            0
        }
    }

    /// Gives the crate a single algorithm's one spec.
    pub trait One {
        fn spec(&self) -> Spec;
    }

    impl Sealed for FixedWindow {
        fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
            vec![(None, self.to_spec())]
        }
    }

    impl One for FixedWindow {
        fn spec(&self) -> Spec {
            self.to_spec()
        }
    }

    impl Sealed for SlidingLog {
        fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
            vec![(None, self.to_spec())]
        }
    }

    impl One for SlidingLog {
        fn spec(&self) -> Spec {
            self.to_spec()
        }
    }

    impl Sealed for SlidingWindow {
        fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
            vec![(None, self.to_spec())]
        }
    }

    impl One for SlidingWindow {
        fn spec(&self) -> Spec {
            self.to_spec()
        }
    }

    impl Sealed for TokenBucket {
        fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
            vec![(None, self.to_spec())]
        }
    }

    impl One for TokenBucket {
        fn spec(&self) -> Spec {
            self.to_spec()
        }
    }

    impl Sealed for LeakyBucket {
        fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
            vec![(None, self.to_spec())]
        }
    }

    impl One for LeakyBucket {
        fn spec(&self) -> Spec {
            self.to_spec()
        }
    }

    impl Sealed for Gcra {
        fn parts(&self) -> Vec<(Option<Arc<str>>, Spec)> {
            vec![(None, self.to_spec())]
        }
    }

    impl One for Gcra {
        fn spec(&self) -> Spec {
            self.to_spec()
        }
    }
}

impl Algorithm for FixedWindow {}
impl Single for FixedWindow {}
impl Algorithm for SlidingLog {}
impl Single for SlidingLog {}
impl Algorithm for SlidingWindow {}
impl Single for SlidingWindow {}
impl Algorithm for TokenBucket {}
impl Single for TokenBucket {}
impl Algorithm for LeakyBucket {}
impl Single for LeakyBucket {}
impl Algorithm for Gcra {}
impl Single for Gcra {}
