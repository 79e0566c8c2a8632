//! [`OutboundLimitLayer`]: limits for the calls a fleet makes to someone
//! else's API (its docs say how).

mod error;
mod future;
mod layer;
mod pause;
mod service;

pub use error::OutboundError;
pub use future::OutboundFuture;
pub use layer::OutboundLimitLayer;
pub use service::OutboundLimit;
