//! The one decision path. Every entry of every limiter (`check`,
//! `check_all`, `check_with`, `peek`, `refund`, `refund_with`, the layers,
//! a concurrency limiter's `acquire`, `peek` and releases) comes here:
//!
//! plan (limits → store targets; the limiter's own as the call read them,
//! once, as it started: `own.rs`; exemptions: a listed key is answered
//! here) → deny cache → hot key's allotment
//! (`allotments/`, with `HotKeys`) → store → guard (timeout, breaker,
//! failure policy) → combine → deny cache → metrics.
//!
//! A store that never waits (memory) answers at once, and the decision is
//! ready before `run` returns: no future, no timeout, no breaker (it cannot
//! fail). Any other store answers with a future, which the guard bounds.

use super::deny_cache::DenyCache;
use super::exemptions::Exemptions;
use super::hot_keys::HotKeys;
use super::outcome::Outcome;
use super::outcome::{AsOutcome, Finish};
use super::own::Local;
use super::plan::Plan;
use crate::algorithm::Reply;
use crate::clock::Clock;
use crate::failure::Guard;
use crate::metrics::Metrics;
use crate::pending::Pending;
use crate::store::{Answer, Batch, Mode, Store};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

/// A limiter apart from its limits: shared by its clones and decisions.
pub(crate) struct Core {
    pub(crate) store: Store,
    pub(crate) name: Arc<str>,
    pub(crate) prefix: Box<str>,
    pub(crate) clock: Option<Arc<dyn Clock>>,
    pub(crate) guard: Guard,
    pub(crate) metrics: Metrics,
    /// How many denials each set of the limiter's own limits remembers
    /// (`Local::deny_cache`), if it has a deny cache.
    pub(crate) deny_cache: Option<NonZeroUsize>,
    /// Hot keys decided from allotments (`Local::allotments`), for the own
    /// limits.
    pub(crate) hot_keys: Option<HotKeys>,
    /// The timeout: how long a request waits for a hot key's slice.
    pub(crate) wait: Duration,
    /// Keys never limited and keys always refused, when given.
    pub(crate) exemptions: Option<Exemptions>,
}

/// One call of the path.
#[derive(Clone, Copy)]
pub(crate) struct Ask<'a> {
    pub(crate) plan: &'a Plan,
    /// What this process keeps under the limiter's own limits (the deny
    /// cache, the hot keys), when `plan` is theirs and it keeps anything
    /// (`None` too for limits of this call only: those are not kept).
    pub(crate) local: Option<&'a Arc<Local>>,
    pub(crate) key: &'a str,
    /// Each limit's own key, when a call decides several keys (else
    /// empty: every limit has `key`, the first of `keys` otherwise).
    pub(crate) keys: &'a [&'a str],
    pub(crate) cost: u64,
    pub(crate) mode: Mode,
    /// The decision gates a request (a check, or the layer's trial of a
    /// request charged only after its response): the metrics count it.
    pub(crate) counted: bool,
    /// The lease a concurrency limiter acquires or releases (else empty).
    pub(crate) lease: &'a str,
    /// Units taken beside the cost for this server's allotment of a hot
    /// key (else 0): charged with it, all or nothing; the failure policy
    /// answers for the cost alone.
    pub(crate) slice: u64,
}

impl Core {
    /// The time of a decision: the limiter's clock, or `None` for the store's.
    #[inline]
    fn now(&self) -> Option<u64> {
        self.clock
            .as_ref()
            .map(|c| crate::clock::bounded(c.now_ms()))
    }

    /// Decide `ask`.
    // The steps a memory-store decision takes are inlined here, and the rest
    // (the deny cache, a debug span, a decision under way) is out of line:
    // the whole decision takes ~65 ns.
    #[inline(always)]
    pub(crate) fn run(self: &Arc<Self>, ask: Ask<'_>) -> Pending<Outcome> {
        self.run_into(ask, AsOutcome)
    }

