//! The concurrency layer: [`ConcurrencyLimitLayer`] and its service
//! [`ConcurrencyLimit`].

// tower-http's layout: one folder per middleware with layer.rs and service.rs.
#[allow(clippy::module_inception)]
mod layer;
mod service;

pub use layer::ConcurrencyLimitLayer;
pub use service::ConcurrencyLimit;
