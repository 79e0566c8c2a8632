//! What happens to a request's charge once its response is known: one
//! settlement. The layer charges a request when it admits it (its cost, or
//! nothing for a request only tried); once the response's head is known the
//! request owes what the layer's counting says, and the difference is
//! charged or given back. `refund_when`, `count_only_when`,
//! `refund_inner_denials` and a cost the response says (`actual_cost`)
//! are cases of what a request owes. A cost said in a trailer is known
//! only when the body ends: the settlement then rides on the body
//! (`settle_at_end.rs`).

use super::predicate::StatusPredicate;
use crate::limiter::Plan;
use http::{Extensions, HeaderMap, HeaderName, StatusCode};
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

/// What an admitted request owes once its response is known, as the layer
/// is configured.
#[derive(Clone, Default)]
pub(crate) enum Counting {
    /// Its cost (the default).
    #[default]
    Always,
    /// Its cost, or nothing when the response's status matches.
    RefundWhen(StatusFn),
    /// Nothing, or its cost when the response's status matches: until then
    /// the layer only tries the request (its decision charges nothing).
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

impl Counting {
    /// Whether a request is only tried when admitted (charged nothing
    /// until its response is known).
    pub(crate) fn only_tried(&self) -> bool {
        matches!(self, Counting::OnlyWhen(_))
    }

    /// What admitting a request of cost `cost` charges: its cost, or
    /// nothing when it is only tried.
    pub(crate) fn charged_at_admission(&self, cost: u64) -> u64 {
        if self.only_tried() {
            0
        } else {
            cost
        }
    }

    /// What a request of cost `cost` owes once its response's head is
    /// `head`; `refund_inner`: an inner limit's denial makes it owe nothing.
    pub(crate) fn owed(&self, cost: u64, refund_inner: bool, head: &ResponseHead<'_>) -> u64 {
        let (status, denied_inside) = (head.status, head.denied_inside());
        let free = match self {
            Counting::Always => refund_inner && denied_inside,
            Counting::RefundWhen(f) => f.matches(status) || (refund_inner && denied_inside),
            Counting::OnlyWhen(f) => !f.matches(status) || denied_inside,
        };
        if free {
            0
        } else {
            cost
        }
    }

    /// Whether what a request owes can differ from what its admission
    /// charged: else no settlement is kept for its response.
    pub(crate) fn may_differ(&self, refund_inner: bool) -> bool {
        !matches!(self, Counting::Always) || refund_inner
    }
}

/// An admitted request's charge, to settle once its response is known:
/// called at most once per request.
pub(crate) struct Settlement {
    /// The layer's side: what the request owes and how a difference is
    /// charged, free of the layer's type parameters.
    pub(crate) terms: Arc<dyn Terms>,
    pub(crate) key: SmolStr,
    /// Each limit's own key, when the request has several
    /// ([`RateLimitLayer::key_for`](super::RateLimitLayer::key_for)).
    pub(crate) keys: Option<Arc<[SmolStr]>>,
    /// The request's cost.
    pub(crate) cost: u64,
    /// What its admission charged (`cost`, or 0 for a request only tried).
    pub(crate) charged: u64,
    /// The limits resolved for this request, if any (else the limiter's own).
    pub(crate) plan: Option<Arc<Plan>>,
}

/// What a settlement reads of a response: its head.
pub(crate) struct ResponseHead<'a> {
    pub(crate) status: StatusCode,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) extensions: &'a Extensions,
}

impl ResponseHead<'_> {
    /// Whether a limit inside the layer denied the request.
    fn denied_inside(&self) -> bool {
        self.extensions.get::<DeniedByLimit>().is_some()
    }
}

/// What a layer settles requests by.
pub(crate) trait Terms: Send + Sync {
    /// What a request of cost `cost` owes once its response's head is
    /// known.
    fn owed(&self, cost: u64, head: &ResponseHead<'_>) -> u64;
    /// Charge `more` to the request of `settlement` (`more > 0`), or give
    /// `-more` back.
    fn adjust(&self, settlement: &Settlement, more: i128);
    /// The trailer that will say what the request cost, when its
    /// response's head (`head`, its fields) does not.
    fn awaited_trailer(&self, head: &HeaderMap) -> Option<HeaderName>;
}

impl Settlement {
    /// What the request owes, its response's head being known.
    pub(crate) fn owed(&self, head: &ResponseHead<'_>) -> u64 {
        self.terms.owed(self.cost, head)
    }

    /// The trailer that will say what the request cost, if its response's
    /// head does not say it and the layer reads one
    /// ([`ActualCost::Trailer`](super::ActualCost::Trailer)).
    pub(crate) fn awaited_trailer(&self, head: &HeaderMap) -> Option<HeaderName> {
        self.terms.awaited_trailer(head)
    }

    /// Whether the request was only tried (its admission charged nothing
    /// though it has a cost): until settled, its decision assumed its cost
    /// charged.
    pub(crate) fn is_trial(&self) -> bool {
        self.charged < self.cost
    }

    /// Settle at `owed`: charge or give back the difference from what the
    /// admission charged, if any.
    pub(crate) fn settle(self, owed: u64) {
        let more = i128::from(owed) - i128::from(self.charged);
        if more != 0 {
            self.terms.adjust(&self, more);
        }
    }
}
