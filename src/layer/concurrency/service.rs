use super::layer::Config;
use crate::key::KeyExtractor;
use crate::layer::answer::RejectionKind;
use crate::layer::body::ResponseBody;
use crate::layer::future::ResponseFuture;
use crate::layer::gate::Gate;
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// The middleware [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer)
/// wraps a service in.
pub struct ConcurrencyLimit<S, K> {
    inner: S,
    config: Arc<Config<K>>,
}

impl<S, K> ConcurrencyLimit<S, K> {
    pub(crate) fn new(inner: S, config: Arc<Config<K>>) -> Self {
        Self { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, K> Clone for ConcurrencyLimit<S, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for ConcurrencyLimit<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    K: KeyExtractor,
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
        let key = match config.extractor.extract(&req) {
            Ok(key) => key,
            Err(rejection) => {
                let kind = RejectionKind::NoKey(&rejection);
                return ResponseFuture::done(config.answer.answer.reject(kind, req.headers()));
            }
        };
        let limiter = &config.limiter;
        let (id, decision) = limiter.start_acquire(&key);
        let gate = Gate::Lease {
            layer: config.answer.clone(),
            limiter: limiter.clone(),
            key,
            id,
        };
        ResponseFuture::start(&mut self.inner, req, decision, gate)
    }
}

impl<S: std::fmt::Debug, K> std::fmt::Debug for ConcurrencyLimit<S, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrencyLimit")
            .field("inner", &self.inner)
            .field("limiter", &self.config.limiter)
            .finish()
    }
}
