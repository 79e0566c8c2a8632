//! What every limit of one request decided: [`Decisions`] and each
//! [`LimitDecision`].

use crate::{Decision, Quota};
use std::sync::Arc;

/// The decisions of every limit of a limiter for one request, and what they
/// add up to: what [`Limiter::check_all`](crate::Limiter::check_all)
/// returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Decisions {
    overall: Decision,
    each: Vec<LimitDecision>,
}

impl Decisions {
    pub(crate) fn new(overall: Decision, each: Vec<LimitDecision>) -> Self {
        Self { overall, each }
    }

    /// What the limits add up to: denied if any denies (and then nothing
    /// was charged); the numbers are the most restrictive limit's. The same
    /// decision [`Limiter::check`](crate::Limiter::check) returns.
    pub fn overall(&self) -> &Decision {
        &self.overall
    }

    /// Each limit's own decision, in the order they were configured.
    pub fn each(&self) -> &[LimitDecision] {
        &self.each
    }
}

/// One limit's decision, with the limit's name and quota.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitDecision {
    name: Arc<str>,
    quota: Quota,
    decision: Decision,
}

impl LimitDecision {
    pub(crate) fn new(name: Arc<str>, quota: Quota, decision: Decision) -> Self {
        Self {
            name,
            quota,
            decision,
        }
    }

    /// The limit's name (the limiter's name for a single algorithm).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its quota as it reads on the wire.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// What it decided.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }
}
