//! A decision under way: the store's future inside the guard, and a plan's
//! limits in shadow mode.

use super::core::{Ask, Core};
use super::outcome::{Finish, Outcome};
use crate::algorithm::Spec;
use crate::failure::Call;
use crate::pending::Pending;
use crate::store::{Batch, StoreFuture};
use smallvec::SmallVec;
use smol_str::SmolStr;
use std::future::Future;
use std::sync::Arc;
use tracing::Instrument;

impl Core {
    /// A decision under way: the store's future inside the guard (and
    /// `span`, if any), owning what the failure policy needs.
    #[inline(never)]
    pub(super) fn later<F: Finish>(
        self: &Arc<Self>,
        store: StoreFuture,
        span: Option<tracing::Span>,
        ask: &Ask<'_>,
        batch: &Batch<'_>,
        asked: Option<u64>,
        finish: F,
    ) -> Pending<F::Output> {
        let counted = ask.counted;
        let shadow = (ask.plan.shadowed != 0).then(|| (ask.plan.shadowed, ask.plan.names.clone()));
        let specs: SmallVec<[Spec; 1]> = batch.targets.iter().map(|t| t.spec).collect();
        // Inline up to 23 bytes: a usual key costs no allocation.
        let (key, lease) = (SmolStr::new(batch.key), SmolStr::new(batch.lease));
        // The failure policy answers for the request's cost, not a slice.
        let (mode, cost, core) = (batch.mode, batch.cost - ask.slice, self.clone());
        // The deny cache of the limits this decision started with, if asked.
        let local = asked
            .and(ask.local)
            .filter(|l| l.deny_cache.is_some())
            .cloned();
        let decision = async move {
            let started = crate::clock::ticks();
            let call = Call {
                limiter: &core.name,
                specs: &specs,
                key: &key,
                cost,
                mode,
                lease: &lease,
                store: &core.store,
            };
            let each = core.guard.call(store, &call).await;
            core.metrics
                .timed(crate::clock::ticks().saturating_duration_since(started));
            let mut outcome = Outcome::of(each?)?;
            if let Some((mask, names)) = &shadow {
                outcome = core.shadowed(outcome, *mask, counted.then_some(&names[..]));
            }
            let cache = local.as_ref().and_then(|l| l.deny_cache.as_ref());
            core.record(mode, counted, &key, cost, cache, asked, &outcome);
            Ok(finish.finish(outcome))
        };
        Pending::later(boxed(decision, span))
    }

    /// `outcome` with the limits of `mask` in shadow mode, their would-be
    /// denials counted when `names` are given.
    #[inline(never)]
    pub(super) fn shadowed(
        &self,
        outcome: Outcome,
        mask: u16,
        names: Option<&[Arc<str>]>,
    ) -> Outcome {
        let outcome = outcome.shadowed(mask);
        if let Some(names) = names {
            for i in outcome.shadow_denials() {
                if let Some(name) = names.get(i) {
                    self.metrics.shadow_denial(name);
                }
            }
        }
        outcome
    }
}

/// A decision under way, boxed: it owns the store's future and what the
/// failure policy needs. Inside `span` only when a debug listener made one
/// (`Instrumented` costs every poll something).
fn boxed<T>(
    decision: impl Future<Output = Result<T, crate::Error>> + Send + 'static,
    span: Option<tracing::Span>,
) -> crate::pending::LaterFuture<T> {
    match span {
        None => Box::pin(decision),
        Some(span) => Box::pin(decision.instrument(span)),
    }
}
