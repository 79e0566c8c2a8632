use super::layer::Config;
use crate::algorithm::Algorithm;
use crate::key::{KeyExtractor, KeyRejection, RequestView};
use crate::layer::answer::Answer;
use crate::layer::gate::Gate;
use crate::layer::service::{Gatekeeper, Limit};
use crate::layer::settle::{Act, Charge, Counting, Rule, Settle};
use crate::limiter::{Decided, Pending};
use crate::store::Mode;
use http::{Request, StatusCode};
use std::sync::Arc;

/// The middleware [`RateLimitLayer`](super::RateLimitLayer) wraps a service in.
pub type RateLimit<S, K, A> = Limit<S, Config<K, A>>;

// The trait is sealed: its items are reached only through `Limit`'s
// `Service` impl, never named outside the crate.
#[allow(private_interfaces)]
impl<K: KeyExtractor, A: Algorithm> Gatekeeper for Config<K, A> {
    fn key<B>(&self, req: &Request<B>) -> Result<String, KeyRejection> {
        self.extractor.extract(req)
    }

    fn answer(&self) -> &Answer {
        &self.answer.answer
    }

    fn start<B>(this: &Arc<Self>, req: &Request<B>, key: String) -> (Pending<Decided>, Gate) {
        let view = RequestView::new(req);
        let cost = this.pricing.of(view);
        let limiter = &this.limiter;
        let plan = this
            .limits_for
            .as_ref()
            .and_then(|f| f(view))
            .map(|a| Arc::new(limiter.plan(&a)));
        let mode = match this.counting {
            // Charged once the response is known: only peek now.
            Counting::OnlyWhen(_) => Mode::Peek,
            _ => Mode::Check,
        };
        let decision = limiter.start(plan.as_deref(), &key, cost, mode);
        let gate = Gate::Rate {
            layer: this.answer.clone(),
            settle: this.counting.may_act(this.refund_inner).then(|| Settle {
                rule: this.clone(),
                charge: Charge {
                    key,
                    cost,
                    plan: plan.clone(),
                },
            }),
            plan,
        };
        (decision, gate)
    }
}

impl<K: KeyExtractor, A: Algorithm> Rule for Config<K, A> {
    fn settle(&self, charge: &Charge, status: StatusCode, denied_inside: bool) {
        let Some(act) = self.counting.act(self.refund_inner, status, denied_inside) else {
            return;
        };
        let mode = match act {
            Act::Charge => Mode::Check,
            Act::Refund => Mode::Refund,
        };
        // At once on a store that never waits; else in the background.
        let plan = charge.plan.as_deref();
        self.limiter
            .start(plan, &charge.key, charge.cost, mode)
            .detach("settlement of a charge");
    }
}
