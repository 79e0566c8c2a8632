//! The in-process store: the algorithms' Rust twins over sharded hash maps.

use super::key::{hashed_user_key, MAX_KEY_BYTES};
use crate::algorithm::{Mode, Reply, Spec, State};
use hashbrown::HashTable;
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
/// most `max_keys` keys are held (a little less when `max_keys` is not a
/// multiple of the number of shards). When a new key arrives at that bound, the
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
    shards: Box<[Padded]>,
    hasher: foldhash::fast::RandomState,
    max_per_shard: usize,
    /// Ids of the namespaces limiters write to (`prefix:name:tag`), so that
    /// a decision looks its key up without building a string.
    namespaces: Mutex<HashMap<Box<str>, u64>>,
}

/// A key in the store: its namespace's id and the user key, as is (or its
/// hash when too long, with [`HASHED`] set in `ns`).
#[derive(PartialEq, Eq)]
struct Key {
    ns: u64,
    user: Box<str>,
}

/// Namespace 0 holds keys given whole (already `prefix:name:tag:{user}`).
pub(crate) const RAW: u64 = 0;
/// Set in a key's namespace when its user part is a hash of a long key.
const HASHED: u64 = 1 << 63;

/// A shard on cache lines of its own: two cores deciding keys of
/// neighbouring shards do not take each other's lines.
#[repr(align(128))]
struct Padded(Mutex<Shard>);

struct Shard {
    table: HashTable<(Key, Entry)>,
    /// Sweep expired entries when the map reaches this size.
    sweep_at: usize,
    /// New keys since the last sweep.
    inserts: usize,
    /// Entries visited by sweeps, ever (see `MemoryStore::sweep_work`).
    scanned: u64,
    /// State of the generator that picks eviction samples (never 0).
    rng: u64,
}

struct Entry {
    state: Option<State>,
    expires_at: u64,
}

