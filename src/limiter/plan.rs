//! The plan of a call: each limit's name on the wire and its store target.

use super::core::Core;
use crate::algorithm::{Quota, Spec};
use crate::store::Target;
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
        let cost_cap = targets.iter().map(|t| t.spec.cost_cap()).max();
        Plan {
            names: names.into(),
            cost_cap: cost_cap.unwrap_or(u64::MAX),
            targets: targets.into(),
        }
    }
}
