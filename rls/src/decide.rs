//! One `ShouldRateLimit` request: each descriptor's rule, then every
//! limited descriptor decided in **one** `Limiter::check_keys_with` call,
//! all or nothing: a request refused by one descriptor charges none of the
//! others (envoyproxy/ratelimit charges every descriptor, those under their
//! limit included, and counts hits over the limit too).
//!
//! A descriptor with `is_negative_hits` gives its hits back (a refund of
//! its limit) whatever the others decide, and never refuses the request.
//!
//! A descriptor whose rule has `hot_keys` is decided by that rule's own
//! limiter (`crate::hot`) before the others, and given back if they refuse
//! the request: all or nothing once answered, in two calls rather than one
//! (between them, the hot value holds the charge).
//!
//! Descriptors in quota mode (`quota_mode: true` on their rule, or every
//! descriptor with `--quota-mode`; envoyproxy/ratelimit's): the request is
//! over only when every one of them is over its limit (or another
//! descriptor is). Each is decided as a limit in shadow mode is, its
//! refusal stopping nothing, and charged when it admits; when all of them
//! refuse, what the request's other descriptors were charged is given back
//! (a second call, each descriptor by itself), so a refused request still
//! keeps no charge. Under `--quota-mode` a descriptor with no rule counts
//! as one in quota mode that admits.
//!
//! Decided in several calls, so not all or nothing between them: a request
//! with more than 16 limited descriptors ([`MAX_LIMITS`]), with two
//! descriptors meeting the same rule (with different values, or the same
//! descriptor twice: one counter charged by each), or with different
//! `hits_addend` on its descriptors.

use floodgate::algorithm::{AnyAlgorithm, Limits, MAX_LIMITS};
use floodgate::{Decision, Limiter, Quota};

use crate::hot::HotLimiters;
use crate::slots::{DescriptorLimit, Limited};

