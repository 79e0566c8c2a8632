//! What happens to a request's charge once its response is known.

use super::predicate::StatusPredicate;
use crate::limiter::Plan;
use http::StatusCode;
use smol_str::SmolStr;
use std::fmt;
use std::sync::Arc;

/// Put on every response the layer answers by itself because a policy
/// denied the request. An outer [`RateLimitLayer`](super::RateLimitLayer)
/// that charged the same request gives its charge back when it sees this
/// (see [`RateLimitLayer::refund_inner_denials`](super::RateLimitLayer::refund_inner_denials)),
/// so stacking limits (per API key inside a global one, per user inside
/// per IP) charges nothing where a later limit denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeniedByLimit;

pub(crate) type StatusFn = Arc<dyn StatusPredicate>;

/// Which requests are charged.
#[derive(Clone, Default)]
pub(crate) enum Counting {
    /// Every admitted request (the default).
    #[default]
    Always,
    /// Every admitted request, refunded when its status matches.
    RefundWhen(StatusFn),
    /// Only requests whose response status matches, charged once the
    /// response is known; before that the layer only peeks.
    OnlyWhen(StatusFn),
}

impl fmt::Debug for Counting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Counting::Always => "Always",
            Counting::RefundWhen(_) => "RefundWhen(..)",
            Counting::OnlyWhen(_) => "OnlyWhen(..)",
        })
    }
}

/// What to do with an admitted request's charge once its status is known:
/// called at most once per request. The layer's configuration knows what to
/// do (its [`Rule`]); the request brings its charge.
pub(crate) struct Settle {
    pub(crate) rule: Arc<dyn Rule>,
    pub(crate) charge: Charge,
}

/// What a request was charged: its key, its cost and, for limits resolved
/// for it, their plan.
pub(crate) struct Charge {
    pub(crate) key: SmolStr,
    pub(crate) cost: u64,
    pub(crate) plan: Option<Arc<Plan>>,
}

impl Settle {
    /// What the response's `status` (and whether an inner limit denied the
    /// request) does to the charge.
    pub(crate) fn act(&self, status: StatusCode, denied_inside: bool) -> Option<Act> {
        self.rule.act(status, denied_inside)
    }

    /// Whether the request was only tried, to be charged if its response
    /// counts: until then its decision assumed its cost charged.
    pub(crate) fn charges_late(&self) -> bool {
        self.rule.charges_late()
    }

    /// Settle the charge as `act` says.
    pub(crate) fn run(self, act: Act) {
        self.rule.apply(&self.charge, act);
    }
}

/// The layer's side of a [`Settle`], free of its type parameters.
pub(crate) trait Rule: Send + Sync {
    /// What a response does to a charge.
    fn act(&self, status: StatusCode, denied_inside: bool) -> Option<Act>;
    /// Whether requests are charged only once their response is known
    /// (their decision was a trial).
    fn charges_late(&self) -> bool;
    /// Do `act` to `charge`.
    fn apply(&self, charge: &Charge, act: Act);
}

/// What happens to a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    Charge,
    Refund,
}

impl Counting {
    /// Whether any response can change the charge: else nothing needs to be
    /// kept for the response.
    pub(crate) fn may_act(&self, refund_inner: bool) -> bool {
        !matches!(self, Counting::Always) || refund_inner
    }

    /// What the response's `status` (and whether an inner limit denied the
    /// request) does to its charge.
    pub(crate) fn act(
        &self,
        refund_inner: bool,
        status: StatusCode,
        denied_inside: bool,
    ) -> Option<Act> {
        match self {
            Counting::OnlyWhen(f) => (f.matches(status) && !denied_inside).then_some(Act::Charge),
            Counting::Always => (refund_inner && denied_inside).then_some(Act::Refund),
            Counting::RefundWhen(f) => {
                (f.matches(status) || (refund_inner && denied_inside)).then_some(Act::Refund)
            }
        }
    }
}
