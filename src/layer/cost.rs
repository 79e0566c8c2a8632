//! What a request costs: before it is served, and what it turned out to
//! cost.

use crate::key::RequestView;
use http::{Extensions, HeaderMap, HeaderName};
use std::fmt;
use std::sync::Arc;

/// What a request costs, as an extension: on a **request**, it sets the
/// request's cost, overriding the layer's configured cost (insert it from
/// an earlier layer or middleware, e.g. one that knows the size of a
/// batch); on a **response**, with
/// [`RateLimitLayer::actual_cost`](super::RateLimitLayer::actual_cost)`(ActualCost::Extension)`,
/// it says what the request turned out to cost (the tokens an LLM call
/// used), settled against what was charged.
///
/// ```
/// let mut req = http::Request::new(());
/// req.extensions_mut().insert(floodgate::layer::Cost(5));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cost(pub u64);

/// Where a response says what its request actually cost, for
/// [`RateLimitLayer::actual_cost`](super::RateLimitLayer::actual_cost).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ActualCost {
    /// A response header holding a whole number (e.g. `x-tokens-used`),
    /// left on the response. A value that is not one keeps the estimate.
    Header(HeaderName),
    /// A [`Cost`] the handler put in the response's extensions.
    Extension,
    /// A trailer holding a whole number, read when the response body ends:
    /// a streamed answer knows its cost only then (an LLM's token count,
    /// gRPC trailing metadata such as `x-tokens-used`). The same field in
    /// the response's head counts too, and is read at once (gRPC's
    /// trailers-only answers put their trailers there).
    ///
    /// The body is watched through [`RejectionBody::settle_at_end`](super::RejectionBody::settle_at_end):
    /// axum's and tonic's bodies are; a body type that cannot be watched
    /// keeps the estimate. A body that ends without the trailer, fails, or
    /// is dropped before its end (a client gone mid-stream) keeps the
    /// estimate too.
    Trailer(HeaderName),
}

impl ActualCost {
    /// The cost the response says, if it says one.
    pub(crate) fn read(&self, headers: &HeaderMap, extensions: &Extensions) -> Option<u64> {
        match self {
            ActualCost::Header(name) | ActualCost::Trailer(name) => cost_in(headers, name),
            ActualCost::Extension => extensions.get::<Cost>().map(|c| c.0),
        }
    }

    /// The trailer to wait for when the response's head does not say the
    /// cost.
    pub(crate) fn awaited_trailer(&self, head: &HeaderMap) -> Option<&HeaderName> {
        match self {
            ActualCost::Trailer(name) if !head.contains_key(name) => Some(name),
            _ => None,
        }
    }
}

/// The whole number in the field `name` of `fields`, if it holds one.
pub(crate) fn cost_in(fields: &HeaderMap, name: &HeaderName) -> Option<u64> {
    let value = fields.get(name)?.to_str().ok()?;
    let cost = value.trim().parse().ok();
    if cost.is_none() {
        tracing::debug!(field = %name, value, "floodgate: not a cost; the estimate stays charged");
    }
    cost
}

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
