//! The in-process store: the algorithms' Rust twins over sharded hash tables.

mod evict;
mod shard;

use self::shard::{Hasher, Shard, ShardCall, Slot, HASHED};
use super::key::bounded;
use super::{Answer, Backend, Batch, Mode, Namespace, Reply, Store, Target};
use parking_lot::{Mutex as ShardLock, MutexGuard};
use smallvec::{smallvec, SmallVec};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

/// Default bound on the number of keys held at once.
pub const DEFAULT_MAX_KEYS: NonZeroUsize = NonZeroUsize::new(1_000_000).unwrap();

/// Keeps rate-limit state in this process: the default for one server, and
/// for trying floodgate out. Decisions are the same as on Redis, decision by
/// decision; only the state is not shared between processes.
///
/// A decision on it never waits and never fails: it is made at once, inside
/// the call that asks for it (no future, no timeout, no circuit breaker).
/// So it never yields to the async runtime either, as a call of governor's
/// would not: a task that decides in a loop with nothing else to await
/// should yield now and then (`tokio::task::yield_now().await`), as around
/// any loop of CPU work.
///
/// Concurrent: keys are spread over independently locked shards. Bounded:
/// state a key no longer needs expires and is swept as the map grows, and at
/// most `max_keys` keys are held (a little less when `max_keys` is not a
/// multiple of the number of shards). A new key is never denied for lack of
/// room: when its shard is full, one entry of the shard is evicted for it.
///
/// # Eviction
///
/// Evicting a key resets its limit (its next request is a fresh key's), so
/// the store evicts what loosens limits least, in this order:
///
/// 1. an entry whose state is a fresh key's: nothing used, or expired;
/// 2. the entry with the least of its quota used (fixed window: the count
///    of the current window / limit; sliding log: the requests still in the
///    window / limit; sliding window: the weighted estimate / limit; token
///    bucket, leaky bucket, GCRA: the backlog left / a full one, burst ×
///    interval; concurrency: the leases alive / max), the least recently
///    decided first among equals;
/// 3. last, an entry at its limit (a request of cost 1 would be denied):
///    the least recently decided (a denial counts: a key that keeps being
///    tried stays recent), then the soonest to expire.
///
/// It looks at 16 entries from a random place in the shard and evicts the
/// first of them in that order. If all 16 are at their limit, it searches on
/// through the shard for one that is not, within a budget of 16 entries per
/// new key (saved up to one whole shard while unused): a new key costs
/// about 32 entries looked at at most, on average, even when the whole
/// store is at its limit ([`MemoryStats::searched`] counts them).
///
/// What that means under a spray of new keys (an attacker rotating
/// usernames to get more login attempts on one account):
///
/// - A key at its limit is never evicted while the sample or the search
///   finds keys with quota left, which they do as long as such keys are not
///   rare in the shard. When the sprayed keys each make fewer requests than
///   their limit, they are most of it: spraying any number of such keys
///   does not give a key at its limit one more request. The keys with
///   quota left are what the spray evicts (often its own keys), and each of
///   them loses only what it had used.
/// - To get a key at its limit evicted, an attacker must first bring nearly
///   every key of the key's shard to its limit, about `limit` requests for
///   each of `max_keys` keys, and then outlast the key in recency: a key
///   still being tried is evicted after those that are not.
///   With a limit of 1, one request brings a key to its limit, so a spray
///   of `max_keys` keys is enough. [`MemoryStats::evicted_at_limit`] counts
///   these evictions; where it grows, raise `max_keys` or keep the state in
///   Redis.
///
/// Recency is the time of the last decision, in ms: keys decided within the
/// same ms are equally recent. Each entry's usage is read against the limit
/// its namespace's keys were last written under.
///
/// Cheap to clone: clones share the same state.
///
/// ```
/// use floodgate::store::MemoryStore;
/// use std::num::NonZeroUsize;
/// let store = MemoryStore::new();
/// let small = MemoryStore::with_max_keys(NonZeroUsize::new(10_000).unwrap());
/// ```
#[derive(Clone)]
pub struct MemoryStore {
    inner: Arc<Sharded>,
}

