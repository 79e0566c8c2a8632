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
//! Decided in several calls, so not all or nothing between them: a request
//! with more than 16 limited descriptors ([`MAX_LIMITS`]), with two
//! descriptors meeting the same rule (with different values, or the same
//! descriptor twice: one counter charged by each), or with different
//! `hits_addend` on its descriptors.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::google::protobuf::Struct;
use floodgate::algorithm::{AnyAlgorithm, Limits, MAX_LIMITS};
use floodgate::{Decision, HotKeys, Limiter, Quota};

use std::sync::Arc;

use crate::hot::HotLimiters;
use crate::rules::{Matched, Rule, Rules, Unit};

/// What one descriptor is decided by.
pub(crate) enum DescriptorLimit {
    /// No rule: `OK`, no limit reported.
    NoLimit,
    /// `unlimited: true`: `OK`, remaining `u32::MAX`.
    Unlimited,
    /// A limit, and once decided its decision.
    Limited(Box<Limited>),
}

pub(crate) struct Limited {
    /// The limit's name in floodgate (a hash of the rule's full key).
    pub(crate) limit: String,
    /// The descriptor's entries, the key its counter is kept under.
    pub(crate) key: String,
    /// `None`: `requests_per_unit: 0`, every request over.
    pub(crate) algorithm: Option<AnyAlgorithm>,
    pub(crate) requests_per_unit: u32,
    pub(crate) unit: Unit,
    /// `rate_limit.name`, reported in `current_limit`.
    pub(crate) name: String,
    pub(crate) shadow: bool,
    pub(crate) cost: u64,
    /// The metrics' `key` label.
    pub(crate) metric_key: String,
    /// Once decided.
    pub(crate) decision: Option<(Decision, Quota)>,
    /// What the decision's `remaining` counts as charged though the
    /// request was refused by another descriptor (its cost), else 0.
    pub(crate) uncharged: u64,
    /// `hot_keys`: decided by its rule's own limiter (`crate::hot`).
    pub(crate) hot_keys: Option<HotKeys>,
    /// `is_negative_hits`: its hits are given back, not charged.
    pub(crate) negative: bool,
    /// Its rule's `metadata:` (`crate::metadata`).
    pub(crate) metadata: Option<Arc<Struct>>,
}

impl Limited {
    /// What remains of the limit after this request (0 when over).
    pub(crate) fn remaining(&self) -> u64 {
        match &self.decision {
            Some((d, _)) if d.allowed() => d
                .remaining()
                .saturating_add(self.uncharged)
                .min(u64::from(self.requests_per_unit)),
            _ => 0,
        }
    }

    /// Whether this descriptor refuses the request (one that gives hits
    /// back never does).
    pub(crate) fn over(&self) -> bool {
        match &self.decision {
            Some((d, _)) => d.denied(),
            None => self.algorithm.is_none() && !self.negative,
        }
    }

    /// Time until the counter resets (the end of the unit, as
    /// envoyproxy/ratelimit reports it when the limit is 0).
    ///
    /// A fixed window resets at the end of its unit whatever it holds; the
    /// library reports 0 for a window nothing is counted in yet (a look
    /// with `hits_addend: 0`, a request refused whole), and so for a
    /// refusal it cannot time (a cost above the limit): those answer the
    /// end of the unit too, as envoyproxy/ratelimit always does, never
    /// "retry now".
    pub(crate) fn until_reset(&self) -> Duration {
        let reported = self
            .decision
            .as_ref()
            .map(|(d, _)| d.reset_after().max(d.retry_after().unwrap_or_default()));
        let window = matches!(self.algorithm, Some(AnyAlgorithm::FixedWindow(_)));
        match reported {
            Some(d) if !d.is_zero() || !(window || self.over()) => d,
            _ => {
                let unit = self.unit.duration().as_millis().max(1);
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                let ms = unit - now.as_millis() % unit;
                Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
            }
        }
    }
}

/// The slots of a request's descriptors, in order, `replaces` applied.
pub(crate) fn slots(
    rules: &Rules,
    domain: &str,
    descriptors: &[RateLimitDescriptor],
    request_hits: u64,
) -> Result<Vec<DescriptorLimit>, String> {
    let mut replaced: Vec<String> = Vec::new();
    let mut slots = Vec::with_capacity(descriptors.len());
    let mut names = Vec::with_capacity(descriptors.len());
    for d in descriptors {
        let cost = d.hits_addend.as_ref().map_or(request_hits, |h| h.value);
        let (slot, rule) = slot(rules, domain, d, cost)?;
        let name = match rule {
            Some(rule) => {
                replaced.extend(rule.replaces.iter().cloned());
                rule.name.clone()
            }
            None => String::new(),
        };
        slots.push(slot);
        names.push(name);
    }
    for (slot, name) in slots.iter_mut().zip(names) {
        if !name.is_empty() && replaced.contains(&name) {
            *slot = DescriptorLimit::NoLimit;
        }
    }
    Ok(slots)
}

