//! The steps of the decision path for a hot key: the allotment answers,
//! or a store call of the same path decides the request and takes a slice.

use super::{AllotmentStep, Allotments, TakeDone};
use crate::limiter::core::{Ask, Core};
use crate::limiter::outcome::{AsOutcome, Finish};
use crate::pending::Pending;
use crate::store::Mode;
use std::sync::Arc;

impl Core {
    /// A check of the limiter's own limits when it has hot keys: the deny
    /// cache, then the key's allotment, then the store (taking a slice
    /// beside the request when the key is hot).
    #[inline(never)]
    pub(crate) fn allotted<F: Finish>(
        self: &Arc<Self>,
        table: &Allotments,
        ask: &Ask<'_>,
        cost: u64,
        finish: F,
    ) -> Pending<F::Output> {
        match self.allotted_step(table, ask, cost, finish) {
            Ok(decided) => decided,
            Err((done, finish)) => self.after_take(ask, cost, done, finish),
        }
    }

    /// [`allotted`](Self::allotted), or the take under way to wait for
    /// first (with `finish` back).
    fn allotted_step<F: Finish>(
        self: &Arc<Self>,
        table: &Allotments,
        ask: &Ask<'_>,
        cost: u64,
        finish: F,
    ) -> Result<Pending<F::Output>, (TakeDone, F)> {
        let now = self.local_now();
        let cache = ask.local.and_then(|l| l.deny_cache.as_ref());
        if let Some(cache) = cache {
            if let Some(hit) = cache.get(ask.key, cost, now) {
                self.metrics.cache_hit(&hit.overall());
                return Ok(Pending::ready(Ok(finish.finish(hit))));
            }
        }
        let (step, give_back) = table.step(ask.key, cost, now);
        if give_back > 0 {
            let refund = Ask {
                mode: Mode::Refund,
                counted: false,
                ..*ask
            };
            if let Some(cache) = cache {
                cache.forget(ask.key);
            }
            self.decide(&refund, give_back, None, AsOutcome)
                .detach("return of an allotment's unused units");
        }
        // Within every limit's largest cost, so the numbers stay exact.
        let fits = |want: u64| {
            ask.plan
                .targets
                .iter()
                .all(|t| cost + want <= t.spec.max_cost())
        };
        Ok(match step {
            AllotmentStep::Local(outcome) => {
                if ask.counted {
                    table.counted_local();
                }
                let (mode, counted) = (ask.mode, ask.counted);
                self.record(mode, counted, ask.key, cost, cache, Some(now), &outcome);
                Pending::ready(Ok(finish.finish(outcome)))
            }
            AllotmentStep::Take { want, id } if fits(want) => {
                self.take(ask, cost, (want, id), now, finish)
            }
            AllotmentStep::Take { id, .. } => {
                table.took_none(ask.key, id);
                self.decide(ask, cost, Some(now), finish)
            }
            AllotmentStep::Wait(done) => return Err((done, finish)),
            AllotmentStep::Store => self.decide(ask, cost, Some(now), finish),
        })
    }

    /// Once the take under way for the key is over (or the limiter's
    /// timeout has passed), ask again: most often the new slice decides;
    /// if another take is under way by then, wait for that one (a loop,
    /// not a future inside a future).
    fn after_take<F: Finish>(
        self: &Arc<Self>,
        ask: &Ask<'_>,
        cost: u64,
        done: TakeDone,
        finish: F,
    ) -> Pending<F::Output> {
        // The limits this decision started with, whatever changes meanwhile.
        let (core, local, key) = (self.clone(), ask.local.cloned(), ask.key.to_owned());
        let (mode, counted) = (ask.mode, ask.counted);
        let decision = async move {
            let Some((local, table)) = local
                .as_ref()
                .and_then(|l| Some((l, l.allotments.as_ref()?)))
            else {
                return Err(crate::limiter::outcome::none());
            };
            let ask = Ask {
                plan: &local.plan,
                local: Some(local),
                key: &key,
                keys: &[],
                cost,
                mode,
                counted,
                lease: "",
                slice: 0,
            };
            let (mut done, mut finish) = (done, finish);
            loop {
                let _ = tokio::time::timeout(table.wait, done).await;
                match core.allotted_step(table, &ask, cost, finish) {
                    Ok(decided) => return decided.await,
                    Err((next, back)) => (done, finish) = (next, back),
                }
            }
        };
        Pending::later(Box::pin(decision))
    }

