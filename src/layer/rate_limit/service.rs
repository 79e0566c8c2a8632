use super::layer::RateLimitConfig;
use crate::algorithm::Algorithm;
use crate::key::{KeyExtractor, KeyRejection, RequestView};
use crate::layer::body::RejectionBody;
use crate::layer::future;
use crate::layer::future::ResponseFuture;
use crate::layer::gatekeeper::Gatekeeper;
use crate::layer::next::{Next, RateTicket};
use crate::layer::responder::Responder;
use crate::layer::settle::{ResponseHead, Settlement, Terms};
use crate::layer::waiting::{grpc_timeout, Seat};
use crate::limiter::{LayerCall, Outcome, Pending, MAX_DEBIT_PARTS};
use crate::{Error, Limiter};
use http::{HeaderMap, Request, Response};
use smallvec::SmallVec;
use smol_str::SmolStr;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower_service::Service;

/// The middleware [`RateLimitLayer`](super::RateLimitLayer) wraps a service
/// in: each request is charged to its key before `S` sees it.
pub struct RateLimit<S, K, A> {
    inner: S,
    config: Arc<RateLimitConfig<K, A>>,
}

impl<S, K, A> RateLimit<S, K, A> {
    pub(crate) fn new(inner: S, config: Arc<RateLimitConfig<K, A>>) -> Self {
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

    /// The limiter requests are charged to.
    pub fn limiter(&self) -> &Limiter<A> {
        &self.config.limiter
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
    ResBody: RejectionBody,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        ResponseFuture::new(future::call(&mut self.inner, &self.config, req))
    }
}

impl<S: fmt::Debug, K: fmt::Debug, A: fmt::Debug> fmt::Debug for RateLimit<S, K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

// The trait is sealed: its items are reached only through the service's
// `call`, never named outside the crate.
#[allow(private_interfaces)]
impl<K: KeyExtractor, A: Algorithm> Gatekeeper for RateLimitConfig<K, A> {
    type Ticket = RateTicket;

    fn key<'r, B>(&self, req: &'r Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        self.extractor.extract(req)
    }

    fn responder(&self) -> &Responder {
        &self.responder.responder
    }

    fn start<B>(
        this: &Arc<Self>,
        req: &Request<B>,
        key: Cow<'_, str>,
    ) -> (Pending<Outcome>, RateTicket) {
        let view = RequestView::new(req);
        let cost = this.pricing.of(view);
        let limiter = &this.limiter;
        let plan = this
            .limits_for
            .as_ref()
            .and_then(|f| f(view))
            .map(|a| Arc::new(limiter.plan(&a)));
        // The limiter's own limits, read once: decided and reported under them.
        let version = limiter.version();
        let limits = plan.as_deref().unwrap_or(&version.plan);
        let queues = limits.queues;
        // Each limit's own key, when some have one (`key_for`): the
        // extractor found them all before the request got here.
        let owned: Option<Arc<[SmolStr]>> = (!this.limit_keys.is_empty()).then(|| {
            let of = |name: &Arc<str>| match this.extractor.extract_for(name, req) {
                Some(Ok(own)) => SmolStr::new(own),
                _ => SmolStr::new(&key),
            };
            limits.names.iter().map(of).collect()
        });
        let (call, seat) = this.call(req.headers(), &key, queues);
        let decision = match &owned {
            None => limiter.start_for_layer(plan.as_deref(), version, (&key, &[]), cost, call),
            Some(each) => {
                let keys: SmallVec<[&str; 4]> = each.iter().map(SmolStr::as_str).collect();
                limiter.start_for_layer(plan.as_deref(), version, (&key, &keys), cost, call)
            }
        };
        // A request that may wait: its charge goes back if it is dropped
        // before its time.
        let reserved = (queues || matches!(call, LayerCall::Reserve(_))).then(|| {
            let reservation = Settlement {
                terms: this.clone(),
                key: SmolStr::new(&key),
                keys: owned.clone(),
                cost,
                charged: cost,
                plan: plan.clone(),
            };
            Box::new((seat, reservation))
        });
        let ticket = RateTicket {
            reserved,
            generation: version.generation,
            // Kept only when what the request owes can differ from what
            // its admission charged.
            settlement: (this.counting.may_differ(this.refund_inner) || this.actual_cost.is_some())
                .then(|| Settlement {
                    terms: this.clone(),
                    key: SmolStr::new(&key),
                    keys: owned.clone(),
                    cost,
                    charged: this.counting.charged_at_admission(cost),
                    plan: plan.clone(),
                }),
            plan,
        };
        (decision, ticket)
    }

