//! The one decision path. Every entry of every limiter (`check`,
//! `check_all`, `check_with`, `peek`, `refund`, `refund_with`, the layers,
//! a concurrency limiter's `acquire`, `peek` and releases) comes here:
//!
//! plan (limits → store targets) → deny cache → store → guard (timeout,
//! breaker, failure policy) → combine → deny cache → metrics.
//!
//! A store that never waits (memory) answers at once, and the decision is
//! ready before `run` returns: no future, no timeout, no breaker (it cannot
//! fail). Any other store answers with a future, which the guard bounds.

use super::deny_cache::DenyCache;
use crate::algorithm::Spec;
use crate::clock::Clock;
use crate::decision::Decision;
use crate::failure::{Call, Guard};
use crate::metrics::Metrics;
use crate::pending::Pending;
use crate::store::{Answer, Batch, Mode, Store, StoreError, Target};
use smallvec::SmallVec;
use std::future::Future;
use std::sync::Arc;
use tracing::Instrument;

/// What a limiter is, apart from its limits: shared by every clone, and by
/// the decisions under way.
pub(crate) struct Core {
    pub(crate) store: Store,
    pub(crate) name: Arc<str>,
    pub(crate) prefix: Box<str>,
    pub(crate) clock: Option<Arc<dyn Clock>>,
    pub(crate) guard: Guard,
    pub(crate) metrics: Metrics,
    pub(crate) deny_cache: Option<DenyCache>,
}

/// The limits one call decides: each one's name on the wire and its store
/// target, in order. Never empty.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) names: Box<[Arc<str>]>,
    pub(crate) targets: Box<[Target]>,
}

/// One call of the path.
#[derive(Clone, Copy)]
pub(crate) struct Ask<'a> {
    pub(crate) plan: &'a Plan,
    /// The plan is the limiter's own (the deny cache only knows those).
    pub(crate) own: bool,
    pub(crate) key: &'a str,
    pub(crate) cost: u64,
    pub(crate) mode: Mode,
    /// The lease a concurrency limiter acquires or releases (else empty).
    pub(crate) lease: &'a str,
}

/// Each limit's decision, and what they add up to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decided {
    pub(crate) combined: Decision,
    pub(crate) each: SmallVec<[Decision; 1]>,
}

impl Decided {
    fn of(each: SmallVec<[Decision; 1]>) -> Result<Self, crate::Error> {
        let Some((first, rest)) = each.split_first() else {
            return Err(StoreError::Protocol("no decision in the reply".into()).into());
        };
        Ok(Self {
            combined: Decision::combine(*first, rest),
            each,
        })
    }
}

impl Core {
    /// The plan of `parts` (each limit's own name, `None` for the limiter's,
    /// and its spec): the store names their keys
    /// `{prefix}:{limiter}[/{limit}]:{tag}:{…}`, so state is shared exactly
    /// by limits of the same prefix, names and algorithm.
    pub(crate) fn plan(&self, parts: Vec<(Option<Arc<str>>, Spec)>) -> Plan {
        let (names, targets): (Vec<_>, Vec<_>) = parts
            .into_iter()
            .map(|(limit, spec)| {
                let (name, namespace) = match limit {
                    None => (self.name.clone(), self.name.to_string()),
                    Some(l) => (l.clone(), format!("{}/{l}", self.name)),
                };
                let ns = self.store.namespace(&self.prefix, &namespace, spec.tag());
                (name, Target { ns, spec })
            })
            .unzip();
        Plan {
            names: names.into(),
            targets: targets.into(),
        }
    }

    /// The time of a decision: the limiter's clock, or `None` for the
    /// store's own.
    fn now(&self) -> Option<u64> {
        self.clock
            .as_ref()
            .map(|c| crate::clock::bounded(c.now_ms()))
    }

