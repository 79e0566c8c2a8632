//! envoyproxy/ratelimit's configuration files, read as they are.
//!
//! One YAML file per domain:
//!
//! ```yaml
//! domain: edge
//! descriptors:
//!   - key: remote_address          # every value: a counter per address
//!     rate_limit: { unit: second, requests_per_unit: 50 }
//!   - key: path
//!     value: /upload               # this value only
//!     rate_limit: { unit: minute, requests_per_unit: 20 }
//!   - key: path
//!     value: /static/*             # values starting with /static/
//!     rate_limit: { unlimited: true }
//!   - key: api_key
//!     descriptors:                 # nested: api_key, then plan
//!       - key: plan
//!         value: free
//!         rate_limit:
//!           unit: minute
//!           requests_per_unit: 60
//!           algorithm: gcra        # floodgate's: any of the six
//!           burst: 10
//! ```
//!
//! Every field of envoyproxy/ratelimit's format is read (`domain`,
//! `descriptors`, `key`, `value` with `*` wildcards, `rate_limit` with
//! `unit` from `second` to `year`, `requests_per_unit`, `unlimited`, `name`,
//! `replaces`; `shadow_mode`, `detailed_metric`, `value_to_metric`,
//! `share_threshold`, `quota_mode`: see [`crate::RateLimitService::quota_mode`];
//! `metadata`: a map the answer's dynamic metadata carries when the
//! descriptor's status is not `OVER_LIMIT`, with `--response-dynamic-metadata`),
//! with its checks and its messages.
//! floodgate's additions, all optional: `algorithm` (`fixed_window`, the
//! default, so a file behaves as it did; `sliding_window`, `sliding_log`,
//! `gcra`, `token_bucket`, `leaky_bucket`), `burst` (GCRA's burst, a
//! bucket's capacity) and `hot_keys` (`{ servers: 3, threshold: 100 }`: a
//! value decided that often a second on an instance takes slices of its
//! quota and is decided from them, see [`floodgate::HotKeys`]; not for
//! `sliding_log` or `leaky_bucket`) in a `rate_limit`; `failure_policy` (`error`,
//! `allow`, `deny`) at the top of a file, for that domain's requests when
//! the store fails (else `--on-store-failure`'s).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::rules::{Level, Rules, Wildcard};
use crate::OnStoreFailure;

mod rate_limit;

use rate_limit::{rule, RateLimitYaml};

/// Why a configuration was refused: the file and the reason, as
/// envoyproxy/ratelimit words it where it has the same check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFileError {
    file: String,
    reason: String,
}

impl ConfigFileError {
    pub(crate) fn new(file: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            file: file.into(),
            reason: reason.into(),
        }
    }

    /// The file (or directory) refused.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// What is wrong in it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.reason)
    }
}

