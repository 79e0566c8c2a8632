//! The loaded configuration, and which rule a request's descriptor meets.
//!
//! Matching follows envoyproxy/ratelimit: a descriptor's entries are walked
//! from the domain's top level down; at each level `key_value` is looked up
//! first, then the wildcard values (`key_prefix*`, `key_a*b`) in the order
//! the file lists them, then `key` alone (any value). The rule is the one
//! of the node the **last** entry reaches; a descriptor that leaves the
//! tree early, or ends on a node without `rate_limit`, has no limit (it is
//! answered `OK`, not an error), as has any descriptor of an unknown domain.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::OnStoreFailure;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::google::protobuf::Struct;
use floodgate::algorithm::{
    AnyAlgorithm, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, TokenBucket,
};
use floodgate::HotKeys;

/// Every domain's descriptors, as loaded ([`crate::config::load`]).
#[derive(Default)]
pub struct Rules {
    pub(crate) domains: HashMap<String, Level>,
    /// The domains whose file names a `failure_policy`.
    pub(crate) policies: HashMap<String, OnStoreFailure>,
    /// Whether a domain's descriptors may come from several files.
    pub(crate) merge_domains: bool,
}

impl Rules {
    /// No rules yet, and a domain may take its descriptors from several
    /// files (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`): their
    /// descriptors are put together, a descriptor in two of them refused
    /// as in one file.
    pub fn merging_domains() -> Self {
        Self {
            merge_domains: true,
            ..Self::default()
        }
    }

    /// The failure policy `domain`'s file names, if any.
    pub fn failure_policy(&self, domain: &str) -> Option<OnStoreFailure> {
        self.policies.get(domain).copied()
    }

    /// The domains configured.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    /// The rule `descriptor` of `domain` meets, if any.
    pub(crate) fn rule_of(
        &self,
        domain: &str,
        descriptor: &RateLimitDescriptor,
    ) -> Option<Matched> {
        let mut node = self.domains.get(domain)?;
        let mut shared = Vec::new();
        let mut metric_key = domain.to_owned();
        let last = descriptor.entries.len().checked_sub(1)?;
        for (i, entry) in descriptor.entries.iter().enumerate() {
            let with_value = format!("{}_{}", entry.key, entry.value);
            let (next, how) = match node.children.get(&with_value) {
                Some(next) => (Some(next), By::Value),
                None => match node.wildcards.iter().find(|w| w.matches(&with_value)) {
                    Some(w) => (node.children.get(&w.key), By::Wildcard(&w.key)),
                    None => (node.children.get(&entry.key), By::Key),
                },
            };
            let next = next?;
            if let Some(pattern) = &next.share_pattern {
                shared.push((i, pattern.clone()));
            }
            metric_key.push('.');
            metric_key.push_str(&entry.key);
            let value = match how {
                By::Value => Some(entry.value.as_str()),
                By::Wildcard(_) if next.value_to_metric => Some(entry.value.as_str()),
                By::Wildcard(key) => key.strip_prefix(&format!("{}_", entry.key)),
                By::Key => next.value_to_metric.then_some(entry.value.as_str()),
            };
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                metric_key.push('_');
                metric_key.push_str(value);
            }
            if i == last {
                let rule = next.rule.clone()?;
                return Some(Matched {
                    rule,
                    shared,
                    metric_key,
                });
            }
            if next.children.is_empty() {
                return None;
            }
            node = next;
        }
        None
    }
}

enum By<'a> {
    Value,
    Wildcard(&'a str),
    Key,
}

/// A descriptor's rule, and how its counter is named.
pub(crate) struct Matched {
    pub(crate) rule: Arc<Rule>,
    /// Entries (by index) counted under their wildcard pattern instead of
    /// their value (`share_threshold`).
    pub(crate) shared: Vec<(usize, String)>,
    /// The descriptor as its metrics name it (`value_to_metric`).
    pub(crate) metric_key: String,
}

/// One level of a domain's descriptors.
#[derive(Default)]
pub(crate) struct Level {
    /// By `key_value`, `key` or a wildcard `key_prefix*`.
    pub(crate) children: HashMap<String, Level>,
    /// The wildcard children, in the file's order.
    pub(crate) wildcards: Vec<Wildcard>,
    pub(crate) rule: Option<Arc<Rule>>,
    pub(crate) value_to_metric: bool,
    /// The wildcard value all matching values share one counter under.
    pub(crate) share_pattern: Option<String>,
}

/// A `key_value` with `*` in it, split once when loaded.
pub(crate) struct Wildcard {
    pub(crate) key: String,
    parts: Vec<String>,
}

impl Wildcard {
    pub(crate) fn new(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            parts: key.split('*').map(str::to_owned).collect(),
        }
    }

    /// Whether `text` matches: starts with the first part, ends with the
    /// last, and holds the others in order between.
    fn matches(&self, text: &str) -> bool {
        let (Some(first), Some(last)) = (self.parts.first(), self.parts.last()) else {
            return false;
        };
        let Some(mut rest) = text.strip_prefix(first.as_str()) else {
            return false;
        };
        if self.parts.len() == 1 {
            return rest.is_empty();
        }
        let Some(middle) = self.parts.get(1..self.parts.len() - 1) else {
            return false;
        };
        for part in middle {
            match rest.find(part.as_str()) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
        rest.len() >= last.len() && rest.ends_with(last.as_str())
    }
}

