//! The common case in one `use`: `use floodgate::prelude::*;`.
//!
//! The limiters and their layers, the six algorithms and [`Limits`], the
//! stores, the key extractors most services start with, and what a decision
//! says.
//!
//! ```
//! use floodgate::prelude::*;
//! use std::time::Duration;
//!
//! let limiter = Limiter::new(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)));
//! let layer = RateLimitLayer::new(limiter, PeerIp::new());
//! ```

pub use crate::algorithm::{
    FixedWindow, Gcra, LeakyBucket, Limits, SlidingLog, SlidingWindow, TokenBucket,
};
pub use crate::failure::FailurePolicy;
pub use crate::key::{ClientIp, Global, Header, PeerIp};
pub use crate::store::{MemoryStore, RedisClusterStore, RedisStore};
pub use crate::{
    ConcurrencyLimitLayer, ConcurrencyLimiter, Decision, Limiter, RateLimitLayer, Reason,
};