    /// [`run`](Self::run), with the decisions turned into what the caller
    /// returns (`finish`) where they are made: a ready decision is then
    /// built once, in place, instead of being moved through the results.
    #[inline(always)]
    pub(crate) fn run_into<F: Finish>(
        self: &Arc<Self>,
        ask: Ask<'_>,
        finish: F,
    ) -> Pending<F::Output> {
        // Any cost above every maximum is denied alike; this bounds the numbers.
        let cost = ask.cost.min(ask.plan.cost_cap);
        // Exemptions given and not empty: one atomic load when they are
        // empty. A refund or a release gives back what was charged before
        // the key was listed: it always reaches the store.
        if let Some(lists) = &self.exemptions {
            if lists.is_active() && ask.mode != Mode::Refund {
                return self.screened(lists, ask, cost, finish);
            }
        }
        self.unlisted(ask, cost, finish)
    }

    /// Decide `ask` for a key on no list.
    #[inline(always)]
    pub(super) fn unlisted<F: Finish>(
        self: &Arc<Self>,
        ask: Ask<'_>,
        cost: u64,
        finish: F,
    ) -> Pending<F::Output> {
        if let Some(local) = ask.local {
            if let (Some(table), Mode::Check) = (&local.allotments, ask.mode) {
                return self.allotted(table, &ask, cost, finish);
            }
            if let Some(cache) = &local.deny_cache {
                return self.cached(cache, &ask, cost, finish);
            }
        }
        self.decide(&ask, cost, None, finish)
    }

    /// Through the deny cache: a denial it remembers is answered without
    /// the store; a refund makes it forget the key.
    #[inline(never)]
    fn cached<F: Finish>(
        self: &Arc<Self>,
        cache: &DenyCache,
        ask: &Ask<'_>,
        cost: u64,
        finish: F,
    ) -> Pending<F::Output> {
        // The time the cache measures with.
        let asked = self.local_now();
        match ask.mode {
            Mode::Check => {
                if let Some(hit) = cache.get(ask.key, cost, asked) {
                    self.metrics.cache_hit(&hit.overall());
                    return Pending::ready(Ok(finish.finish(hit)));
                }
            }
            Mode::Refund => cache.forget(ask.key),
            // A reservation may book what a check is denied now.
            Mode::Peek | Mode::Reserve { .. } | Mode::Debit | Mode::Block { .. } => {}
        }
        self.decide(ask, cost, Some(asked), finish)
    }

    /// The store's decision (`asked`: when the deny cache was asked, if it
    /// was).
    #[inline(always)]
    pub(super) fn decide<F: Finish>(
        self: &Arc<Self>,
        ask: &Ask<'_>,
        cost: u64,
        asked: Option<u64>,
        finish: F,
    ) -> Pending<F::Output> {
        let batch = Batch {
            targets: &ask.plan.targets,
            key: ask.key,
            // Written when empty (every call of one key), as `lease` below.
            keys: if ask.keys.is_empty() { &[] } else { ask.keys },
            now: self.now(),
            mode: ask.mode,
            cost: cost + ask.slice,
            // Written here when empty (every decision but a concurrency
            // limit's), not copied from `ask`: the copy read the two words
            // `ask` had just stored back as one 16-byte load, which waits
            // for both stores to land (80.6 -> 71.3 ns a memory-store GCRA
            // decision over 10 000 keys, benches/outside).
            lease: if ask.lease.is_empty() { "" } else { ask.lease },
        };
        if tracing::enabled!(tracing::Level::DEBUG) {
            return self.traced(ask, &batch, asked, finish);
        }
        self.answer(ask, &batch, asked, finish, None)
    }

    /// [`decide`](Self::decide) inside a debug span, for a debug listener.
    /// Spans cost even when nothing listens (axum enables tracing's `log`
    /// feature): none is made otherwise.
    #[inline(never)]
    fn traced<F: Finish>(
        self: &Arc<Self>,
        ask: &Ask<'_>,
        batch: &Batch<'_>,
        asked: Option<u64>,
        finish: F,
    ) -> Pending<F::Output> {
        let span = tracing::debug_span!(
            "floodgate.decide",
            limiter = %self.name,
            limits = batch.targets.len(),
            mode = batch.mode.as_str(),
            cost = batch.cost,
        );
        span.in_scope(|| self.answer(ask, batch, asked, finish, Some(&span)))
    }