/// Decide every limited slot: one call for all of them when they fit in
/// one (see the module's docs). Whether the request is refused.
pub(crate) async fn decide(
    limiter: &Limiter<Limits>,
    hot: &HotLimiters,
    slots: &mut [DescriptorLimit],
    quota_mode: bool,
) -> Result<bool, floodgate::Error> {
    if quota_mode {
        for s in slots.iter_mut() {
            if let DescriptorLimit::Limited(l) = s {
                l.quota_mode = true;
            }
        }
    }
    let quota_admits_anyway =
        quota_mode && slots.iter().any(|s| matches!(s, DescriptorLimit::NoLimit));
    let mut limited: Vec<&mut Limited> = slots
        .iter_mut()
        .filter_map(|s| match s {
            DescriptorLimit::Limited(l) => Some(&mut **l),
            _ => None,
        })
        .collect();
    // Hits given back (`is_negative_hits`): a refund each, whatever the
    // others decide; never a refusal.
    for l in limited.iter_mut().filter(|l| l.negative) {
        let Some(algorithm) = l.algorithm else {
            continue;
        };
        let decided = match l.hot_keys {
            Some(hot_keys) => {
                let own = hot.of(limiter, &l.limit, algorithm, hot_keys)?;
                own.refund(&l.key, l.cost).await?
            }
            None => refund_alone(limiter, l, algorithm).await?,
        };
        l.decision = Some((decided, algorithm.quota()));
    }
    limited.retain(|l| !l.negative);
    // A descriptor at 0 refuses the request: the others are only looked at.
    let mut refused = limited
        .iter()
        .any(|l| l.algorithm.is_none() && !l.shadow && !l.quota_mode);
    for l in limited.iter_mut().filter(|l| l.algorithm.is_none()) {
        // Its refusal, as the header fields and statuses report it.
        let until = l.until_reset();
        let quota = Quota {
            units: 0,
            window: l.unit.duration(),
        };
        l.decision = Some((Decision::over_limit(0, 0, until, until), quota));
    }
    // Rules with hot keys first, each by its own limiter: charged, then
    // given back below if the request is refused after all.
    let mut hot_charged = Vec::new();
    for (i, l) in limited.iter_mut().enumerate() {
        let (Some(algorithm), Some(hot_keys)) = (l.algorithm, l.hot_keys) else {
            continue;
        };
        let own = hot.of(limiter, &l.limit, algorithm, hot_keys)?;
        let cost = if refused { 0 } else { l.cost };
        let decided = own.check_all(&l.key, cost).await?;
        if let Some(each) = decided.each().first() {
            l.decision = Some((*each.decision(), each.quota()));
        }
        // Charged only if it admitted: a limit in shadow mode that denies
        // refuses nothing, and has nothing to give back either.
        if decided.overall().allowed() {
            if cost > 0 {
                hot_charged.push((i, own));
            }
        } else if !l.shadow && !l.quota_mode {
            refused = true;
        }
    }
    let mut groups: Vec<Vec<&mut Limited>> = Vec::new();
    let cold = limited
        .iter_mut()
        .filter(|l| l.algorithm.is_some() && l.hot_keys.is_none());
    for l in cold {
        let fits = |g: &Vec<&mut Limited>| {
            g.len() < MAX_LIMITS && g[0].cost == l.cost && g.iter().all(|o| o.limit != l.limit)
        };
        match groups.iter_mut().find(|g| fits(g)) {
            Some(g) => g.push(l),
            None => groups.push(vec![l]),
        }
    }
    for group in groups {
        let mut limits: Option<Limits> = None;
        for l in &group {
            let Some(algorithm) = l.algorithm else {
                continue;
            };
            limits = Some(
                match limits {
                    None => Limits::try_new(&l.limit, algorithm),
                    Some(all) => all.try_with(&l.limit, algorithm),
                }
                .map_err(floodgate::Error::Unsupported)?,
            );
            // A limit in quota mode is decided as one in shadow mode: its
            // refusal alone refuses nothing.
            if l.shadow || l.quota_mode {
                limits = limits
                    .map(|all| all.shadow(&l.limit))
                    .transpose()
                    .map_err(floodgate::Error::Unsupported)?;
            }
        }
        let Some(limits) = limits else { continue };
        let keys: Vec<(&str, &str)> = group
            .iter()
            .map(|l| (l.limit.as_str(), l.key.as_str()))
            .collect();
        let cost = if refused { 0 } else { group[0].cost };
        let decided = limiter.check_keys_with(&keys, cost, &limits).await?;
        let charged = decided.overall().allowed();
        refused |= !charged;
        for (l, each) in group.into_iter().zip(decided.each()) {
            l.decision = Some((*each.decision(), each.quota()));
            // A refused request charged nothing: a limit that would have
            // admitted it still has what it had.
            l.uncharged = if charged { 0 } else { cost };
        }
    }
    // Each give-back is tried even when one fails: the first failure is
    // returned once all were tried.
    let mut failed = None;
    let quota_refuses = !quota_admits_anyway && quota_over(limited.iter().map(|l| &**l));
    if quota_refuses && !refused {
        refused = true;
        // Every descriptor in quota mode refused, so none was charged; the
        // others that were are given back, each by itself.
        for l in limited.iter_mut() {
            let charged = l.uncharged == 0
                && l.hot_keys.is_none()
                && l.decision.as_ref().is_some_and(|(d, _)| d.allowed());
            let Some(algorithm) = l.algorithm.filter(|_| charged) else {
                continue;
            };
            match refund_alone(limiter, l, algorithm).await {
                Ok(_) => l.uncharged = l.cost,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
    }
    if refused {
        for (i, own) in hot_charged {
            let l = &mut limited[i];
            match own.refund(&l.key, l.cost).await {
                Ok(_) => l.uncharged = l.cost,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(refused),
    }
}

/// Give `l`'s cost back to its limit alone (not the hot-keys limiter).
async fn refund_alone(
    limiter: &Limiter<Limits>,
    l: &Limited,
    algorithm: AnyAlgorithm,
) -> Result<Decision, floodgate::Error> {
    let limits = Limits::try_new(&l.limit, algorithm).map_err(floodgate::Error::Unsupported)?;
    limiter.refund_with(&l.key, l.cost, &limits).await
}

/// Whether the descriptors in quota mode among `limited` refuse the
/// request: there are some, and every one is reported `OVER_LIMIT` (one
/// in shadow mode never is: it admits, as in envoyproxy/ratelimit).
fn quota_over<'a>(limited: impl Iterator<Item = &'a Limited>) -> bool {
    let mut any = false;
    for l in limited.filter(|l| l.quota_mode) {
        if !l.reported_over() {
            return false;
        }
        any = true;
    }
    any
}