    /// Decide the request and take `want` more units for its key in one
    /// store call (take `id`); if that is denied, take what is left, or
    /// decide the request alone.
    fn take<F: Finish>(
        self: &Arc<Self>,
        ask: &Ask<'_>,
        cost: u64,
        (want, id): (u64, u64),
        now: u64,
        finish: F,
    ) -> Pending<F::Output> {
        let (core, local, key) = (self.clone(), ask.local.cloned(), ask.key.to_owned());
        let counted = ask.counted;
        let decision = async move {
            let Some((local, table)) = local
                .as_ref()
                .and_then(|l| Some((l, l.allotments.as_ref()?)))
            else {
                return Err(crate::limiter::outcome::none());
            };
            // Ends the take however this future ends (given up included).
            let _over = TakeOver {
                table,
                key: &key,
                id,
            };
            let mut ask = Ask {
                plan: &local.plan,
                local: Some(local),
                key: &key,
                keys: &[],
                cost,
                mode: Mode::Check,
                // Counted once, as the request's decision.
                counted: false,
                lease: "",
                slice: want,
            };
            let mut taken = core.decide(&ask, cost, None, AsOutcome).await?;
            if !taken.overall().allowed() && !taken.reason_and_degraded().1 {
                // No room for the whole slice: take what the store says is
                // left (a race may leave less: then the request alone).
                let left = taken.each().map(|d| d.remaining()).min().unwrap_or(0);
                if left <= cost {
                    // Decided alone; the next requests here are denied
                    // until a slice fits again (as if another server held
                    // it), not one call each.
                    let decided = alone(&core, &ask, counted, now, finish).await;
                    table.drained(&key, id, now, &taken);
                    return decided;
                }
                ask.slice = (left - cost).min(want);
                taken = core.decide(&ask, cost, None, AsOutcome).await?;
            }
            let (allowed, degraded) = (taken.overall().allowed(), taken.reason_and_degraded().1);
            let outcome = if allowed && !degraded {
                table.fill(&key, id, ask.slice, now, &taken);
                taken.map_each(|d| d.with_remaining(d.remaining() + ask.slice))
            } else if degraded {
                taken // The failure policy's answer for the request.
            } else {
                return alone(&core, &ask, counted, now, finish).await;
            };
            let cache = local.deny_cache.as_ref();
            core.record(Mode::Check, counted, &key, cost, cache, Some(now), &outcome);
            Ok(finish.finish(outcome))
        };
        Pending::later(Box::pin(decision))
    }
}

/// The request alone, counted as `counted` says (after a take found no
/// room): its denial goes to the deny cache before the take ends, so the
/// requests waiting for the take find it there.
async fn alone<F: Finish>(
    core: &Arc<Core>,
    ask: &Ask<'_>,
    counted: bool,
    now: u64,
    finish: F,
) -> Result<F::Output, crate::Error> {
    let alone = Ask {
        slice: 0,
        counted,
        ..*ask
    };
    let decided = core.decide(&alone, ask.cost, Some(now), AsOutcome);
    decided.await.map(|o| finish.finish(o))
}

/// Ends a take when dropped: without a slice, unless it was filled.
struct TakeOver<'a> {
    table: &'a Allotments,
    key: &'a str,
    id: u64,
}

impl Drop for TakeOver<'_> {
    fn drop(&mut self) {
        self.table.took_none(self.key, self.id);
    }
}
