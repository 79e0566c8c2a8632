use super::body::ConcurrencyBody;
use super::future::ResponseFuture;
use super::layer::Config;
use crate::algorithm::Policy;
use crate::headers::{HeaderStyle, PolicyReport};
use crate::key::KeyExtractor;
use crate::layer::{Reason, Rejection};
use crate::Decision;
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body::Body;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;
use tower_service::Service;

/// The middleware [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer)
/// wraps a service in.
#[derive(Clone)]
pub struct ConcurrencyLimit<S, K> {
    inner: S,
    config: Arc<Config<K>>,
}

impl<S, K> ConcurrencyLimit<S, K> {
    pub(crate) fn new(inner: S, config: Arc<Config<K>>) -> Self {
        Self { inner, config }
    }
}

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for ConcurrencyLimit<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    K: KeyExtractor,
    ResBody: Body<Data = Bytes>,
{
    type Response = Response<ConcurrencyBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // Take the service that reported ready along; leave a clone (see
        // RateLimit::call).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = self.config.clone();
        let key = match config.extractor.extract(&req) {
            Ok(key) => key,
            Err(rejection) => {
                return ResponseFuture::done(reject(Reason::NoKey(&rejection), req.headers()))
            }
        };
        let limiter = config.limiter.clone();
        let acquire = Box::pin(async move { limiter.acquire(&key).await });
        ResponseFuture::acquiring(acquire, inner, req, config)
    }
}

/// The answer when the key is full (or has no key).
pub(crate) fn reject(reason: Reason<'_>, request: &HeaderMap) -> Response<Bytes> {
    #[cfg(feature = "grpc")]
    let grpc = crate::response::is_grpc(request);
    #[cfg(not(feature = "grpc"))]
    let grpc = {
        let _ = request;
        false
    };
    Rejection {
        reason,
        grpc,
        style: HeaderStyle::None,
        now: SystemTime::now(),
    }
    .default_response()
}

/// A "full" decision for the wire formats: `limit` slots, none left.
pub(crate) fn full<K>(config: &Config<K>) -> (Policy, Decision) {
    let limiter = &config.limiter;
    let decision = Decision {
        allowed: false,
        limit: limiter.max(),
        remaining: 0,
        reset_after: config.retry_after,
        retry_after: Some(config.retry_after),
        delay: std::time::Duration::ZERO,
        degraded: false,
    };
    (
        Policy {
            quota: limiter.max(),
            window: config.retry_after,
        },
        decision,
    )
}

pub(crate) fn reject_full<K>(config: &Config<K>, request: &HeaderMap) -> Response<Bytes> {
    let (policy, decision) = full(config);
    let reports = [PolicyReport::new(config.limiter.name(), policy, &decision)];
    reject(Reason::Limited { reports: &reports }, request)
}

impl<S: std::fmt::Debug, K> std::fmt::Debug for ConcurrencyLimit<S, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrencyLimit")
            .field("inner", &self.inner)
            .field("limiter", &self.config.limiter)
            .finish()
    }
}
