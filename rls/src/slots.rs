//! A request's descriptors, each matched to what decides it (its slot):
//! no rule, `unlimited`, or a limit (`Limited`), with the key its counter
//! is kept under, in request order, `replaces` applied. `decide.rs`
//! decides the limited ones.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::google::protobuf::Struct;
use floodgate::algorithm::AnyAlgorithm;
use floodgate::{Decision, HotKeys, Quota};

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
    /// In quota mode: its refusal alone refuses nothing (see `decide.rs`).
    pub(crate) quota_mode: bool,
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

    /// Whether this descriptor is over its limit (one that gives hits back
    /// never is). Whether that refuses the request is `decide.rs`'s: not
    /// in shadow mode, nor alone in quota mode.
    pub(crate) fn over(&self) -> bool {
        match &self.decision {
            Some((d, _)) => d.denied(),
            None => self.algorithm.is_none() && !self.negative,
        }
    }

    /// Whether its status says `OVER_LIMIT`: over its limit and not in
    /// shadow mode (a shadow limit over its limit is reported `OK`, as
    /// envoyproxy/ratelimit does). What quota mode and the dynamic
    /// metadata read too.
    pub(crate) fn reported_over(&self) -> bool {
        self.over() && !self.shadow
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
        // A replaced `unlimited` stays unlimited, as in envoyproxy/ratelimit
        // (under `--quota-mode` it is not one that admits).
        if !name.is_empty()
            && replaced.contains(&name)
            && !matches!(slot, DescriptorLimit::Unlimited)
        {
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
            quota_mode: false,
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
        quota_mode: rule.quota_mode,
    };
    Ok((DescriptorLimit::Limited(Box::new(limited)), Some(rule)))
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