impl std::error::Error for ConfigFileError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileYaml {
    #[serde(default)]
    domain: String,
    #[serde(default)]
    descriptors: Vec<DescriptorYaml>,
    /// floodgate's: what this domain's requests get when the store fails.
    failure_policy: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescriptorYaml {
    #[serde(default)]
    key: String,
    #[serde(default)]
    value: String,
    rate_limit: Option<RateLimitYaml>,
    #[serde(default)]
    descriptors: Vec<DescriptorYaml>,
    #[serde(default)]
    shadow_mode: bool,
    #[serde(default)]
    detailed_metric: bool,
    #[serde(default)]
    value_to_metric: bool,
    #[serde(default)]
    share_threshold: bool,
    quota_mode: Option<bool>,
    metadata: Option<serde_yaml::Value>,
}

/// Read the configuration at `path`: one YAML file, or a directory whose
/// `*.yaml` and `*.yml` files (not those in its subdirectories) are read
/// in name order. Each file holds one domain; a domain in two files is
/// refused (see [`load_with`] to merge them).
///
/// # Errors
/// A [`ConfigFileError`] naming the file and what is wrong.
pub fn load(path: &Path) -> Result<Rules, ConfigFileError> {
    load_with(path, false)
}

/// [`load`], and with `merge_domains` a domain may be in several files
/// ([`Rules::merging_domains`]).
///
/// # Errors
/// A [`ConfigFileError`] naming the file and what is wrong.
pub fn load_with(path: &Path, merge_domains: bool) -> Result<Rules, ConfigFileError> {
    let mut rules = if merge_domains {
        Rules::merging_domains()
    } else {
        Rules::default()
    };
    for file in files(path)? {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(&file)
            .map_err(|e| ConfigFileError::new(&name, e.to_string()))?;
        add_file(&mut rules, &name, &text)?;
    }
    Ok(rules)
}

/// The files `load` reads at `path`.
pub(crate) fn files(path: &Path) -> Result<Vec<PathBuf>, ConfigFileError> {
    let error = |e: std::io::Error| ConfigFileError::new(path.display().to_string(), e.to_string());
    if !path.is_dir() {
        std::fs::metadata(path).map_err(error)?;
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(error)? {
        let file = entry.map_err(error)?.path();
        let yaml = matches!(
            file.extension().and_then(|e| e.to_str()),
            Some("yaml" | "yml")
        );
        if yaml && file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}

/// Read one file's text into `rules` (`name` is what errors call it).
///
/// # Errors
/// A [`ConfigFileError`] naming `name` and what is wrong.
pub fn add_file(rules: &mut Rules, name: &str, text: &str) -> Result<(), ConfigFileError> {
    let err = |reason: String| ConfigFileError::new(name, reason);
    let file: FileYaml =
        serde_yaml::from_str(text).map_err(|e| err(format!("config error, {e}")))?;
    if file.domain.is_empty() {
        return Err(err("config file cannot have empty domain".into()));
    }
    if rules.domains.contains_key(&file.domain) && !rules.merge_domains {
        return Err(err(format!(
            "duplicate domain '{}' in config file",
            file.domain
        )));
    }
    let policy = match file.failure_policy.as_deref() {
        None => None,
        Some("error") => Some(OnStoreFailure::Error),
        Some("allow") => Some(OnStoreFailure::Allow),
        Some("deny") => Some(OnStoreFailure::Deny),
        Some(other) => {
            return Err(err(format!(
                "invalid failure_policy '{other}' (error, allow, deny)"
            )))
        }
    };
    let mut root = Level::default();
    let parent = format!("{}.", file.domain);
    load_descriptors(&mut root, &parent, file.descriptors).map_err(err)?;
    if let (Some(policy), Some(before)) = (policy, rules.policies.get(&file.domain)) {
        if policy != *before {
            return Err(err(format!(
                "domain '{}' has another failure_policy in another file",
                file.domain
            )));
        }
    }
    if let Some(policy) = policy {
        rules.policies.insert(file.domain.clone(), policy);
    }
    match rules.domains.get_mut(&file.domain) {
        // A domain of an earlier file (merging): its descriptors and
        // these, none in both.
        Some(earlier) => {
            for (key, child) in root.children {
                if earlier.children.contains_key(&key) {
                    return Err(err(format!(
                        "duplicate descriptor composite key '{parent}{key}'"
                    )));
                }
                earlier.children.insert(key, child);
            }
            earlier.wildcards.extend(root.wildcards);
        }
        None => {
            rules.domains.insert(file.domain, root);
        }
    }
    Ok(())
}

fn load_descriptors(
    node: &mut Level,
    parent: &str,
    descriptors: Vec<DescriptorYaml>,
) -> Result<(), String> {
    let mut children = HashMap::new();
    for d in descriptors {
        if d.key.is_empty() {
            return Err("descriptor has empty key".into());
        }
        let metadata = d
            .metadata
            .map(crate::metadata::from_yaml)
            .transpose()
            .map_err(|e| format!("{parent}{}: error parsing metadata: {e}", d.key))?;
        let final_key = if d.value.is_empty() {
            d.key.clone()
        } else {
            format!("{}_{}", d.key, d.value)
        };
        let full_key = format!("{parent}{final_key}");
        if children.contains_key(&final_key) {
            return Err(format!("duplicate descriptor composite key '{full_key}'"));
        }
        let wildcard = final_key.contains('*');
        if d.share_threshold && !wildcard {
            return Err(format!(
                "share_threshold can only be used with wildcard values (containing '*'), but found key '{final_key}'"
            ));
        }
        let rule = match d.rate_limit {
            Some(limit) => {
                let mut rule = rule(limit, &full_key, d.shadow_mode, d.detailed_metric)?;
                rule.metadata = metadata.map(Arc::new);
                rule.quota_mode = d.quota_mode.unwrap_or(false);
                Some(Arc::new(rule))
            }
            None => None,
        };
        if wildcard {
            node.wildcards.push(Wildcard::new(&final_key));
        }
        let mut child = Level {
            rule,
            value_to_metric: d.value_to_metric,
            share_pattern: (d.share_threshold).then(|| {
                final_key
                    .strip_prefix(&format!("{}_", d.key))
                    .unwrap_or(&final_key)
                    .to_owned()
            }),
            ..Level::default()
        };
        load_descriptors(&mut child, &format!("{full_key}."), d.descriptors)?;
        children.insert(final_key, child);
    }
    node.children = children;
    Ok(())
}
