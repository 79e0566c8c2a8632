//! A descriptor's `rate_limit` block: envoyproxy/ratelimit's fields and
//! floodgate's additions, made into a [`Rule`].

use floodgate::HotKeys;
use serde::Deserialize;

use crate::rules::{Rule, Unit};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RateLimitYaml {
    #[serde(default)]
    requests_per_unit: u32,
    #[serde(default)]
    unit: String,
    #[serde(default)]
    unlimited: bool,
    #[serde(default)]
    name: String,
    #[serde(default)]
    replaces: Vec<ReplacesYaml>,
    /// floodgate's: the algorithm (fixed window when absent).
    algorithm: Option<String>,
    /// floodgate's: GCRA's burst, a bucket's capacity.
    burst: Option<u64>,
    /// floodgate's: a hot value's quota shared among the service's
    /// instances by slices ([`floodgate::HotKeys`]).
    hot_keys: Option<HotKeysYaml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HotKeysYaml {
    /// How many instances of the service share the store.
    servers: u32,
    /// Decisions a second on one instance that make a value hot (100).
    threshold: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplacesYaml {
    #[serde(default)]
    name: String,
}

/// The rule of the `rate_limit` of the descriptor at `full_key`.
pub(super) fn rule(
    limit: RateLimitYaml,
    full_key: &str,
    shadow: bool,
    detailed_metric: bool,
) -> Result<Rule, String> {
    let unit = Unit::parse(&limit.unit);
    let quota = if limit.unlimited {
        if unit.is_some() {
            return Err("should not specify rate limit unit when unlimited".into());
        }
        None
    } else {
        let Some(unit) = unit else {
            return Err(format!("invalid rate limit unit '{}'", limit.unit));
        };
        Some((limit.requests_per_unit, unit))
    };
    for r in &limit.replaces {
        if r.name.is_empty() {
            return Err("should not have an empty replaces entry".into());
        }
        if r.name == limit.name {
            return Err("replaces should not contain name of same descriptor".into());
        }
    }
    let algorithm = match quota {
        Some((n, unit)) => {
            crate::rules::algorithm(limit.algorithm.as_deref(), n, unit, limit.burst)
                .map_err(|e| format!("{full_key}: {e}"))?
        }
        None if limit.algorithm.is_some() || limit.burst.is_some() || limit.hot_keys.is_some() => {
            return Err(format!(
                "{full_key}: an unlimited descriptor has no algorithm, burst or hot_keys"
            ))
        }
        None => None,
    };
    let limit_name = crate::rules::limit_name('d', full_key);
    let hot_keys = match (limit.hot_keys, algorithm) {
        (None, _) => None,
        (Some(hot), Some(algorithm)) => {
            let mut hot_keys = HotKeys::new(hot.servers);
            if let Some(per_second) = hot.threshold {
                hot_keys = hot_keys.threshold(per_second);
            }
            crate::hot::check(&limit_name, algorithm, hot_keys)
                .map_err(|e| format!("{full_key}: hot_keys: {e}"))?;
            Some(hot_keys)
        }
        // requests_per_unit 0: every request is over, nothing to share.
        (Some(_), None) => None,
    };
    Ok(Rule {
        limit: limit_name,
        hot_keys,
        name: limit.name,
        replaces: limit.replaces.into_iter().map(|r| r.name).collect(),
        quota,
        algorithm,
        shadow,
        detailed_metric,
        metadata: None,
        quota_mode: false,
    })
}
