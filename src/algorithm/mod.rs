//! The six algorithms, each a small config type.
//!
//! Every algorithm exists twice with the same decisions: as a Lua script in
//! `lua/` (run atomically inside Redis) and as an in-memory twin in Rust (run
//! by [`MemoryStore`](crate::store::MemoryStore)). Property tests compare the
//! two decision by decision.
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
//! [`Limits`] puts several of them on one key, checked all or nothing.

mod fixed_window;
mod gcra;
mod leaky_bucket;
mod limits;
mod policy;
mod sliding_log;
mod sliding_window;
mod spec;
mod token_bucket;
mod validate;

pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use leaky_bucket::LeakyBucket;
pub use limits::{Limits, MAX_LIMITS};
pub use policy::Policy;
pub use sliding_log::SlidingLog;
pub use sliding_window::SlidingWindow;
pub use token_bucket::TokenBucket;

pub(crate) use spec::{
    parse_value, script_cmd, Mode, Reply, Spec, State, LEASE_SCRIPT, LEASE_SOURCE, LIBRARY, SCRIPT,
    SCRIPT_SOURCE,
};
pub(crate) use validate::window as validate_window;

/// A rate-limiting algorithm with its parameters: one of the six config
/// types of this module, or several of them as [`Limits`].
///
/// Sealed, because each needs a Lua script and a twin that agree.
pub trait Algorithm: sealed::Sealed + Clone + std::fmt::Debug + Send + Sync + 'static {}

pub(crate) mod sealed {
    use std::sync::Arc;

    /// Gives the crate the algorithm's normalized parameters.
    pub trait Sealed {
        /// Each policy: its own name (`None` for a plain algorithm, whose
        /// policy takes the limiter's name) and its parameters.
        fn parts(&self) -> Vec<(Option<Arc<str>>, super::Spec)>;
    }
}

macro_rules! algorithm {
    ($ty:ty) => {
        impl sealed::Sealed for $ty {
            fn parts(&self) -> Vec<(Option<std::sync::Arc<str>>, Spec)> {
                vec![(None, self.to_spec())]
            }
        }
        impl Algorithm for $ty {}
        impl $ty {
            /// The quota as it reads on the wire (`RateLimit-Policy`).
            pub fn policy(&self) -> Policy {
                self.to_spec().policy()
            }
        }
    };
}
algorithm!(FixedWindow);
algorithm!(SlidingLog);
algorithm!(SlidingWindow);
algorithm!(TokenBucket);
algorithm!(LeakyBucket);
algorithm!(Gcra);