    /// Decide `ask`.
    pub(crate) fn run(self: &Arc<Self>, ask: Ask<'_>) -> Pending<Decided> {
        let targets = &ask.plan.targets;
        // Any cost above every maximum is denied alike; this bounds the numbers.
        let cost = targets
            .iter()
            .map(|t| t.spec.clamp_cost(ask.cost))
            .max()
            .unwrap_or(ask.cost);
        let cache = self.deny_cache.as_ref().filter(|_| ask.own);
        // The time the cache measures with, read only when there is one.
        let asked = cache.map(|_| self.local_now());
        if let (Some(cache), Some(asked)) = (cache, asked) {
            match ask.mode {
                Mode::Check => {
                    if let Some(hit) = cache.get(ask.key, cost, asked) {
                        self.metrics.cache_hit(&hit.combined);
                        return Pending::ready(Ok(hit));
                    }
                }
                Mode::Refund => cache.forget(ask.key),
                Mode::Peek => {}
            }
        }
        let batch = Batch {
            targets,
            key: ask.key,
            now: self.now(),
            mode: ask.mode,
            cost,
            lease: ask.lease,
        };
        let span = self.span(&ask, cost);
        let answer = if span.is_disabled() {
            self.store.decide(&batch)
        } else {
            span.in_scope(|| self.store.decide(&batch))
        };
        let store = match answer {
            Answer::Now(replies) => {
                let decided = Decided::of(crate::failure::decisions(replies));
                if let Ok(d) = &decided {
                    self.settled(ask.mode, ask.key, cost, asked, d);
                }
                return Pending::ready(decided);
            }
            Answer::Later(store) => store,
        };
        // What the failure policy needs, owned by the future.
        let specs: SmallVec<[Spec; 1]> = targets.iter().map(|t| t.spec).collect();
        let (key, lease) = (ask.key.to_owned(), ask.lease.to_owned());
        let (mode, core) = (ask.mode, self.clone());
        let decision = async move {
            let started = crate::clock::ticks();
            let call = Call {
                limiter: &core.name,
                specs: &specs,
                key: &key,
                cost,
                mode,
                lease: &lease,
            };
            let each = core.guard.call(store, &call).await;
            core.metrics
                .timed(crate::clock::ticks().saturating_duration_since(started));
            let decided = Decided::of(each?)?;
            core.settled(mode, &key, cost, asked, &decided);
            Ok(decided)
        };
        Pending::later(boxed(decision, span))
    }

    /// What follows a decision: metrics, and the deny cache (`asked` is
    /// when it was asked, for a call of the limiter's own limits when it
    /// has a cache).
    fn settled(&self, mode: Mode, key: &str, cost: u64, asked: Option<u64>, d: &Decided) {
        if mode != Mode::Check {
            return;
        }
        self.metrics.decided(&d.combined);
        if let (Some(cache), Some(asked)) = (&self.deny_cache, asked) {
            if d.combined.allowed {
                // The key filled up: cached numbers of it are stale.
                cache.forget(key);
            } else {
                cache.put(key, cost, asked, d);
            }
        }
    }

    /// The limiter's clock, or a local monotonic one: what the deny cache
    /// measures time with.
    fn local_now(&self) -> u64 {
        self.now()
            .unwrap_or_else(|| crate::clock::MonotonicClock.now_ms())
    }

    /// A debug span per decision. Spans cost even when nothing listens
    /// (axum enables tracing's `log` feature): make one only for a debug
    /// listener.
    fn span(&self, ask: &Ask<'_>, cost: u64) -> tracing::Span {
        if tracing::enabled!(tracing::Level::DEBUG) {
            let limits = ask.plan.names.len();
            tracing::debug_span!("floodgate.decide", limiter = %self.name, limits, mode = ask.mode.as_str(), cost)
        } else {
            tracing::Span::none()
        }
    }
}

/// A decision under way, boxed: it owns the store's future and what the
/// failure policy needs. Inside `span` only when a debug listener made one
/// (`Instrumented` costs every poll something).
fn boxed<T>(
    decision: impl Future<Output = Result<T, crate::Error>> + Send + 'static,
    span: tracing::Span,
) -> crate::pending::LaterFuture<T> {
    if span.is_disabled() {
        Box::pin(decision)
    } else {
        Box::pin(decision.instrument(span))
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