/// A descriptor of the configuration with a `rate_limit`.
#[derive(Debug)]
pub struct Rule {
    /// The limit's name in floodgate: [`limit_name`] of the descriptor's
    /// path (`domain.key_value.key`), so instances and restarts share it.
    pub(crate) limit: String,
    /// `rate_limit.name`, what `replaces` refers to (may be empty).
    pub(crate) name: String,
    pub(crate) replaces: Vec<String>,
    /// `requests_per_unit` and `unit`; `None` when `unlimited`.
    pub(crate) quota: Option<(u32, Unit)>,
    /// How it is decided; `None` when unlimited, or when
    /// `requests_per_unit` is 0 (every request is over).
    pub(crate) algorithm: Option<AnyAlgorithm>,
    pub(crate) shadow: bool,
    pub(crate) detailed_metric: bool,
    /// `hot_keys`: decided by a limiter of its own that shares a hot
    /// value's quota by slices (`crate::hot`).
    pub(crate) hot_keys: Option<HotKeys>,
    /// The descriptor's `metadata:`, for the answer's dynamic metadata
    /// (`crate::metadata`).
    pub(crate) metadata: Option<Arc<Struct>>,
    /// `quota_mode`: the request is over only when every descriptor in
    /// quota mode is (`crate::decide`).
    pub(crate) quota_mode: bool,
}

/// envoyproxy/ratelimit's units, and the lengths it gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// 1 s.
    Second,
    /// 60 s.
    Minute,
    /// 3 600 s.
    Hour,
    /// 86 400 s.
    Day,
    /// 7 days.
    Week,
    /// 30 days.
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// The unit a file names (any case), as envoyproxy/ratelimit reads it.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Some(match name.to_ascii_uppercase().as_str() {
            "SECOND" => Self::Second,
            "MINUTE" => Self::Minute,
            "HOUR" => Self::Hour,
            "DAY" => Self::Day,
            "WEEK" => Self::Week,
            "MONTH" => Self::Month,
            "YEAR" => Self::Year,
            _ => return None,
        })
    }

    /// The unit of a request's limit override (the protobuf enum's value).
    pub(crate) fn from_proto(value: i32) -> Option<Self> {
        Some(match value {
            1 => Self::Second,
            2 => Self::Minute,
            3 => Self::Hour,
            4 => Self::Day,
            5 => Self::Month,
            6 => Self::Year,
            7 => Self::Week,
            _ => return None,
        })
    }

    /// The protobuf enum's value.
    pub(crate) fn proto(self) -> i32 {
        match self {
            Self::Second => 1,
            Self::Minute => 2,
            Self::Hour => 3,
            Self::Day => 4,
            Self::Month => 5,
            Self::Year => 6,
            Self::Week => 7,
        }
    }

    /// The unit's length.
    pub fn duration(self) -> Duration {
        let day = 86_400;
        Duration::from_secs(match self {
            Self::Second => 1,
            Self::Minute => 60,
            Self::Hour => 3_600,
            Self::Day => day,
            Self::Week => 7 * day,
            Self::Month => 30 * day,
            Self::Year => 365 * day,
        })
    }
}

/// The algorithm a rule names (fixed window when none), for `n` requests
/// per `unit`; `None` when `n` is 0.
///
/// # Errors
/// An unknown algorithm, a burst where it means nothing, or what the
/// algorithm's constructor refuses.
pub(crate) fn algorithm(
    name: Option<&str>,
    n: u32,
    unit: Unit,
    burst: Option<u64>,
) -> Result<Option<AnyAlgorithm>, String> {
    let name = name.unwrap_or("fixed_window");
    let (count, period) = (u64::from(n), unit.duration());
    let per_sec = count as f64 / period.as_secs_f64();
    let no_burst = |alg: AnyAlgorithm| match burst {
        Some(_) => Err(format!("`burst` means nothing for {name}")),
        None => Ok(alg),
    };
    if n == 0 {
        return match name {
            "fixed_window" | "sliding_window" | "sliding_log" | "gcra" | "token_bucket"
            | "leaky_bucket" => Ok(None),
            _ => Err(unknown(name)),
        };
    }
    let e = |e: floodgate::ConfigError| e.to_string();
    let algorithm = match name {
        "fixed_window" => no_burst(AnyAlgorithm::FixedWindow(
            FixedWindow::try_new(count, period).map_err(e)?,
        ))?,
        "sliding_window" => no_burst(AnyAlgorithm::SlidingWindow(
            SlidingWindow::try_new(count, period).map_err(e)?,
        ))?,
        "sliding_log" => no_burst(AnyAlgorithm::SlidingLog(
            SlidingLog::try_new(count, period).map_err(e)?,
        ))?,
        "gcra" => {
            let gcra = Gcra::try_new(count, period).map_err(e)?;
            AnyAlgorithm::Gcra(match burst {
                Some(b) => gcra.try_burst(b).map_err(e)?,
                None => gcra,
            })
        }
        "token_bucket" => AnyAlgorithm::TokenBucket(
            TokenBucket::try_new(burst.unwrap_or(count), per_sec).map_err(e)?,
        ),
        "leaky_bucket" => AnyAlgorithm::LeakyBucket(
            LeakyBucket::try_new(burst.unwrap_or(count), per_sec).map_err(e)?,
        ),
        other => return Err(unknown(other)),
    };
    Ok(Some(algorithm))
}

fn unknown(name: &str) -> String {
    format!(
        "unknown algorithm '{name}' (fixed_window, sliding_window, sliding_log, gcra, token_bucket, leaky_bucket)"
    )
}

/// A limit's name in floodgate: `prefix` and 16 hex digits of a stable
/// hash (FNV-1a) of `what`. Names are at most 32 characters of a small
/// alphabet; the rule's full key is neither. Stable across processes and
/// versions, so every instance shares a rule's counters.
pub(crate) fn limit_name(prefix: char, what: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in what.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{prefix}{hash:016x}")
}