/// What a [`MemoryStore`] holds and what keeping it bounded has cost, from
/// [`MemoryStore::stats`]: for dashboards, and for checking that the cost of
/// new keys stays amortized O(1) without timing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryStats {
    /// Keys held now, expired ones not yet swept included.
    pub keys: usize,
    /// Entries sweeps have visited so far, to drop the expired ones.
    pub swept: u64,
    /// Entries evicted so far to make room for new keys.
    pub evicted: u64,
    /// Of those, entries that were at their limit (a request of cost 1
    /// would have been denied): each of these evictions loosened a limit
    /// that was denying. They happen only when the store is full of keys at
    /// their limit (see [`MemoryStore`]'s eviction).
    pub evicted_at_limit: u64,
    /// Entries evictions looked at so far to choose what to evict: up to 16 per
    /// eviction, plus at most 16 per new key when samples held only keys
    /// at their limit (the unused part of that budget is saved, up to one
    /// shard's table).
    pub searched: u64,
}

struct Sharded {
    shards: Box<[Padded]>,
    hasher: Hasher,
    max_per_shard: usize,
    /// Ids of the namespaces limiters write to (`prefix:name:tag:`), so that
    /// a decision looks its key up without building a string.
    namespaces: Mutex<HashMap<Box<str>, u64>>,
}

/// A shard on cache lines of its own: two cores deciding keys of
/// neighbouring shards do not take each other's lines.
#[repr(align(128))]
struct Padded(ShardLock<Shard>);

impl MemoryStore {
    /// A store holding at most [`DEFAULT_MAX_KEYS`] keys.
    pub fn new() -> Self {
        Self::with_max_keys(DEFAULT_MAX_KEYS)
    }

