//! The in-process store: the algorithms' Rust twins over sharded hash maps.

use super::StoreError;
use crate::algorithm::{Reply, Spec, State};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

/// Default bound on the number of keys held at once.
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// How many entries an eviction looks at to find the one closest to expiry.
const EVICTION_SAMPLE: usize = 16;

/// Keeps rate-limit state in this process: the default for one server, and
/// for trying floodgate out. Decisions are the same as on Redis, decision by
/// decision; only the state is not shared between processes.
///
/// Concurrent: keys are spread over independently locked shards. Bounded:
/// state a key no longer needs expires and is swept as the map grows, and at
/// most `max_keys` keys are held. When a new key arrives at that bound, the
/// entry closest to expiry among a sample is evicted (like Redis'
/// `volatile-ttl`): that can only loosen the limit of the evicted key, and
/// never denies anybody for lack of room.
///
/// Cheap to clone: clones share the same state.
///
/// ```
/// use floodgate::store::MemoryStore;
/// let store = MemoryStore::new();
/// let small = MemoryStore::with_max_keys(10_000);
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

struct Inner {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    max_per_shard: usize,
}

struct Shard {
    map: HashMap<Box<str>, Entry, foldhash::fast::RandomState>,
    /// Sweep expired entries when the map reaches this size.
    sweep_at: usize,
}

struct Entry {
    state: Option<State>,
    expires_at: u64,
}

/// Sweeps never run on maps smaller than this: sweeping tiny maps buys nothing.
const MIN_SWEEP: usize = 256;

impl MemoryStore {
    /// A store holding at most [`DEFAULT_MAX_KEYS`] keys.
    pub fn new() -> Self {
        Self::with_max_keys(DEFAULT_MAX_KEYS)
    }

    /// A store holding at most `max_keys` keys (at least one per shard).
    pub fn with_max_keys(max_keys: usize) -> Self {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        let shards = (threads * 16).next_power_of_two().clamp(16, 1024);
        let max_per_shard = max_keys.div_ceil(shards).max(1);
        let shards = (0..shards)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashMap::default(),
                    sweep_at: MIN_SWEEP.min(max_per_shard),
                })
            })
            .collect();
        Self {
            inner: Arc::new(Inner {
                shards,
                hasher: foldhash::fast::RandomState::default(),
                max_per_shard,
            }),
        }
    }

    /// The number of keys held now, expired ones not yet swept included.
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| lock(s).map.len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drop every key whose state has expired at `now_ms`.
    pub fn sweep(&self, now_ms: u64) {
        for shard in self.inner.shards.iter() {
            lock(shard).map.retain(|_, e| e.expires_at > now_ms);
        }
    }

    pub(crate) fn decide(
        &self,
        spec: &Spec,
        key: &str,
        now: u64,
        cost: u64,
        dry: bool,
    ) -> Result<Reply, StoreError> {
        let i = self.inner.hasher.hash_one(key) as usize & (self.inner.shards.len() - 1);
        let mut shard = lock(&self.inner.shards[i]);
        if let Some(entry) = shard.map.get_mut(key) {
            if entry.expires_at <= now {
                entry.state = None;
            }
            let (reply, write) = spec.decide(&mut entry.state, now, cost, dry);
            if let Some(ttl) = write {
                entry.expires_at = now.saturating_add(ttl);
            }
            return Ok(reply);
        }
        let mut state = None;
        let (reply, write) = spec.decide(&mut state, now, cost, dry);
        if let Some(ttl) = write {
            shard.make_room(now, self.inner.max_per_shard);
            let expires_at = now.saturating_add(ttl);
            shard.map.insert(key.into(), Entry { state, expires_at });
        }
        Ok(reply)
    }
}

impl Shard {
    fn make_room(&mut self, now: u64, max: usize) {
        if self.map.len() >= self.sweep_at {
            self.map.retain(|_, e| e.expires_at > now);
            // Amortized: the next sweep waits until the map has doubled.
            self.sweep_at = (self.map.len() * 2).clamp(MIN_SWEEP.min(max), max);
        }
        while self.map.len() >= max {
            let victim = self
                .map
                .iter()
                .take(EVICTION_SAMPLE)
                .min_by_key(|(_, e)| e.expires_at)
                .map(|(k, _)| k.clone());
            match victim {
                Some(k) => self.map.remove(&k),
                None => break,
            };
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .field("max_per_shard", &self.inner.max_per_shard)
            .finish()
    }
}

/// A poisoned shard only means another thread panicked mid-decision; the
/// state is still a valid map, so keep serving.
fn lock(m: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