/// Where a key lives: its hash, its shard, and the key itself (the user key
/// hashed when it is longer than the Redis store would keep).
struct Slot<'a> {
    hash: u64,
    ns: u64,
    user: std::borrow::Cow<'a, str>,
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
        // Calibrate the clock now rather than on the first decision.
        crate::clock::Clock::now_ms(&crate::clock::MonotonicClock);
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        // Never more shards than keys, so every shard holds at least one and
        // their bounds add up to at most `max_keys`.
        let max_keys = max_keys.max(1);
        let largest = 1 << max_keys.ilog2();
        let shards = (threads * 16)
            .next_power_of_two()
            .clamp(16, 1024)
            .min(largest);
        let max_per_shard = max_keys / shards;
        let hasher = foldhash::fast::RandomState::default();
        let shards = (0..shards)
            .map(|i| {
                Padded(Mutex::new(Shard {
                    table: HashTable::new(),
                    sweep_at: MIN_SWEEP.min(max_per_shard),
                    inserts: 0,
                    scanned: 0,
                    rng: hasher.hash_one(i) | 1,
                }))
            })
            .collect();
        Self {
            inner: Arc::new(Inner {
                shards,
                hasher,
                max_per_shard,
                namespaces: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The number of keys held now, expired ones not yet swept included.
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| lock(s).table.len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many entries sweeps have visited so far: what making room for new
    /// keys has cost. Tests use it to check that cost stays amortized O(1)
    /// per new key, without timing anything.
    #[doc(hidden)]
    pub fn sweep_work(&self) -> u64 {
        self.inner.shards.iter().map(|s| lock(s).scanned).sum()
    }

    /// Drop every key whose state has expired at `now_ms`.
    pub fn sweep(&self, now_ms: u64) {
        for shard in self.inner.shards.iter() {
            lock(shard).table.retain(|(_, e)| e.expires_at > now_ms);
        }
    }

    /// The id of namespace `name` (`prefix:name:tag`), the same for every
    /// limiter writing to it, as the key prefix is on Redis.
    pub(crate) fn namespace(&self, name: &str) -> u64 {
        let mut ids = self
            .inner
            .namespaces
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(&id) = ids.get(name) {
            return id;
        }
        let id = ids.len() as u64 + 1;
        ids.insert(name.into(), id);
        id
    }

    fn slot<'a>(&self, ns: u64, user: &'a str) -> Slot<'a> {
        // Long keys are hashed as on Redis: they cannot blow up memory.
        let (ns, user): (u64, std::borrow::Cow<str>) = if user.len() > MAX_KEY_BYTES {
            (ns | HASHED, hashed_user_key(user).into())
        } else {
            (ns, user.into())
        };
        Slot {
            hash: self.inner.hasher.hash_one((ns, &*user)),
            ns,
            user,
        }
    }

    fn shard(&self, slot: &Slot<'_>) -> usize {
        // Bits above those the table indexes with, below its tag bits.
        (slot.hash >> 32) as usize & (self.inner.shards.len() - 1)
    }

    /// Decide one key: the script's `main.lua` with one key. `ns` is from
    /// [`namespace`](Self::namespace), or [`RAW`] for a whole storage key.
    pub(crate) fn decide_one(
        &self,
        spec: &Spec,
        ns: u64,
        user: &str,
        now: u64,
        cost: u64,
        mode: Mode,
    ) -> Reply {
        let slot = self.slot(ns, user);
        let mut shard = lock(&self.inner.shards[self.shard(&slot)]);
        let max = self.inner.max_per_shard;
        let hasher = &self.inner.hasher;
        shard.run(
            hasher,
            spec,
            &slot,
            now,
            cost,
            mode,
            mode != Mode::Peek,
            max,
        )
    }

    /// The twin of `lua/concurrency.lua`: acquire or release a lease on the
    /// whole storage key `key`.
    pub(crate) fn lease(
        &self,
        key: &str,
        now: u64,
        op: &str,
        id: &str,
        max: u64,
        lease_ms: u64,
    ) -> [i64; 4] {
        let slot = self.slot(RAW, key);
        let mut shard = lock(&self.inner.shards[self.shard(&slot)]);
        let max_keys = self.inner.max_per_shard;
        let entry = shard.get_mut(&slot).filter(|e| e.expires_at > now);
        let mut leases = match entry.and_then(|e| e.state.take()) {
            Some(State::Leases(l)) => l,
            _ => Vec::new(),
        };
        let first_expiry = |l: &[(Box<str>, u64)]| {
            l.iter()
                .map(|(_, e)| *e as i64 - now as i64)
                .min()
                .unwrap_or(-1)
        };
        let (reply, ttl) = if op == "release" {
            leases.retain(|(i, _)| &**i != id);
            ([1, max as i64, leases.len() as i64, -1], None)
        } else {
            leases.retain(|(_, e)| *e > now);
            if leases.len() as u64 >= max {
                (
                    [0, max as i64, leases.len() as i64, first_expiry(&leases)],
                    None,
                )
            } else {
                leases.push((id.into(), now + lease_ms));
                (
                    [1, max as i64, leases.len() as i64, first_expiry(&leases)],
                    Some(lease_ms + 1000),
                )
            }
        };
        match shard.get_mut(&slot) {
            Some(e) => {
                e.state = Some(State::Leases(leases));
                if let Some(ttl) = ttl {
                    e.expires_at = now + ttl;
                }
            }
            None => {
                if let Some(ttl) = ttl {
                    let entry = Entry {
                        state: Some(State::Leases(leases)),
                        expires_at: now + ttl,
                    };
                    shard.insert(&self.inner.hasher, &slot, entry, now, max_keys);
                }
            }
        }
        reply
    }

    /// Decide several keys (namespace, user key) all or nothing, like the
    /// script: every key is decided first, and written only if all admit.
    pub(crate) fn decide_many(
        &self,
        targets: &[(u64, &str, &Spec)],
        now: u64,
        cost: u64,
        mode: Mode,
    ) -> Vec<Reply> {
        let slots: Vec<(Slot<'_>, &Spec)> = targets
            .iter()
            .map(|&(ns, user, spec)| (self.slot(ns, user), spec))
            .collect();
        // Lock every shard involved, in index order so that two calls
        // never wait on each other.
        let mut ids: Vec<usize> = slots.iter().map(|(s, _)| self.shard(s)).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut guards: Vec<_> = ids
            .iter()
            .map(|&i| (i, lock(&self.inner.shards[i])))
            .collect();
        let max = self.inner.max_per_shard;
        let hasher = &self.inner.hasher;
        let mut run = |slot: &Slot<'_>, spec: &Spec, write: bool| {
            let i = self.shard(slot);
            let shard = &mut guards
                .iter_mut()
                .find(|(j, _)| *j == i)
                .expect("locked above")
                .1;
            shard.run(hasher, spec, slot, now, cost, mode, write, max)
        };
        let replies: Vec<Reply> = slots.iter().map(|(k, s)| run(k, s, false)).collect();
        if mode == Mode::Peek || !replies.iter().all(|r| r.allowed) {
            return replies;
        }
        slots.iter().map(|(k, s)| run(k, s, true)).collect()
    }
}

