//! At most N requests in flight per key, across all app servers: Stripe's
//! second kind of limiter, next to the rate limits of [`crate::algorithm`].
//!
//! Each request in flight holds a lease, kept in the store as a sorted set
//! per key scored by when the lease expires. The lease is released when the
//! request ends (with [`ConcurrencyLimitLayer`]: when the response body ends
//! or is dropped), and expires by itself otherwise, so a server that crashes
//! mid-request leaks its slot only until the lease runs out. Choose the
//! lease longer than your slowest request: a request that outlives its lease
//! no longer counts, and another may take its slot.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), floodgate::Error> {
//! use floodgate::concurrency::ConcurrencyLimiter;
//! use floodgate::store::MemoryStore;
//!
//! let limiter = ConcurrencyLimiter::builder(MemoryStore::new(), 2).name("uploads").build()?;
//! let a = limiter.acquire("ana").await?.expect("first slot");
//! let b = limiter.acquire("ana").await?.expect("second slot");
//! assert!(limiter.acquire("ana").await?.is_none(), "full");
//! a.release().await;
//! assert!(limiter.acquire("ana").await?.is_some());
//! # drop(b); Ok(()) }
//! ```

mod body;
mod future;
mod layer;
mod limiter;
mod service;

pub use body::ConcurrencyBody;
pub use future::ResponseFuture;
pub use layer::ConcurrencyLimitLayer;
pub use limiter::{ConcurrencyLimiter, ConcurrencyLimiterBuilder, Permit};
pub use service::ConcurrencyLimit;
