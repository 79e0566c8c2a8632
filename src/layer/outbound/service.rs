use super::error::OutboundError;
use super::future::OutboundFuture;
use super::layer::{OutboundConfig, OutboundKey};
use crate::algorithm::Algorithm;
use crate::key::RequestView;
use http::{Request, Response};
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// The client middleware [`OutboundLimitLayer`](super::OutboundLimitLayer)
/// wraps a service in: each request waits for its booked time before `S`
/// sends it.
pub struct OutboundLimit<S, A> {
    inner: S,
    config: Arc<OutboundConfig<A>>,
}

impl<S, A> OutboundLimit<S, A> {
    pub(crate) fn new(inner: S, config: Arc<OutboundConfig<A>>) -> Self {
        Self { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, A> Clone for OutboundLimit<S, A> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S, A, ReqBody, ResBody> Service<Request<ReqBody>> for OutboundLimit<S, A>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    A: Algorithm,
{
    type Response = Response<ResBody>;
    type Error = OutboundError<S::Error>;
    type Future = OutboundFuture<S, ReqBody, A>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(OutboundError::Inner)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let view = RequestView::new(&req);
        let key = match &self.config.key {
            OutboundKey::Fixed(key) => key.to_string(),
            OutboundKey::Fn(f) => f(view),
        };
        let cost = self.config.pricing.of(view);
        // The service that reported ready goes with the request; a clone
        // stays for the next `poll_ready` (as tower-http's async
        // middlewares do).
        let clone = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, clone);
        OutboundFuture::new(self.config.clone(), key, cost, ready, req)
    }
}

impl<S: fmt::Debug, A: fmt::Debug> fmt::Debug for OutboundLimit<S, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundLimit")
            .field("inner", &self.inner)
            .field("limiter", &self.config.limiter)
            .finish_non_exhaustive()
    }
}
