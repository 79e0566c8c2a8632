//! Answers denials locally: once a key is denied until some time, the same
//! request is denied again without asking the store.

use super::outcome::Outcome;
use crate::store::key::bounded;
use crate::Decision;
use hashbrown::{Equivalent, HashMap};
use std::borrow::Cow;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

type Denials = HashMap<CachedKey, Denied, foldhash::fast::RandomState>;

/// A user key as the memory store bounds it (itself, or its hash when long), and
/// whether it is the hash: a short key may read like one.
#[derive(PartialEq, Eq, Hash)]
struct CachedKey {
    hashed: bool,
    key: Box<str>,
}

/// A [`CachedKey`] borrowed, for lookups that build no key.
#[derive(Hash)]
struct EntryRef<'a> {
    hashed: bool,
    key: &'a str,
}

impl Equivalent<CachedKey> for EntryRef<'_> {
    fn equivalent(&self, e: &CachedKey) -> bool {
        self.hashed == e.hashed && self.key == &*e.key
    }
}

/// Denials of one limiter's own limits, by user key: the key, or whether it
/// was hashed and its hash when long (a short key may read like a hash).
pub(crate) struct DenyCache {
    max: usize,
    map: Mutex<Denials>,
    /// The second of the last sweep of a full cache, plus one (0: none).
    swept: AtomicU64,
}

struct Denied {
    /// When the store's answer was asked, on the limiter's clock (ms): the
    /// store decided no earlier, so its retry counts from no earlier.
    asked: u64,
    /// Until when the same request is certainly denied.
    until: u64,
    cost: u64,
    decided: Outcome,
}

impl DenyCache {
    pub(crate) fn new(max: NonZeroUsize) -> Self {
        Self {
            max: max.get(),
            map: Mutex::new(HashMap::default()),
            swept: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Denials> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached denial of `key` for a request of `cost` at `now`, with its
    /// waits shortened by the time since.
    pub(crate) fn get(&self, key: &str, cost: u64, now: u64) -> Option<Outcome> {
        let map = self.lock();
        let key = bounded(key);
        let d = map.get(&entry_ref(&key))?;
        // Only the same cost: a costlier request may never fit at all (no
        // retry), and its wait would be another.
        if now >= d.until || cost != d.cost {
            return None;
        }
        let since = Duration::from_millis(now.saturating_sub(d.asked));
        Some(d.decided.map_each(|p| p.aged(since)))
    }

    /// Remember a denial asked at `asked` (`d`: what `decided` adds up
    /// to), if waiting helps at all.
    pub(crate) fn put(&self, key: &str, cost: u64, asked: u64, decided: &Outcome, d: &Decision) {
        let Some(retry) = d.retry_after().filter(|_| !d.allowed() && !d.is_degraded()) else {
            return;
        };
        let mut map = self.lock();
        if map.len() >= self.max {
            // Swept at most once a second: a spray of denials meets a full
            // cache at the cost of a lookup, not a sweep each.
            let second = asked / 1000 + 1;
            if self.swept.swap(second, Ordering::Relaxed) == second {
                return;
            }
            map.retain(|_, e| e.until > asked);
            if map.len() >= self.max {
                return; // Not caching is always correct.
            }
        }
        let until = asked.saturating_add(u64::try_from(retry.as_millis()).unwrap_or(u64::MAX));
        let key = bounded(key);
        let EntryRef { hashed, key } = entry_ref(&key);
        map.insert(
            CachedKey {
                hashed,
                key: key.into(),
            },
            Denied {
                asked,
                until,
                cost,
                decided: decided.clone(),
            },
        );
    }

    /// Forget every denial, and the room they took: the limits they were
    /// made under changed.
    pub(crate) fn clear(&self) {
        *self.lock() = Denials::default();
    }

    /// What the cache learns from a decision of the limiter's own limits
    /// asked at `asked`: a denial to remember, or an admission that makes
    /// what it remembers of the key stale.
    #[inline(never)]
    pub(crate) fn learn(&self, key: &str, cost: u64, asked: u64, d: &Outcome) {
        let overall = d.overall();
        if overall.allowed() {
            self.forget(key);
        } else {
            self.put(key, cost, asked, d, &overall);
        }
    }

    /// Forget `key`: a refund made room, or an admission made the numbers stale.
    pub(crate) fn forget(&self, key: &str) {
        let mut map = self.lock();
        if !map.is_empty() {
            map.remove(&entry_ref(&bounded(key)));
        }
    }
}

/// The entry of a bounded key: whether it is `Owned` says whether it is a hash.
#[allow(clippy::ptr_arg)]
fn entry_ref<'a>(key: &'a Cow<'_, str>) -> EntryRef<'a> {
    EntryRef {
        hashed: matches!(key, Cow::Owned(_)),
        key,
    }
}
