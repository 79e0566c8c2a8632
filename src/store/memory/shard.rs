//! One shard of the memory store: a hash table of keys and their state,
//! bounded by sweeping expired entries and evicting what loosens limits
//! least (`evict.rs`).

use super::evict::Evictor;
use crate::algorithm::{Reply, Spec, State, TwinMode, Write};
use crate::store::Batch;
use hashbrown::HashTable;
use smol_str::SmolStr;
use std::hash::BuildHasher;

/// Sweeps never run on maps smaller than this: sweeping tiny maps buys nothing.
pub(super) const MIN_SWEEP: usize = 256;

pub(super) type Hasher = foldhash::fast::RandomState;

/// A key in the store: its namespace's id and the user key, as is (or its
/// hash when too long, with [`HASHED`] set in the id). A user key of up to
/// 23 bytes is held in the bucket itself, a longer one on the heap.
// In the bucket, a lookup waits for one cache miss, not two: with the key
// in an allocation of its own (64-byte buckets), perf on the HTTP bench's
// server (two threads) put a third of the lookup's samples on reading the
// key's bytes, and the lookup at 2.34 % of all samples; with it here
// (80-byte buckets), 1.75 %. In process, one thread, unchanged: GCRA over
// 10 000 keys 63.1 ns against 63.5 (benches/memory.rs, alternated runs).
pub(super) struct Key {
    ns: u64,
    user: SmolStr,
}

impl Key {
    fn new(ns: u64, user: &str) -> Self {
        Self {
            ns,
            user: SmolStr::new(user),
        }
    }

    /// Whether this is the key of `user` in namespace `ns`.
    #[inline]
    fn is(&self, ns: u64, user: &str) -> bool {
        self.ns == ns && self.user == user
    }

    /// The namespace's id.
    pub(super) fn ns(&self) -> u64 {
        self.ns
    }

    /// The user key (as the store keeps it: hashed when long).
    pub(super) fn user(&self) -> &str {
        &self.user
    }
}

/// Set in a key's namespace when its user part is a hash of a long key.
pub(super) const HASHED: u64 = 1 << 63;

/// Where a key lives: its hash and the key itself (the user key hashed when
/// it is longer than the Redis store would keep, made once per batch).
/// Borrowed, not a `Cow`: a slot built from a `Cow` just written was copied
/// with wider loads than the writes, a stall on every memory-store
/// decision (8 % of its samples under perf, BENCHMARKS.md).
pub(super) struct Slot<'a> {
    pub(super) hash: u64,
    pub(super) ns: u64,
    pub(super) user: &'a str,
}

/// What the table holds: a key and its entry.
pub(super) struct Bucket {
    pub(super) key: Key,
    pub(super) entry: Entry,
}

pub(super) struct Entry {
    pub(super) state: Option<State>,
    pub(super) expires_at: u64,
    /// When a decision last read this key (ms), denials included: what
    /// eviction's "least recently decided" compares.
    pub(super) touched: u64,
}

pub(super) struct Shard {
    table: HashTable<Bucket>,
    /// Sweep expired entries when the map reaches this size.
    sweep_at: usize,
    /// New keys since the last sweep.
    inserts: usize,
    /// Entries visited by sweeps, ever.
    pub(super) swept: u64,
    /// What to evict when full, and what was.
    pub(super) evictor: Evictor,
}

/// What one decision of one key needs besides the key: the batch's cost,
/// mode and lease, read in place (a decision takes ~100 ns: copying the
/// batch's fields into a struct of their own would show).
#[derive(Clone, Copy)]
pub(super) struct ShardCall<'a> {
    pub(super) batch: &'a Batch<'a>,
    pub(super) spec: &'a Spec,
    pub(super) now: u64,
    /// Whether the state may be written (not in a batch's first pass).
    pub(super) write: bool,
    /// How far ahead a reservation of several limits is booked (ms; see
    /// `Sharded::decide`), else 0.
    pub(super) lead: u64,
    /// The target's user key (a jittered window's offset is its own).
    pub(super) key: &'a str,
}

impl Shard {
    pub(super) fn new(max: usize, rng: u64) -> Self {
        Self {
            table: HashTable::new(),
            sweep_at: MIN_SWEEP.min(max),
            inserts: 0,
            swept: 0,
            evictor: Evictor::new(rng),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Drop every entry expired at `now`.
    pub(super) fn sweep(&mut self, now: u64) {
        self.table.retain(|b| b.entry.expires_at > now);
    }

    fn get_mut(&mut self, slot: &Slot<'_>) -> Option<&mut Entry> {
        self.table
            .find_mut(slot.hash, |b| b.key.is(slot.ns, slot.user))
            .map(|b| &mut b.entry)
    }

    /// One key's twin, on this (locked) shard; the state is written only if
    /// the batch's mode and `step.write` allow it. Returns what the twin
    /// returned (the TTL already applied) as it wrote it: see
    /// `Sharded::decide` for why the reply is not moved out here.
    #[inline]
    pub(super) fn run(
        &mut self,
        hasher: &Hasher,
        slot: &Slot<'_>,
        step: ShardCall<'_>,
        max: usize,
    ) -> (Reply, Write) {
        let ShardCall {
            batch,
            spec,
            now,
            write,
            lead,
            key,
        } = step;
        let (refund, may_write, plain) = batch.mode.twin();
        let twin = (refund, may_write && write);
        let extras;
        let mode = if plain {
            &TwinMode::PLAIN
        } else {
            extras = batch.mode.extras(lead);
            &extras
        };
        let (cost, lease) = (batch.cost, batch.lease);
        if let Some(entry) = self.get_mut(slot) {
            entry.touched = now;
            if entry.expires_at <= now {
                entry.state = None;
            }
            let decided = spec.decide(&mut entry.state, now, cost, twin, mode, (lease, key));
            if let Some(ttl) = decided.1 {
                entry.expires_at = now.saturating_add(ttl);
            }
            return decided;
        }
        let mut state = None;
        let decided = spec.decide(&mut state, now, cost, twin, mode, (lease, key));
        if let (Some(ttl), Some(_)) = (decided.1, &state) {
            let expires_at = now.saturating_add(ttl);
            let entry = Entry {
                state,
                expires_at,
                touched: now,
            };
            self.insert(hasher, slot, spec, entry, (now, max));
        }
        decided
    }

    fn insert(
        &mut self,
        hasher: &Hasher,
        slot: &Slot<'_>,
        spec: &Spec,
        entry: Entry,
        (now, max): (u64, usize),
    ) {
        self.make_room(now, max);
        let buckets = self.table.num_buckets();
        self.evictor.inserted(slot.ns, spec, buckets);
        let key = Key::new(slot.ns, slot.user);
        self.table
            .insert_unique(slot.hash, Bucket { key, entry }, |b| {
                hasher.hash_one((b.key.ns(), b.key.user()))
            });
    }

    fn make_room(&mut self, now: u64, max: usize) {
        self.inserts += 1;
        // Amortized O(1) per new key: sweep when the map has doubled since
        // the last sweep, or, once it is full, after max/2 new keys. A full
        // shard is never scanned on every insert (a spray of new keys would
        // make each of them cost a whole shard, under its lock).
        let full = self.table.len() >= max;
        if self.table.len() >= self.sweep_at || (full && self.inserts > max / 2) {
            self.swept += self.table.len() as u64;
            self.sweep(now);
            self.sweep_at = (self.table.len() * 2).max(MIN_SWEEP.min(max));
            self.inserts = 0;
        }
        while self.table.len() >= max {
            if !self.evictor.evict_one(&mut self.table, now) {
                break;
            }
        }
    }
}
