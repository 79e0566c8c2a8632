//! Answers denials locally: once a key is denied until some time, the same
//! request is denied again without asking the store.

use crate::Decisions;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Denials of this limiter, by storage key (of its first policy).
pub(crate) struct DenyCache {
    max: usize,
    map: Mutex<HashMap<Box<str>, Denied, foldhash::fast::RandomState>>,
}

struct Denied {
    /// When the store's answer was asked, on the limiter's clock (ms): the
    /// store decided no earlier, so its retry counts from no earlier.
    asked: u64,
    /// Until when the same or a costlier request is certainly denied.
    until: u64,
    cost: u64,
    decisions: Decisions,
}

impl DenyCache {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            map: Mutex::new(HashMap::default()),
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Denied, foldhash::fast::RandomState>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached denial of `key` for a request of `cost` at `now`, with its
    /// waits shortened by the time since.
    pub(crate) fn get(&self, key: &str, cost: u64, now: u64) -> Option<Decisions> {
        let map = self.lock();
        let d = map.get(key)?;
        // Only the same cost: a costlier request may never fit at all (no
        // retry), and its wait would be another.
        if now >= d.until || cost != d.cost {
            return None;
        }
        let since = Duration::from_millis(now.saturating_sub(d.asked));
        let mut out = d.decisions.clone();
        for p in out
            .each
            .iter_mut()
            .map(|p| &mut p.decision)
            .chain([&mut out.combined])
        {
            p.retry_after = p.retry_after.map(|r| r.saturating_sub(since));
            p.reset_after = p.reset_after.saturating_sub(since);
        }
        Some(out)
    }

    /// Remember a denial asked at `asked`, if waiting helps at all.
    pub(crate) fn put(&self, key: &str, cost: u64, asked: u64, decisions: &Decisions) {
        let d = &decisions.combined;
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
        let until = asked.saturating_add(retry.as_millis() as u64);
        map.insert(
            key.into(),
            Denied {
                asked,
                until,
                cost,
                decisions: decisions.clone(),
            },
        );
    }

    /// Forget `key`: a refund made room.
    pub(crate) fn forget(&self, key: &str) {
        self.lock().remove(key);
    }
}
