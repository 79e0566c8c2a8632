//! floodgate: distributed rate limiting for tower, axum and tonic.
#![warn(missing_docs)]

pub mod algorithm;
pub mod clock;
mod decision;
mod error;
pub mod headers;
pub mod key;
mod limiter;
pub use limiter::{Limiter, LimiterBuilder};
pub mod response;
pub mod store;

pub use decision::Decision;
pub use error::{ConfigError, Error};