    /// A store holding at most `max_keys` keys.
    pub fn with_max_keys(max_keys: NonZeroUsize) -> Self {
        // Calibrate the clock now rather than on the first decision.
        crate::clock::Clock::now_ms(&crate::clock::MonotonicClock);
        let max_keys = max_keys.get();
        let threads = std::thread::available_parallelism().map_or(4, NonZeroUsize::get);
        // Never more shards than keys, so every shard holds at least one and
        // their bounds add up to at most `max_keys`.
        let largest = 1 << max_keys.ilog2();
        let shards = (threads * 16)
            .next_power_of_two()
            .clamp(16, 1024)
            .min(largest);
        let max_per_shard = max_keys / shards;
        let hasher = Hasher::default();
        let shards = (0..shards)
            .map(|i| Shard::new(max_per_shard, hasher.hash_one(i)))
            .map(|shard| Padded(ShardLock::new(shard)))
            .collect();
        Self {
            inner: Arc::new(Sharded {
                shards,
                hasher,
                max_per_shard,
                namespaces: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The number of keys held now, expired ones not yet swept included.
    pub fn len(&self) -> usize {
        self.stats().keys
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the store holds, and what keeping it bounded has cost so far.
    pub fn stats(&self) -> MemoryStats {
        let mut stats = MemoryStats {
            keys: 0,
            swept: 0,
            evicted: 0,
            evicted_at_limit: 0,
            searched: 0,
        };
        for shard in &*self.inner.shards {
            let shard = lock(shard);
            stats.keys += shard.len();
            stats.swept += shard.swept;
            stats.evicted += shard.evictor.evicted;
            stats.evicted_at_limit += shard.evictor.evicted_at_limit;
            stats.searched += shard.evictor.searched;
        }
        stats
    }

    /// Drop every key whose state has expired at `now_ms` (the store does
    /// this by itself as it grows; this is for tests and for freeing memory
    /// after a spike).
    pub fn sweep(&self, now_ms: u64) {
        for shard in &*self.inner.shards {
            lock(shard).sweep(now_ms);
        }
    }
}

impl Sharded {
    /// The slot of `user` in namespace `ns`; `user` is the key as
    /// [`bounded`] made it, `hashed` when that is a hash of a long key (long
    /// keys are hashed as on Redis: they cannot blow up memory).
    #[inline]
    fn slot<'a>(&self, ns: u64, user: &'a str, hashed: bool) -> Slot<'a> {
        let ns = if hashed { ns | HASHED } else { ns };
        Slot {
            hash: self.hasher.hash_one((ns, user)),
            ns,
            user,
        }
    }

    fn shard(&self, slot: &Slot<'_>) -> usize {
        // Bits above those the table indexes with, below its tag bits.
        (slot.hash >> 32) as usize & (self.shards.len() - 1)
    }
}

impl Backend for Sharded {
    /// The id of namespace `head`, the same for every limiter writing to
    /// it, as the key's head is on Redis.
    fn namespace(&self, head: &str) -> Namespace {
        let mut ids = self
            .namespaces
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let next = ids.len() as u64 + 1;
        let id = *ids.entry(head.into()).or_insert(next);
        Namespace {
            id,
            head: head.into(),
        }
    }

    /// Every key decided first, and written only if all admit, as
    /// `lua/main.lua` does; one key in one pass.
    fn decide(&self, batch: &Batch<'_>) -> Answer {
        let now = batch
            .now
            .unwrap_or_else(|| crate::clock::Clock::now_ms(&crate::clock::MonotonicClock));
        let step = |i: usize, write: bool, lead: u64| ShardCall {
            batch,
            spec: &batch.targets[i].spec,
            now,
            write,
            lead,
            key: batch.key_of(i),
        };
        let max = self.max_per_shard;
        let user = bounded(batch.key);
        let hashed = matches!(user, Cow::Owned(_));
        if let [target] = batch.targets {
            let slot = self.slot(target.ns.id, &user, hashed);
            let (reply, _) = {
                let mut shard = lock(&self.shards[self.shard(&slot)]);
                // One target: its key is the batch's.
                let call = ShardCall {
                    key: batch.key,
                    ..step(0, true, 0)
                };
                shard.run(&self.hasher, &slot, call, max)
            };
            // Moved into the answer only after the unlock, which waits for
            // the twin's writes to reach the cache anyway. Moved before it,
            // the reply was read back in 16-byte pieces over the twin's
            // 8-byte writes still on their way, a stall: 9 % of this
            // function's samples under perf, and 79.7 -> 75.7 ns a GCRA
            // decision (fastest of 12 runs each, BENCHMARKS.md).
            return Answer::One(reply);
        }
        // Each target's own key, when the call decides several.
        let users: SmallVec<[Cow<'_, str>; 4]> = (0..batch.keys.len())
            .map(|i| bounded(batch.key_of(i)))
            .collect();
        let slots: SmallVec<[Slot<'_>; 4]> = batch
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| match users.get(i) {
                Some(u) => self.slot(t.ns.id, u, matches!(u, Cow::Owned(_))),
                None => self.slot(t.ns.id, &user, hashed),
            })
            .collect();
        // Lock every shard involved once, in index order so that two calls
        // never wait on each other; `held[i]` is the guard of `slots[i]`.
        let mut order: SmallVec<[(usize, usize); 4]> = slots
            .iter()
            .enumerate()
            .map(|(i, s)| (self.shard(s), i))
            .collect();
        order.sort_unstable();
        let mut guards: SmallVec<[MutexGuard<'_, Shard>; 4]> = SmallVec::new();
        let mut held: SmallVec<[usize; 4]> = smallvec![0; slots.len()];
        let mut last = None;
        for (shard, i) in order {
            if last != Some(shard) {
                guards.push(lock(&self.shards[shard]));
                last = Some(shard);
            }
            held[i] = guards.len() - 1;
        }
        let mut pass = |write: bool, lead: u64| -> Vec<Reply> {
            slots
                .iter()
                .enumerate()
                .map(|(i, slot)| {
                    guards[held[i]]
                        .run(&self.hasher, slot, step(i, write, lead), max)
                        .0
                })
                .collect()
        };
        let mut decided = pass(false, 0);
        // A limit in shadow mode denies nothing (`lua/main.lua`).
        let admits = |(r, t): (&Reply, &Target)| r.allowed() || t.shadow;
        let all = |d: &[Reply]| d.iter().zip(batch.targets).all(admits);
        if !batch.mode.twin().1 || !all(&decided) {
            return Answer::PerTarget(decided);
        }
        // A reservation waits for the longest of its limits (whole ms, as
        // the replies say it): each is decided again as booked then, and
        // charged from then on (`lua/main.lua`).
        let mut lead = 0;
        if let Mode::Reserve { .. } = batch.mode {
            let waits = decided.iter().zip(batch.targets).filter(|(_, t)| !t.shadow);
            lead = waits
                .map(|(r, _)| r.delay_ms.max(0).unsigned_abs())
                .max()
                .unwrap_or(0);
            if lead > 0 {
                decided = pass(false, lead);
                if !all(&decided) {
                    return Answer::PerTarget(decided);
                }
            }
        }
        Answer::PerTarget(pass(true, lead))
    }
}

impl From<MemoryStore> for Store {
    fn from(s: MemoryStore) -> Self {
        Store::new(s.inner)
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl std::fmt::Debug for Sharded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.shards.len())
            .field("max_per_shard", &self.max_per_shard)
            .finish_non_exhaustive()
    }
}

/// A shard's lock. It does not poison: a thread that panicked mid-decision
/// leaves a valid map, so the others keep serving.
fn lock(m: &Padded) -> MutexGuard<'_, Shard> {
    m.0.lock()
}
