//! What one call of the decision path decided: each limit's decision, and
//! what they add up to.

use crate::algorithm::Reply;
use crate::store::{StoreError, StoreErrorKind};
use crate::{Decision, Reason};
use smallvec::SmallVec;

/// Each limit's decision, in the plan's order; never empty.
///
/// A store's replies are kept as the store wrote them and turned into
/// [`Decision`]s only where they are read. A decision on the memory store
/// takes ~80 ns, and the CPU waits on every copy of a value made soon after
/// it was written, when the copy's 16-byte pieces straddle the writes that
/// made it: a `Decision` built field by field and then moved through a
/// few results, or a reply copied from one word into an enum. So the
/// replies are moved only whole and from where they start ([`Answer::One`],
/// [`Overall`]), and a `Decision` is built once, in the place it is returned
/// to ([`Limiter::check`]'s `total.decision()`). BENCHMARKS.md ("issue 12")
/// has the numbers.
///
/// [`Answer::One`]: crate::store::Answer::One
/// [`Limiter::check`]: crate::Limiter::check
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome(PerLimit);

#[derive(Debug, Clone, PartialEq)]
enum PerLimit {
    /// As the store replied: the first limit's reply, then the others'.
    Replies(Reply, Vec<Reply>),
    /// Outcome in the store's place (failure policy, deny cache, fallback).
    Decided(Decision, Vec<Decision>),
    /// A plan with limits in shadow mode (bit `i` of `mask`: limit `i`):
    /// each limit's own decision, and what they add up to without the
    /// shadowed ones' denials.
    Shadowed {
        each: Vec<Decision>,
        overall: Decision,
        mask: u16,
    },
}

impl Outcome {
    /// The decision of a plan of one limit.
    pub(crate) fn one(decision: Decision) -> Self {
        Self(PerLimit::Decided(decision, Vec::new()))
    }

    /// The decisions of `each`, one per limit.
    ///
    /// # Errors
    /// A protocol error when there is none.
    pub(crate) fn of(each: impl IntoIterator<Item = Decision>) -> Result<Self, crate::Error> {
        let mut each = each.into_iter();
        let first = each.next().ok_or_else(none)?;
        Ok(Self(PerLimit::Decided(first, each.collect())))
    }

    /// The store's `replies`, one per limit; `None` when there is none.
    #[inline(always)]
    pub(crate) fn replied(replies: &[Reply]) -> Option<Self> {
        let (first, rest) = replies.split_first()?;
        let rest = if rest.is_empty() {
            Vec::new()
        } else {
            rest.to_vec()
        };
        Some(Self(PerLimit::Replies(*first, rest)))
    }

    /// Why the limits decided as they did, and whether the failure policy
    /// answered: what the metrics count, read without building a decision.
    #[inline(always)]
    pub(crate) fn reason_and_degraded(&self) -> (Reason, bool) {
        match &self.0 {
            PerLimit::Replies(first, rest) if rest.is_empty() => (first.reason, false),
            _ => {
                let d = self.overall();
                (d.reason(), d.is_degraded())
            }
        }
    }

    /// What the limits add up to: denied if any denies (and then nothing
    /// was charged); the numbers are the most restrictive limit's.
    #[inline(always)]
    pub(crate) fn overall(&self) -> Decision {
        match &self.0 {
            PerLimit::Replies(first, rest) if rest.is_empty() => first.decision(),
            _ => self.overall_of_each(),
        }
    }

    /// What the limits add up to, read later: a store's reply for one
    /// limit stays as the store wrote it.
    #[inline(always)]
    pub(crate) fn into_overall(self) -> Overall {
        match self.0 {
            PerLimit::Replies(reply, rest) if rest.is_empty() => Overall::Reply(reply),
            per_limit => Overall::Decision(Self(per_limit).overall_of_each()),
        }
    }

    /// [`overall`](Self::overall) the long way, out of the memory store's
    /// path.
    #[inline(never)]
    fn overall_of_each(&self) -> Decision {
        match &self.0 {
            PerLimit::Replies(first, rest) => {
                let rest: SmallVec<[Decision; 4]> = rest.iter().map(|r| r.decision()).collect();
                Decision::most_restrictive(first.decision(), &rest)
            }
            PerLimit::Decided(first, rest) => Decision::most_restrictive(*first, rest),
            PerLimit::Shadowed { overall, .. } => *overall,
        }
    }

    /// The same decisions, limits `mask` in shadow mode: what they add up
    /// to is the other limits' (with a shadowed limit's denial read as an
    /// admission when every limit is shadowed), and never a shadowed
    /// limit's denial.
    #[inline(never)]
    pub(crate) fn shadowed(self, mask: u16) -> Self {
        let each: Vec<Decision> = self.each().collect();
        let shadow = |i: usize| i < 16 && mask & (1 << i) != 0;
        let enforced: SmallVec<[Decision; 4]> = each
            .iter()
            .enumerate()
            .filter(|(i, _)| !shadow(*i))
            .map(|(_, d)| *d)
            .collect();
        // Every limit shadowed: what they add up to, each read as admitting.
        let counted: SmallVec<[Decision; 4]> = if enforced.is_empty() {
            each.iter().map(|d| as_admission(*d)).collect()
        } else {
            enforced
        };
        let Some((first, rest)) = counted.split_first() else {
            return self;
        };
        let overall = Decision::most_restrictive(*first, rest);
        Self(PerLimit::Shadowed {
            each,
            overall,
            mask,
        })
    }

    /// Bit `i`: limit `i` is in shadow mode (0 when none is).
    pub(crate) fn shadow_mask(&self) -> u16 {
        match &self.0 {
            PerLimit::Shadowed { mask, .. } => *mask,
            _ => 0,
        }
    }

