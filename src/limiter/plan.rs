//! The plan of a call: each limit's name on the wire and its store target.

use super::core::Core;
use super::outcome::Outcome;
use super::Limiter;
use crate::algorithm::{Algorithm, Quota, Spec};
use crate::store::Target;
use crate::{Decisions, LimitDecision};
use std::sync::Arc;

/// The limits one call decides: each one's name on the wire and its store
/// target, in order. Never empty.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) names: Box<[Arc<str>]>,
    pub(crate) targets: Box<[Target]>,
    /// The largest cost any target can tell from a larger one (the largest
    /// maximum + 1): costs are clamped to it, once per call.
    pub(crate) cost_cap: u64,
    /// Bit `i`: target `i` is in shadow mode (0: none, the usual case).
    pub(crate) shadowed: u16,
    /// Whether a reservation may book ahead: every limit is GCRA or a
    /// bucket (a booking in a later window would not count in it).
    pub(crate) books_ahead: bool,
    /// Whether a limit is a leaky bucket, whose admissions wait for their
    /// place in its queue.
    pub(crate) queues: bool,
}

impl Plan {
    /// Each limit's name and quota, in order.
    pub(crate) fn limits(&self) -> impl Iterator<Item = (&Arc<str>, Quota)> {
        self.names
            .iter()
            .zip(&*self.targets)
            .map(|(name, t)| (name, t.spec.quota()))
    }
}

impl Core {
    /// The plan of `parts` (each limit's own name, `None` for the limiter's,
    /// and its spec): the store names their keys
    /// `{prefix}:{limiter}[/{limit}]:{tag}:{…}`, so state is shared exactly
    /// by limits of the same prefix, names and algorithm.
    /// `shadowed`: bit `i` when part `i` is in shadow mode.
    pub(crate) fn plan(&self, parts: Vec<(Option<Arc<str>>, Spec)>, shadowed: u16) -> Plan {
        let (names, targets): (Vec<_>, Vec<_>) = parts
            .into_iter()
            .enumerate()
            .map(|(i, (limit, spec))| {
                let (name, namespace) = match limit {
                    None => (self.name.clone(), self.name.to_string()),
                    Some(l) => (l.clone(), format!("{}/{l}", self.name)),
                };
                let ns = self.store.namespace(&self.prefix, &namespace, spec.tag());
                let shadow = i < 16 && shadowed & (1 << i) != 0;
                (name, Target { ns, spec, shadow })
            })
            .unzip();
        let cost_cap = targets.iter().map(|t| t.spec.cost_cap()).max();
        let books_ahead = targets.iter().all(|t| t.spec.books_ahead());
        let queues = targets
            .iter()
            .any(|t| matches!(t.spec, Spec::LeakyBucket { .. }));
        Plan {
            books_ahead,
            queues,
            names: names.into(),
            cost_cap: cost_cap.unwrap_or(u64::MAX),
            targets: targets.into(),
            shadowed,
        }
    }
}

impl<A: Algorithm> Limiter<A> {
    /// The plan of `algorithm`'s limits under this limiter's names.
    pub(crate) fn plan(&self, algorithm: &A) -> Plan {
        self.inner
            .core
            .plan(algorithm.parts(), algorithm.shadowed())
    }
}

/// Each limit's decision, with its name and quota.
pub(crate) fn decisions(plan: &Plan, decided: &Outcome) -> Decisions {
    let each = plan
        .limits()
        .zip(decided.each())
        .map(|((name, quota), decision)| LimitDecision::new(name.clone(), quota, decision))
        .collect();
    Decisions::new(decided.overall(), each)
}
