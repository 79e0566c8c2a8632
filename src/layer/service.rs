use super::body::RateLimitBody;
use super::future::ResponseFuture;
use super::future::{Next, Verdict};
use super::layer::Config;
use super::rejection::Reason;
use super::settle::{spawn, Act, Counting, Rule, Settle};
use crate::algorithm::Algorithm;
use crate::key::{KeyExtractor, RequestView};
use crate::store::Store;
use crate::Error;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
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
        let config = &self.config;
        let answer = &config.answer;
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
        if let Some(result) = decide_now(config, &key, cost, quota.as_ref()) {
            // Decided at once: call the service that reported ready, as a
            // synchronous tower-http middleware does (no clone, no box).
            let settle = settlement(config.clone(), key, cost, quota);
            return match Next::of(result, settle, answer, req.headers()) {
                Next::Reject(response) => ResponseFuture::done(response),
                Next::Call(admitted) => ResponseFuture::calling(self.inner.call(req), admitted),
                Next::Delay(delay, admitted) => {
                    ResponseFuture::delaying(delay, self.take_ready(), req, admitted)
                }
            };
        }
        let answer = answer.clone();
        let config = config.clone();
        let decision = Box::pin(async move {
            let verdict = decide(&config, &key, cost, quota.as_ref()).await;
            // The key moves on to the settlement: no copy per request.
            (verdict, settlement(config, key, cost, quota))
        });
        ResponseFuture::deciding(decision, self.take_ready(), req, answer)
    }
}

impl<S: Clone, K, A> RateLimit<S, K, A> {
    /// The service that reported ready, leaving a clone for the next
    /// `poll_ready`: the request reaches it later (tower-http's async
    /// middlewares do the same).
    fn take_ready(&mut self) -> S {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }
}

/// The decision, when the store gives it without waiting: the memory store
/// does (it holds a plain mutex, never awaits), so its decision needs
/// neither a boxed future nor a clone of the service.
fn decide_now<K, A: Algorithm>(
    config: &Config<K, A>,
    key: &str,
    cost: u64,
    quota: Option<&A>,
) -> Option<Result<Verdict, Error>> {
    if !matches!(config.limiter.store(), Store::Memory(_)) {
        return None;
    }
    let decision = pin!(decide(config, key, cost, quota));
    match decision.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => Some(result),
        // Not reached (`memory_decisions_do_not_wait` below keeps it so).
        // Were it reached, the store would be asked again, as a future.
        Poll::Pending => None,
    }
}

async fn decide<K, A: Algorithm>(
    config: &Config<K, A>,
    key: &str,
    cost: u64,
    quota: Option<&A>,
) -> Result<Verdict, Error> {
    let limiter = &config.limiter;
    let peek_only = matches!(config.counting, Counting::OnlyWhen(_));
    if quota.is_none() && !peek_only && config.answer.single.is_some() {
        // One policy: its decision is the combined one, and its name and
        // quota are known, so no `Decisions` (and its `Vec`) is built.
        return limiter.check(key, cost).await.map(Verdict::One);
    }
    let decisions = limiter
        .decide_for_layer(key, cost, quota, peek_only)
        .await?;
    Ok(Verdict::All {
        decisions,
        own: quota.is_none(),
    })
}

/// What to do with the request's charge once its response is known, if
/// anything can happen to it.
fn settlement<K: KeyExtractor, A: Algorithm>(
    config: Arc<Config<K, A>>,
    key: String,
    cost: u64,
    quota: Option<A>,
) -> Option<Settle> {
    if !config.counting.may_act(config.refund_inner) {
        return None;
    }
    Some(match quota {
        None => Settle::Own {
            rule: config,
            key,
            cost,
        },
        Some(quota) => Settle::Quota(Box::new(move |status, denied_inside| {
            config.settle_with(key, cost, Some(quota), status, denied_inside)
        })),
    })
}

impl<K, A: Algorithm> Config<K, A> {
    fn settle_with(
        &self,
        key: String,
        cost: u64,
        quota: Option<A>,
        status: StatusCode,
        denied_inside: bool,
    ) {
        let Some(act) = self.counting.act(self.refund_inner, status, denied_inside) else {
            return;
        };
        let limiter = self.limiter.clone();
        spawn(async move {
            let _ = match act {
                Act::Charge => limiter.charge_for_layer(&key, cost, quota.as_ref()).await,
                Act::Refund => limiter.refund_for_layer(&key, cost, quota.as_ref()).await,
            };
        });
    }
}

impl<K: KeyExtractor, A: Algorithm> Rule for Config<K, A> {
    fn settle(&self, key: String, cost: u64, status: StatusCode, denied_inside: bool) {
        self.settle_with(key, cost, None, status, denied_inside);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Gcra, LeakyBucket, Limits, SlidingLog};
    use crate::clock::ManualClock;
    use crate::key::Global;
    use crate::layer::RateLimitLayer;
    use crate::store::MemoryStore;
    use crate::Limiter;
    use std::time::Duration;

    fn ready_at_once<A: Algorithm>(layer: RateLimitLayer<Global, A>, quota: Option<&A>) {
        for cost in [0, 1, 5, u64::MAX] {
            let config = &layer.config;
            let result = decide_now(config, "k", cost, quota);
            assert!(matches!(result, Some(Ok(_))), "cost {cost}");
        }
    }

    /// `decide_now` relies on the memory store never waiting, in every
    /// configuration the layer can ask it in.
    #[test]
    fn memory_decisions_do_not_wait() {
        let gcra = Gcra::new(3, Duration::from_secs(1));
        let plain = Limiter::new(MemoryStore::new(), gcra);
        ready_at_once(RateLimitLayer::new(plain.clone(), Global::new()), None);
        ready_at_once(
            RateLimitLayer::new(plain.clone(), Global::new()),
            Some(&gcra),
        );
        let peek = RateLimitLayer::new(plain, Global::new()).count_only_when(|s| s.is_success());
        ready_at_once(peek, None);

        let cached = Limiter::builder(MemoryStore::new(), gcra)
            .deny_cache(100)
            .clock(ManualClock::new(0))
            .build()
            .unwrap();
        ready_at_once(RateLimitLayer::new(cached, Global::new()), None);

        let limits = Limits::new()
            .with("burst", gcra)
            .with("log", SlidingLog::new(10, Duration::from_secs(60)));
        let several = Limiter::builder(MemoryStore::new(), limits.clone())
            .deny_cache(100)
            .build()
            .unwrap();
        ready_at_once(RateLimitLayer::new(several.clone(), Global::new()), None);
        ready_at_once(RateLimitLayer::new(several, Global::new()), Some(&limits));

        let leaky = Limiter::new(MemoryStore::new(), LeakyBucket::new(2, 1.0));
        ready_at_once(RateLimitLayer::new(leaky, Global::new()), None);
    }
}