    fn next(
        &self,
        ticket: RateTicket,
        result: Result<Outcome, Error>,
        headers: &HeaderMap,
    ) -> Next {
        let own = self.limiter.version_of(ticket.generation).fields();
        self.responder.next(ticket, own, result, headers)
    }
}

impl<K, A> RateLimitConfig<K, A> {
    /// What to ask of the limiter for a request of `key` with `headers`
    /// (`queues`: its limits hold a leaky bucket), and its seat in the
    /// waiting room if it may wait.
    fn call(&self, headers: &HeaderMap, key: &str, queues: bool) -> (LayerCall, Option<Seat>) {
        // Charged once the response is known: only a trial now.
        if self.counting.only_tried() {
            return (LayerCall::Trial, None);
        }
        if let Some(room) = &self.waiting {
            let deadline = grpc_timeout(headers);
            let max_wait = deadline.map_or(room.max_wait, |d| d.min(room.max_wait));
            return match room.seat(key) {
                Some(seat) => (LayerCall::Reserve(max_wait), Some(seat)),
                // No room: served now or refused.
                None => (LayerCall::Reserve(Duration::ZERO), None),
            };
        }
        // A leaky bucket's place in its queue: never past a gRPC deadline.
        if queues {
            if let Some(deadline) = grpc_timeout(headers) {
                return (LayerCall::Reserve(deadline), None);
            }
        }
        (LayerCall::Check, None)
    }
}

impl<K: KeyExtractor, A: Algorithm> Terms for RateLimitConfig<K, A> {
    fn owed(&self, cost: u64, head: &ResponseHead<'_>) -> u64 {
        let owed = self.counting.owed(cost, self.refund_inner, head);
        // What the response says it cost, when it counts at all.
        match &self.actual_cost {
            Some(actual) if owed > 0 => actual.read(head.headers, head.extensions).unwrap_or(owed),
            _ => owed,
        }
    }

    fn awaited_trailer(&self, head: &HeaderMap) -> Option<http::HeaderName> {
        self.actual_cost.as_ref()?.awaited_trailer(head).cloned()
    }

    fn adjust(&self, settlement: &Settlement, more: i128) {
        let (call, cost) = if more > 0 {
            (LayerCall::LateCharge, more)
        } else {
            (LayerCall::Refund, -more)
        };
        let cost = u64::try_from(cost).unwrap_or(u64::MAX);
        // Under the limiter's own limits as they are now; at once on a
        // store that never waits, else in the background. A charge larger
        // than the largest limit goes in parts of it (a larger cost would
        // be clamped), at most `MAX_DEBIT_PARTS`: as `Limiter::debit`.
        let version = self.limiter.version();
        let (plan, key) = (settlement.plan.as_deref(), &*settlement.key);
        let keys: SmallVec<[&str; 4]> = settlement
            .keys
            .iter()
            .flat_map(|k| k.iter().map(SmolStr::as_str))
            .collect();
        let part = plan
            .unwrap_or(&version.plan)
            .cost_cap
            .saturating_sub(1)
            .max(1);
        let mut left = cost.min(part.saturating_mul(MAX_DEBIT_PARTS));
        loop {
            self.limiter
                .start_for_layer(plan, version, (key, &keys), left.min(part), call)
                .detach("settlement of a charge");
            left -= left.min(part);
            if left == 0 {
                break;
            }
        }
    }
}
