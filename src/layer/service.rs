//! The middleware both layers wrap a service in.

use super::answer::{Answer, RejectionKind};
use super::body::ResponseBody;
use super::future::ResponseFuture;
use super::gate::Gate;
use crate::key::KeyRejection;
use crate::limiter::{Decided, Pending};
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// The middleware a layer wraps a service in, over the layer's
/// configuration `C`: [`RateLimit`](super::RateLimit) for a
/// [`RateLimitLayer`](super::RateLimitLayer),
/// [`ConcurrencyLimit`](super::ConcurrencyLimit) for a
/// [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer). Both answer
/// through the same future and body.
pub struct Limit<S, C> {
    inner: S,
    config: Arc<C>,
}

pub(crate) use sealed::Gatekeeper;

mod sealed {
    use super::{Answer, Arc, Decided, Gate, KeyRejection, Pending, Request};

    /// What a layer's configuration does with each request. Sealed: its
    /// items are reached only through `Limit`'s `Service` impl.
    #[allow(private_interfaces)]
    pub trait Gatekeeper: Send + Sync + 'static {
        /// The request's key, or why there is none.
        fn key<B>(&self, req: &Request<B>) -> Result<String, KeyRejection>;
        /// How the layer answers.
        fn answer(&self) -> &Answer;
        /// Start the decision of `req`, whose key is `key`: the decision
        /// and what follows it.
        fn start<B>(this: &Arc<Self>, req: &Request<B>, key: String) -> (Pending<Decided>, Gate);
    }
}

impl<S, C> Limit<S, C> {
    pub(crate) fn new(inner: S, config: Arc<C>) -> Self {
        Self { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, C> Clone for Limit<S, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S, C, ReqBody, ResBody> Service<Request<ReqBody>> for Limit<S, C>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    C: Gatekeeper,
    ResBody: Body<Data = Bytes>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let config = &self.config;
        let key = match config.key(&req) {
            Ok(key) => key,
            Err(rejection) => {
                let kind = RejectionKind::NoKey(&rejection);
                return ResponseFuture::done(config.answer().reject(kind, req.headers()));
            }
        };
        let (decision, gate) = C::start(config, &req, key);
        ResponseFuture::start(&mut self.inner, req, decision, gate)
    }
}

impl<S: fmt::Debug, C: fmt::Debug> fmt::Debug for Limit<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}
