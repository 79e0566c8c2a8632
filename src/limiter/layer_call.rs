//! What a layer asks of its limiter for a request ([`LayerCall`]): the
//! layers never see the store's modes.

use super::own::Version;
use super::Outcome;
use super::{ask, reserve, Ask, Limiter, Pending, Plan};
use crate::algorithm::Algorithm;
use crate::store::Mode;

/// What a layer asks of its limiter for a request (the layers never see
/// the store's modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LayerCall {
    /// Charge it now, as `check` does: a decision, counted in the metrics.
    Check,
    /// Charge it now for the earliest time at most this far ahead, as
    /// `reserve` does: a decision, counted in the metrics.
    Reserve(std::time::Duration),
    /// Try it, for a request charged only once its response is known:
    /// decided as a check, nothing written, counted in the metrics (it
    /// admits or denies the request).
    Trial,
    /// Charge what a request owes beyond what its admission charged (a
    /// request only tried whose response matched, or a cost its response
    /// said), whether it fits or not: a debit, not counted again.
    LateCharge,
    /// Give its charge back.
    Refund,
}

impl<A: Algorithm> Limiter<A> {
    /// Start what a layer asks of this limiter for a request (`plan`: its
    /// limits when resolved per request, else the limiter's own in
    /// `version`, as the layer read them; `keys`: each limit's own key,
    /// when the request has several, else empty).
    #[inline(always)]
    pub(crate) fn start_for_layer(
        &self,
        plan: Option<&Plan>,
        version: &Version<A>,
        (key, keys): (&str, &[&str]),
        cost: u64,
        call: LayerCall,
    ) -> Pending<Outcome> {
        let (local, plan) = match plan {
            Some(plan) => (None, plan),
            // Nothing this process keeps follows several keys.
            None if !keys.is_empty() => (None, &version.plan),
            None => (version.local.as_ref(), &version.plan),
        };
        let (mode, counted) = match call {
            LayerCall::Check => (Mode::Check, true),
            LayerCall::Reserve(max_wait) => (reserve::reserving(plan.books_ahead, max_wait), true),
            LayerCall::Trial => (Mode::Peek, true),
            LayerCall::LateCharge => (Mode::Debit, false),
            LayerCall::Refund => (Mode::Refund, false),
        };
        let ask = ask(plan, local, key, cost, mode);
        self.inner.core.run(Ask {
            keys,
            counted,
            ..ask
        })
    }
}
