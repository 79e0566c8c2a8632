use super::layer::Config;
use crate::algorithm::Algorithm;
use crate::key::{KeyExtractor, RequestView};
use crate::layer::answer::RejectionKind;
use crate::layer::body::ResponseBody;
use crate::layer::future::ResponseFuture;
use crate::layer::gate::Gate;
use crate::layer::settle::{Act, Counting, Rule, Settle};
use crate::limiter::Plan;
use crate::store::Mode;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
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
        let view = RequestView::new(&req);
        let cost = config.pricing.of(view);
        let limiter = &config.limiter;
        let plan = config
            .limits_for
            .as_ref()
            .and_then(|f| f(view))
            .map(|a| Arc::new(limiter.plan(&a)));
        let mode = match config.counting {
            // Charged once the response is known: only peek now.
            Counting::OnlyWhen(_) => Mode::Peek,
            _ => Mode::Check,
        };
        let decision = limiter.start(plan.as_deref(), &key, cost, mode);
        let gate = Gate::Rate {
            layer: config.answer.clone(),
            settle: settlement(config, key, cost, plan.clone()),
            plan,
        };
        ResponseFuture::start(&mut self.inner, req, decision, gate)
    }
}

/// What to do with the request's charge once its response is known, if
/// anything can happen to it. The key moves on to it: no copy per request.
fn settlement<K: KeyExtractor, A: Algorithm>(
    config: &Arc<Config<K, A>>,
    key: String,
    cost: u64,
    plan: Option<Arc<Plan>>,
) -> Option<Settle> {
    config
        .counting
        .may_act(config.refund_inner)
        .then(|| Settle {
            rule: config.clone(),
            key,
            cost,
            plan,
        })
}

impl<K: KeyExtractor, A: Algorithm> Rule for Config<K, A> {
    fn settle(
        &self,
        key: &str,
        cost: u64,
        plan: Option<&Plan>,
        status: StatusCode,
        denied_inside: bool,
    ) {
        let Some(act) = self.counting.act(self.refund_inner, status, denied_inside) else {
            return;
        };
        let mode = match act {
            Act::Charge => Mode::Check,
            Act::Refund => Mode::Refund,
        };
        // At once on a store that never waits; else in the background.
        self.limiter
            .start(plan, key, cost, mode)
            .detach("settlement of a charge");
    }
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
