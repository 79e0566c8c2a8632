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
//! | [`TokenBucket`] | tokens + time | to its definition | up to capacity |
//! | [`LeakyBucket`] | level + time | to its definition | queued, delayed |
//! | [`Gcra`] | one time | to its definition | up to burst |

mod fixed_window;
mod gcra;
mod leaky_bucket;
mod policy;
mod sliding_log;
mod sliding_window;
mod spec;
mod token_bucket;
mod validate;

pub use fixed_window::FixedWindow;
pub use gcra::Gcra;
pub use leaky_bucket::LeakyBucket;
pub use policy::Policy;
pub use sliding_log::SlidingLog;
pub use sliding_window::SlidingWindow;
pub use token_bucket::TokenBucket;

pub(crate) use spec::{Reply, Spec, State};

/// A rate-limiting algorithm with its parameters.
///
/// Implemented by the six config types of this module; sealed, because each
/// needs a Lua script and a twin that agree.
pub trait Algorithm: sealed::Sealed + Clone + std::fmt::Debug + Send + Sync + 'static {
    /// The quota as it reads on the wire (`RateLimit-Policy`).
    fn policy(&self) -> Policy;
}

pub(crate) mod sealed {
    /// Gives the crate the algorithm's normalized parameters.
    pub trait Sealed {
        fn spec(&self) -> super::Spec;
    }
}

macro_rules! algorithm {
    ($ty:ty) => {
        impl sealed::Sealed for $ty {
            fn spec(&self) -> Spec {
                self.to_spec()
            }
        }
        impl Algorithm for $ty {
            fn policy(&self) -> Policy {
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