impl Shard {
    fn get_mut(&mut self, slot: &Slot<'_>) -> Option<&mut Entry> {
        self.table
            .find_mut(slot.hash, |(k, _)| k.ns == slot.ns && *k.user == *slot.user)
            .map(|(_, e)| e)
    }

    fn insert(
        &mut self,
        hasher: &foldhash::fast::RandomState,
        slot: &Slot<'_>,
        entry: Entry,
        now: u64,
        max: usize,
    ) {
        self.make_room(now, max);
        let key = Key {
            ns: slot.ns,
            user: (*slot.user).into(),
        };
        self.table
            .insert_unique(slot.hash, (key, entry), |(k, _)| hash_of(hasher, k));
    }

    /// One key's twin, on this (locked) shard.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        hasher: &foldhash::fast::RandomState,
        spec: &Spec,
        slot: &Slot<'_>,
        now: u64,
        cost: u64,
        mode: Mode,
        write: bool,
        max: usize,
    ) -> Reply {
        let refund = mode == Mode::Refund;
        if let Some(entry) = self.get_mut(slot) {
            if entry.expires_at <= now {
                entry.state = None;
            }
            let (reply, ttl) = spec.decide(&mut entry.state, now, cost, refund, write);
            if let Some(ttl) = ttl {
                entry.expires_at = now.saturating_add(ttl);
            }
            return reply;
        }
        let mut state = None;
        let (reply, ttl) = spec.decide(&mut state, now, cost, refund, write);
        if let (Some(ttl), Some(_)) = (ttl, &state) {
            let expires_at = now.saturating_add(ttl);
            self.insert(hasher, slot, Entry { state, expires_at }, now, max);
        }
        reply
    }

    fn make_room(&mut self, now: u64, max: usize) {
        self.inserts += 1;
        // Amortized O(1) per new key: sweep when the map has doubled since
        // the last sweep, or, once it is full, after max/2 new keys. A full
        // shard is never scanned on every insert (a spray of new keys would
        // make each of them cost a whole shard, under its lock).
        let full = self.table.len() >= max;
        if self.table.len() >= self.sweep_at || (full && self.inserts > max / 2) {
            self.scanned += self.table.len() as u64;
            self.table.retain(|(_, e)| e.expires_at > now);
            self.sweep_at = (self.table.len() * 2).max(MIN_SWEEP.min(max));
            self.inserts = 0;
        }
        while self.table.len() >= max {
            // Evict the entry closest to expiry among a few from a random
            // place in the table (Redis does the same with `volatile-ttl`):
            // no key is more likely to be sampled than another.
            let buckets = self.table.num_buckets();
            let start = self.random() as usize;
            let mut victim: Option<(u64, usize)> = None;
            let mut sampled = 0;
            for i in 0..buckets {
                let at = (start + i) % buckets;
                if let Some((_, e)) = self.table.get_bucket(at) {
                    if victim.is_none_or(|(exp, _)| e.expires_at < exp) {
                        victim = Some((e.expires_at, at));
                    }
                    sampled += 1;
                    if sampled == EVICTION_SAMPLE {
                        break;
                    }
                }
            }
            let Some((_, at)) = victim else {
                break;
            };
            if let Ok(found) = self.table.get_bucket_entry(at) {
                found.remove();
            }
        }
    }

    /// xorshift64: where eviction samples start.
    fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

fn hash_of(hasher: &foldhash::fast::RandomState, k: &Key) -> u64 {
    hasher.hash_one((k.ns, &*k.user))
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
fn lock(m: &Padded) -> std::sync::MutexGuard<'_, Shard> {
    m.0.lock().unwrap_or_else(|p| p.into_inner())
}
