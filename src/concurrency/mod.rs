//! At most N requests in flight per key, across all app servers: Stripe's
//! second kind of limiter, next to the rate limits of [`crate::algorithm`].
//!
//! Each request in flight holds a [`Lease`], kept in the store as a sorted
//! set per key scored by when the lease expires. The lease is released when
//! the request ends (with
//! [`ConcurrencyLimitLayer`](crate::layer::ConcurrencyLimitLayer): when the
//! response body ends or is dropped), and expires by itself otherwise, so a
//! server that crashes mid-request leaks its slot only until the lease runs
//! out. Choose the lease longer than your slowest request: a request that
//! outlives its lease no longer counts, and another may take its slot.
//!
//! A [`ConcurrencyLimiter`] is a peer of the rate [`Limiter`](crate::Limiter):
//! the same builder settings, the same decision path (timeout, circuit
//! breaker, failure policy, metrics), and its Lua code and in-memory twin
//! are kept identical by the same property tests. Failing open admits
//! without a lease; failing closed denies, and the layer answers 503.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::concurrency::ConcurrencyLimiter;
//! use floodgate::store::MemoryStore;
//!
//! let limiter = ConcurrencyLimiter::builder(MemoryStore::new(), 2).name("uploads").build()?;
//! let a = limiter.acquire("ana").await?.expect("first slot");
//! let b = limiter.acquire("ana").await?.expect("second slot");
//! assert!(limiter.acquire("ana").await?.is_err(), "full");
//! assert_eq!(limiter.in_flight("ana").await?, 2);
//! a.release().await;
//! assert!(limiter.acquire("ana").await?.is_ok());
//! # drop(b); Ok(()) }
//! ```

mod limiter;

pub use limiter::{ConcurrencyLimiter, ConcurrencyLimiterBuilder, Lease};
