//! Rules with `hot_keys`: each decided by a limiter of its own whose own
//! limit is the rule's, since the library shares a hot key's quota by
//! slices for a limiter's own limits only. It has the service limiter's
//! store, name, failure policy and timeout, and its one limit the rule's
//! name, so its counters are the very keys the rule has without
//! `hot_keys` (`{prefix}:rls/{limit}:…`): turning it on or off keeps them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use floodgate::algorithm::{AnyAlgorithm, Limits};
use floodgate::store::MemoryStore;
use floodgate::{ConfigError, Error, HotKeys, Limiter};

/// Whether `algorithm` under the name `limit` takes `hot_keys`: as the
/// library's builder says (not a sliding log or a leaky bucket; a slice of
/// at least 2 units).
pub(crate) fn check(
    limit: &str,
    algorithm: AnyAlgorithm,
    hot_keys: HotKeys,
) -> Result<(), ConfigError> {
    let limits = Limits::try_new(limit, algorithm)?;
    Limiter::builder(MemoryStore::new(), limits)
        .hot_keys(hot_keys)
        .build()
        .map(drop)
}

/// The limiters of the rules with `hot_keys`, for one service limiter:
/// built when a rule is first met, kept across reloads while the rule
/// stays the same (a limiter holds its slices and its counts of how hot
/// each value is).
pub(crate) struct HotLimiters {
    timeout: Duration,
    /// By the rule's limit name.
    built: Mutex<HashMap<String, Built>>,
}

/// A rule's limiter, and what it was built for.
struct Built {
    algorithm: AnyAlgorithm,
    hot_keys: HotKeys,
    limiter: Limiter<Limits>,
}

impl HotLimiters {
    pub(crate) fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            built: Mutex::default(),
        }
    }

    /// The limiter of the rule named `limit`, deciding `algorithm` with
    /// `hot_keys` beside `base`.
    pub(crate) fn of(
        &self,
        base: &Limiter<Limits>,
        limit: &str,
        algorithm: AnyAlgorithm,
        hot_keys: HotKeys,
    ) -> Result<Limiter<Limits>, Error> {
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(b) = built.get(limit) {
            if b.algorithm == algorithm && b.hot_keys == hot_keys {
                return Ok(b.limiter.clone());
            }
        }
        let limits = Limits::try_new(limit, algorithm).map_err(Error::Unsupported)?;
        let limiter = Limiter::builder(base.store().clone(), limits)
            .name(base.name())
            .timeout(self.timeout)
            .on_store_failure(base.failure_policy().clone())
            .hot_keys(hot_keys)
            .build()
            .map_err(Error::Unsupported)?;
        let kept = Built {
            algorithm,
            hot_keys,
            limiter: limiter.clone(),
        };
        built.insert(limit.to_owned(), kept);
        Ok(limiter)
    }
}
