//! What a request costs.

use crate::key::RequestView;
use std::fmt;
use std::sync::Arc;

/// A request extension that sets the request's cost, overriding the layer's
/// configured cost. Insert it from an earlier layer or middleware, e.g. one
/// that knows the size of a batch.
///
/// ```
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(floodgate::layer::Cost(5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cost(pub u64);

/// How the layer prices a request: a constant, or a function of the request.
#[derive(Clone)]
pub(crate) enum Pricing {
    Fixed(u64),
    Fn(Arc<dyn Fn(RequestView<'_>) -> u64 + Send + Sync>),
}

impl Pricing {
    /// The cost of `req`: its [`Cost`] extension if any, else the pricing.
    pub(crate) fn of(&self, req: RequestView<'_>) -> u64 {
        if let Some(Cost(c)) = req.extensions().get::<Cost>() {
            return *c;
        }
        match self {
            Pricing::Fixed(c) => *c,
            Pricing::Fn(f) => f(req),
        }
    }
}

impl fmt::Debug for Pricing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pricing::Fixed(c) => write!(f, "Fixed({c})"),
            Pricing::Fn(_) => f.write_str("Fn(..)"),
        }
    }
}