/// One descriptor's slot, and its rule (for `replaces`).
fn slot(
    rules: &Rules,
    domain: &str,
    d: &RateLimitDescriptor,
    cost: u64,
) -> Result<(DescriptorLimit, Option<Arc<Rule>>), String> {
    if let Some(limit) = &d.limit {
        // A per-request override: a fixed window of its own, never shadowed.
        let unit = Unit::from_proto(limit.unit)
            .ok_or_else(|| format!("invalid unit {} in a limit override", limit.unit))?;
        let algorithm = crate::rules::algorithm(None, limit.requests_per_unit, unit, None)?;
        let limited = Limited {
            limit: crate::rules::limit_name('o', &format!("{domain}\u{1f}{}", unit.proto())),
            key: entries_key(d, &[]),
            algorithm,
            requests_per_unit: limit.requests_per_unit,
            unit,
            name: String::new(),
            shadow: false,
            cost,
            metric_key: format!("{domain}.override"),
            decision: None,
            uncharged: 0,
            hot_keys: None,
            negative: d.is_negative_hits,
            metadata: None,
        };
        return Ok((DescriptorLimit::Limited(Box::new(limited)), None));
    }
    let Some(Matched {
        rule,
        shared,
        metric_key,
    }) = rules.rule_of(domain, d)
    else {
        return Ok((DescriptorLimit::NoLimit, None));
    };
    let Some((requests_per_unit, unit)) = rule.quota else {
        return Ok((DescriptorLimit::Unlimited, Some(rule)));
    };
    let limited = Limited {
        limit: rule.limit.clone(),
        key: entries_key(d, &shared),
        algorithm: rule.algorithm,
        requests_per_unit,
        unit,
        name: rule.name.clone(),
        shadow: rule.shadow,
        cost,
        metric_key: if rule.detailed_metric {
            detailed_key(domain, d)
        } else {
            metric_key
        },
        decision: None,
        uncharged: 0,
        hot_keys: rule.hot_keys,
        negative: d.is_negative_hits,
        metadata: rule.metadata.clone(),
    };
    Ok((DescriptorLimit::Limited(Box::new(limited)), Some(rule)))
}

/// Decide every limited slot: one call for all of them when they fit in
/// one (see the module's docs).
pub(crate) async fn decide(
    limiter: &Limiter<Limits>,
    hot: &HotLimiters,
    slots: &mut [DescriptorLimit],
) -> Result<(), floodgate::Error> {
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
            None => {
                let limits =
                    Limits::try_new(&l.limit, algorithm).map_err(floodgate::Error::Unsupported)?;
                limiter.refund_with(&l.key, l.cost, &limits).await?
            }
        };
        l.decision = Some((decided, algorithm.quota()));
    }
    limited.retain(|l| !l.negative);
    // A descriptor at 0 refuses the request: the others are only looked at.
    let mut refused = limited.iter().any(|l| l.algorithm.is_none() && !l.shadow);
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
        } else if !l.shadow {
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
            if l.shadow {
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
    if refused {
        for (i, own) in hot_charged {
            let l = &mut limited[i];
            own.refund(&l.key, l.cost).await?;
            l.uncharged = l.cost;
        }
    }
    Ok(())
}

/// The key a descriptor's counter is kept under: its entries,
/// `key=value` joined by `|` (`%`, `=` and `|` escaped), a shared
/// wildcard's pattern in place of the value where `share_threshold` says.
fn entries_key(d: &RateLimitDescriptor, shared: &[(usize, String)]) -> String {
    let mut key = String::new();
    for (i, entry) in d.entries.iter().enumerate() {
        if i > 0 {
            key.push('|');
        }
        escape(&mut key, &entry.key);
        key.push('=');
        let value = shared
            .iter()
            .find(|(at, _)| *at == i)
            .map_or(entry.value.as_str(), |(_, pattern)| pattern.as_str());
        escape(&mut key, value);
    }
    key
}

fn escape(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '=' => out.push_str("%3D"),
            '|' => out.push_str("%7C"),
            c => out.push(c),
        }
    }
}

/// `detailed_metric`'s key: the domain and every entry with its value.
fn detailed_key(domain: &str, d: &RateLimitDescriptor) -> String {
    let mut key = domain.to_owned();
    for entry in &d.entries {
        key.push('.');
        key.push_str(&entry.key);
        key.push('_');
        key.push_str(&entry.value);
    }
    key
}
