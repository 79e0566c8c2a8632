//! Answers denials locally: once a key is denied until some time, the same
//! request is denied again without asking the store.

use super::core::Decided;
use crate::store::key::bounded;
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

type Map = HashMap<Box<str>, Denied, foldhash::fast::RandomState>;

/// Denials of one limiter's own limits, by user key (its hash when long).
pub(crate) struct DenyCache {
    max: usize,
    map: Mutex<Map>,
}

struct Denied {
    /// When the store's answer was asked, on the limiter's clock (ms): the
    /// store decided no earlier, so its retry counts from no earlier.
    asked: u64,
    /// Until when the same request is certainly denied.
    until: u64,
    cost: u64,
    decided: Decided,
}

impl DenyCache {
    pub(crate) fn new(max: NonZeroUsize) -> Self {
        Self {
            max: max.get(),
            map: Mutex::new(HashMap::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Map> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached denial of `key` for a request of `cost` at `now`, with its
    /// waits shortened by the time since.
    pub(crate) fn get(&self, key: &str, cost: u64, now: u64) -> Option<Decided> {
        let map = self.lock();
        let d = map.get(&*bounded(key))?;
        // Only the same cost: a costlier request may never fit at all (no
        // retry), and its wait would be another.
        if now >= d.until || cost != d.cost {
            return None;
        }
        let since = Duration::from_millis(now.saturating_sub(d.asked));
        let mut out = d.decided.clone();
        for p in out.each.iter_mut().chain([&mut out.combined]) {
            p.retry_after = p.retry_after.map(|r| r.saturating_sub(since));
            p.reset_after = p.reset_after.saturating_sub(since);
        }
        Some(out)
    }

    /// Remember a denial asked at `asked`, if waiting helps at all.
    pub(crate) fn put(&self, key: &str, cost: u64, asked: u64, decided: &Decided) {
        let d = &decided.combined;
        let Some(retry) = d.retry_after.filter(|_| !d.allowed && !d.degraded) else {
            return;
        };
        let mut map = self.lock();
        if map.len() >= self.max {
            map.retain(|_, e| e.until > asked);
            if map.len() >= self.max {
                return; // Not caching is always correct.
            }
        }
        let until = asked.saturating_add(u64::try_from(retry.as_millis()).unwrap_or(u64::MAX));
        map.insert(
            bounded(key).into(),
            Denied {
                asked,
                until,
                cost,
                decided: decided.clone(),
            },
        );
    }

    /// Forget `key`: a refund made room, or an admission made the numbers stale.
    pub(crate) fn forget(&self, key: &str) {
        let mut map = self.lock();
        if !map.is_empty() {
            map.remove(&*bounded(key));
        }
    }
}
