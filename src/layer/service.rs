use super::body::RateLimitBody;
use super::future::ResponseFuture;
use super::layer::Config;
use super::rejection::Reason;
use super::settle::{spawn, Counting, Settle};
use crate::algorithm::Algorithm;
use crate::key::{KeyExtractor, RequestView};
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// The middleware [`RateLimitLayer`](super::RateLimitLayer) wraps a service in.
pub struct RateLimit<S, K, A> {
    inner: S,
    config: Arc<Config<K, A>>,
}

impl<S, K, A> RateLimit<S, K, A> {
    pub(crate) fn new(inner: S, config: Arc<Config<K, A>>) -> Self {
        Self { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Clone, K, A> Clone for RateLimit<S, K, A> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S, K, A, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S, K, A>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    K: KeyExtractor,
    A: Algorithm,
    ResBody: Body<Data = Bytes>,
{
    type Response = Response<RateLimitBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        // `self.inner` is the service that reported ready. The decision is
        // async, so the request reaches the service later: take the ready one
        // along and leave a clone for the next `poll_ready` (tower-http's
        // async middlewares do the same).
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let config = &self.config;
        let answer = config.answer.clone();
        let key = match config.extractor.extract(&req) {
            Ok(key) => key,
            Err(rejection) => {
                let response = answer.reject(Reason::NoKey(&rejection), req.headers());
                return ResponseFuture::done(response);
            }
        };
        let view = RequestView::new(&req);
        let cost = config.pricing.of(view);
        let quota = config.quota.as_ref().and_then(|f| f(view));
        let settle = settlement(config, &key, cost, quota.clone());
        let limiter = config.limiter.clone();
        let peek_only = matches!(config.counting, Counting::OnlyWhen(_));
        let decision = Box::pin(async move {
            limiter
                .decide_for_layer(&key, cost, quota.as_ref(), peek_only)
                .await
        });
        ResponseFuture::deciding(decision, inner, req, answer, settle)
    }
}

/// What to do with the request's charge once its response is known, if
/// anything can happen to it.
fn settlement<K, A: Algorithm>(
    config: &Config<K, A>,
    key: &str,
    cost: u64,
    quota: Option<A>,
) -> Option<Settle> {
    let refund_when = match &config.counting {
        Counting::Always if !config.refund_inner => return None,
        Counting::Always => None,
        Counting::RefundWhen(f) => Some(f.clone()),
        Counting::OnlyWhen(f) => {
            let (f, limiter, key) = (f.clone(), config.limiter.clone(), key.to_string());
            return Some(Box::new(move |status, denied_inside| {
                if f(status) && !denied_inside {
                    spawn(async move {
                        let _ = limiter.charge_for_layer(&key, cost, quota.as_ref()).await;
                    });
                }
            }));
        }
    };
    let (refund_inner, limiter, key) =
        (config.refund_inner, config.limiter.clone(), key.to_string());
    Some(Box::new(move |status, denied_inside| {
        let matches = refund_when.is_some_and(|f| f(status));
        if matches || (refund_inner && denied_inside) {
            spawn(async move {
                let _ = limiter.refund_for_layer(&key, cost, quota.as_ref()).await;
            });
        }
    }))
}

impl<S: fmt::Debug, K: fmt::Debug, A: fmt::Debug> fmt::Debug for RateLimit<S, K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("limiter", &self.config.limiter)
            .field("extractor", &self.config.extractor)
            .finish()
    }
}