    /// The store's answer to `batch`, read where the store wrote it: ready
    /// at once, or a decision under way (inside `span`).
    // `span` borrowed: an owned `None` was dropped by a call on every
    // decision (19 instructions, callgrind).
    #[inline(always)]
    fn answer<F: Finish>(
        self: &Arc<Self>,
        ask: &Ask<'_>,
        batch: &Batch<'_>,
        asked: Option<u64>,
        finish: F,
        span: Option<&tracing::Span>,
    ) -> Pending<F::Output> {
        match self.store.decide(batch) {
            Answer::One(ref reply) if ask.plan.shadowed == 0 => {
                self.ready_one(ask, batch, asked, reply, finish)
            }
            Answer::One(ref reply) => {
                self.ready(ask, batch, asked, std::slice::from_ref(reply), finish)
            }
            Answer::PerTarget(ref replies) => self.ready(ask, batch, asked, replies, finish),
            Answer::Later(store) => self.later(store, span.cloned(), ask, batch, asked, finish),
        }
    }

    /// One limit's decision made at once: counted, and finished from the
    /// reply where the store wrote it. The deny cache, when asked, learns
    /// from the whole outcome.
    // No `Outcome` in between: with its empty `Vec` it cost 4 instructions
    // of ~500 a GCRA decision (497 -> 493, callgrind).
    #[inline(always)]
    fn ready_one<F: Finish>(
        &self,
        ask: &Ask<'_>,
        batch: &Batch<'_>,
        asked: Option<u64>,
        reply: &Reply,
        finish: F,
    ) -> Pending<F::Output> {
        if asked.is_some() {
            let one = std::slice::from_ref(reply);
            let outcome = Outcome::replied(one);
            return self.ready_outcome(ask, batch, asked, outcome, None, finish);
        }
        if ask.counted {
            self.metrics
                .decided_reply(reply.reason, reply.is_near_limit());
        }
        Pending::ready(Ok(finish.finish_reply(reply)))
    }

    /// A decision the store made at once, read where the store wrote it.
    #[inline(always)]
    fn ready<F: Finish>(
        &self,
        ask: &Ask<'_>,
        batch: &Batch<'_>,
        asked: Option<u64>,
        replies: &[Reply],
        finish: F,
    ) -> Pending<F::Output> {
        let outcome = Outcome::replied(replies);
        let shadow = Some(ask.plan).filter(|p| p.shadowed != 0);
        self.ready_outcome(ask, batch, asked, outcome, shadow, finish)
    }

    /// [`ready`](Self::ready) of the replies read (`shadow`: the plan, when
    /// it has limits in shadow mode).
    #[inline(always)]
    fn ready_outcome<F: Finish>(
        &self,
        ask: &Ask<'_>,
        batch: &Batch<'_>,
        asked: Option<u64>,
        outcome: Option<Outcome>,
        shadow: Option<&Plan>,
        finish: F,
    ) -> Pending<F::Output> {
        let Some(mut outcome) = outcome else {
            return Pending::ready(Err(super::outcome::none()));
        };
        let counted = ask.counted;
        if let Some(plan) = shadow {
            outcome = self.shadowed(outcome, plan.shadowed, counted.then_some(&plan.names[..]));
        }
        let cache = asked.and(ask.local).and_then(|l| l.deny_cache.as_ref());
        let (mode, key, cost) = (batch.mode, batch.key, batch.cost);
        self.record(mode, counted, key, cost, cache, asked, &outcome);
        Pending::ready(Ok(finish.finish(outcome)))
    }

    /// What follows a decision: metrics, and the deny cache of the limits
    /// it was made under (`asked`: when it was asked, if it was).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &self,
        mode: Mode,
        counted: bool,
        key: &str,
        cost: u64,
        cache: Option<&DenyCache>,
        asked: Option<u64>,
        d: &Outcome,
    ) {
        if !counted {
            return;
        }
        let (reason, degraded) = d.reason_and_degraded();
        self.metrics.decided(reason, degraded);
        if reason.admits() && d.near_limit() {
            self.metrics.near_limit();
        }
        if mode != Mode::Check {
            return;
        }
        if let (Some(cache), Some(asked)) = (cache, asked) {
            cache.learn(key, cost, asked, d);
        }
    }

    /// The limiter's clock, or a local monotonic one: what the deny cache
    /// measures time with.
    pub(super) fn local_now(&self) -> u64 {
        self.now()
            .unwrap_or_else(|| crate::clock::MonotonicClock.now_ms())
    }
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter")
            .field("name", &self.name)
            .field("prefix", &self.prefix)
            .field("store", &self.store)
            .field("failure", &self.guard)
            .finish_non_exhaustive()
    }
}