    /// Which limits in shadow mode denied: their indexes.
    pub(crate) fn shadow_denials(&self) -> impl Iterator<Item = usize> + '_ {
        let mask = self.shadow_mask();
        self.each()
            .enumerate()
            .filter(move |(i, d)| *i < 16 && mask & (1 << i) != 0 && d.denied())
            .map(|(i, _)| i)
    }

    /// Whether an admission left some limit with less than a fifth of it
    /// (envoy's `near_limit`); never for a decision of the failure policy.
    pub(crate) fn near_limit(&self) -> bool {
        match &self.0 {
            PerLimit::Replies(first, rest) if rest.is_empty() => near_limit(&first.decision()),
            _ => self.each().any(|d| near_limit(&d)),
        }
    }

    /// Whether one limit decided (its decision is then the overall one).
    pub(crate) fn is_single(&self) -> bool {
        match &self.0 {
            PerLimit::Replies(_, rest) => rest.is_empty(),
            PerLimit::Decided(_, rest) => rest.is_empty(),
            PerLimit::Shadowed { .. } => false,
        }
    }

    /// Each limit's decision, in order.
    pub(crate) fn each(&self) -> impl Iterator<Item = Decision> + '_ {
        let (replies, decisions, shadowed) = match &self.0 {
            PerLimit::Replies(first, rest) => (Some((first, rest)), None, None),
            PerLimit::Decided(first, rest) => (None, Some((first, rest)), None),
            PerLimit::Shadowed { each, .. } => (None, None, Some(each)),
        };
        let replies = replies
            .into_iter()
            .flat_map(|(f, r)| std::iter::once(f).chain(r))
            .map(|r| r.decision());
        let decisions = decisions
            .into_iter()
            .flat_map(|(f, r)| std::iter::once(f).chain(r))
            .copied();
        let shadowed = shadowed.into_iter().flatten().copied();
        replies.chain(decisions).chain(shadowed)
    }

    /// Each limit's decision, in order, collected: one limit's stays
    /// inline (the layer writes its headers from these on every request).
    pub(crate) fn each_limit(&self) -> SmallVec<[Decision; 1]> {
        match &self.0 {
            PerLimit::Replies(first, rest) if rest.is_empty() => {
                SmallVec::from_buf([first.decision()])
            }
            PerLimit::Decided(first, rest) if rest.is_empty() => SmallVec::from_buf([*first]),
            _ => self.each().collect(),
        }
    }

    /// The same decisions with `f` applied to each.
    pub(crate) fn map_each(&self, f: impl FnMut(Decision) -> Decision) -> Self {
        let mask = self.shadow_mask();
        let mut each = self.each().map(f);
        let mapped = match each.next() {
            Some(first) => Self(PerLimit::Decided(first, each.collect())),
            None => self.clone(),
        };
        if mask == 0 {
            mapped
        } else {
            mapped.shadowed(mask)
        }
    }
}

/// An admission made by the store that left less than a fifth of the limit
/// (envoy's `near_limit`).
fn near_limit(d: &Decision) -> bool {
    d.reason() == Reason::WithinLimit
        && !d.is_degraded()
        && d.remaining().saturating_mul(5) < d.limit()
}

/// `d`, a denial read as an admission (a limit in shadow mode).
fn as_admission(d: Decision) -> Decision {
    if d.allowed() {
        return d;
    }
    Decision::new(
        Reason::WithinLimit,
        d.limit(),
        d.remaining(),
        d.reset_after(),
        None,
        std::time::Duration::ZERO,
    )
}

/// The error of a store that replied no decision.
pub(super) fn none() -> crate::Error {
    StoreError::new(StoreErrorKind::Protocol, "no decision in the reply").into()
}

/// What the limits of one call add up to, not yet read as a [`Decision`]:
/// one limit's reply stays as the store wrote it until the caller reads it.
// It was `#[repr(C)]`; without it, 684 -> 677 instructions a GCRA decision
// and the same wall-clock ratios to governor in three interleaved runs. It
// was a reply beside an `Option<Decision>`, 112 bytes; as an enum, 64: 615
// -> 608 a GCRA decision, token bucket 596 -> 586 (benches/outside).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Overall {
    /// One limit's reply, as the store wrote it.
    Reply(Reply),
    /// The decision, when it was not the store's alone (several limits,
    /// the failure policy, the deny cache).
    Decision(Decision),
}

impl Overall {
    /// The decision.
    #[inline(always)]
    pub(crate) fn decision(&self) -> Decision {
        match self {
            Overall::Reply(reply) => reply.decision(),
            Overall::Decision(d) => *d,
        }
    }
}

/// What a caller makes of the decisions, applied where they are made (see
/// `Core::run_into`).
pub(crate) trait Finish: Send + 'static {
    /// What the caller gets.
    type Output: Send + Unpin + 'static;
    /// Make it.
    fn finish(self, decided: Outcome) -> Self::Output;
    /// Make it of one limit's reply, read where the store wrote it.
    #[inline(always)]
    fn finish_reply(self, reply: &Reply) -> Self::Output
    where
        Self: Sized,
    {
        self.finish(Outcome(PerLimit::Replies(*reply, Vec::new())))
    }
}

/// The decisions themselves.
pub(crate) struct AsOutcome;

impl Finish for AsOutcome {
    type Output = Outcome;
    #[inline(always)]
    fn finish(self, outcome: Outcome) -> Outcome {
        outcome
    }
}

/// What the decisions add up to.
pub(crate) struct AsOverall;

impl Finish for AsOverall {
    type Output = Overall;
    #[inline(always)]
    fn finish(self, outcome: Outcome) -> Overall {
        outcome.into_overall()
    }
    #[inline(always)]
    fn finish_reply(self, reply: &Reply) -> Overall {
        Overall::Reply(*reply)
    }
}
