//! The rate-limit layer: [`RateLimitLayer`] and its service [`RateLimit`].

// tower-http's layout: one folder per middleware with layer.rs and service.rs.
#[allow(clippy::module_inception)]
mod layer;
mod limit_keys;
mod service;

pub use layer::RateLimitLayer;
pub use service::RateLimit;
