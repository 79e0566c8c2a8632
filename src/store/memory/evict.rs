//! What a full shard evicts to make room for a new key: the entry whose
//! eviction loosens limits least.
//!
//! In order: an entry whose state is a fresh key's (nothing used, or
//! expired), then the least quota used, then the least recently decided.
//! An entry at its limit (one more unit would be denied) comes last: among
//! those, the least recently decided, then the soonest to expire.
//!
//! Cost: a sample of [`SAMPLE`] entries from a random place. Only when all
//! of them are at their limit does the search go on, from where the last
//! such search stopped, for as many entries as `credit` allows: every new
//! key adds [`SEARCH_PER_KEY`] to it, saved up to one whole table. So a new
//! key costs at most `SAMPLE + SEARCH_PER_KEY` entries looked at on average,
//! even when the whole shard is at its limit (a search of all of it finds
//! nothing; then the shard's next keys have little credit and evict the
//! best of their samples).

use super::shard::{Bucket, Entry, Key};
use crate::algorithm::{quota_used, Spec};
use hashbrown::HashTable;
use std::collections::HashMap;

/// Entries sampled per eviction.
pub(super) const SAMPLE: usize = 16;
/// Entries an eviction may search beyond its sample, per new key.
pub(super) const SEARCH_PER_KEY: usize = 16;

/// How a shard chooses what to evict, and what it has evicted.
pub(super) struct Evictor {
    /// The limit each namespace's keys were last written under: an entry's
    /// usage is read against it.
    specs: HashMap<u64, Spec, super::shard::Hasher>,
    /// State of the generator that picks where samples start (never 0).
    rng: u64,
    /// Where the search past an all-at-limit sample goes on.
    cursor: usize,
    /// Entries the search may still look at.
    credit: usize,
    /// Entries evicted to make room, ever.
    pub(super) evicted: u64,
    /// Of those, entries at their limit.
    pub(super) evicted_at_limit: u64,
    /// Entries evictions have looked at, ever.
    pub(super) searched: u64,
}

/// Which entry to evict first: the smallest.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    /// Nothing used, or expired: evicting it changes nothing.
    Fresh,
    /// Some quota left: the fraction used (in 2^-32), then when last decided.
    Left { used: u64, touched: u64 },
    /// At its limit: when last decided, then when it expires.
    Full { touched: u64, expires_at: u64 },
}

impl Evictor {
    pub(super) fn new(rng: u64) -> Self {
        Self {
            specs: HashMap::default(),
            rng: rng | 1,
            cursor: 0,
            credit: 0,
            evicted: 0,
            evicted_at_limit: 0,
            searched: 0,
        }
    }

    /// A new key of namespace `ns` is written under `spec`: remember the
    /// spec, and add to the search's credit.
    pub(super) fn inserted(&mut self, ns: u64, spec: &Spec, buckets: usize) {
        match self.specs.get_mut(&ns) {
            Some(known) if known == spec => {}
            Some(known) => *known = *spec,
            None => {
                self.specs.insert(ns, *spec);
            }
        }
        self.credit = (self.credit + SEARCH_PER_KEY).min(buckets.max(SEARCH_PER_KEY));
    }

    fn rank(&self, key: &Key, entry: &Entry, now: u64) -> Rank {
        let (Some(state), true) = (&entry.state, entry.expires_at > now) else {
            return Rank::Fresh;
        };
        let Some(spec) = self.specs.get(&key.ns()) else {
            return Rank::Fresh;
        };
        let usage = quota_used(spec, state, now, key.user());
        if usage.full {
            Rank::Full {
                touched: entry.touched,
                expires_at: entry.expires_at,
            }
        } else if usage.used <= 0.0 {
            Rank::Fresh
        } else {
            // In 0..=2^32: exact enough to order, and an integer to compare.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let used = (usage.used * 4_294_967_296.0) as u64;
            Rank::Left {
                used,
                touched: entry.touched,
            }
        }
    }

    /// Evict one entry of `table`, the first in [`Rank`] order among a
    /// sample (and a search when the sample is all at its limit). False
    /// only when the table is empty.
    pub(super) fn evict_one(&mut self, table: &mut HashTable<Bucket>, now: u64) -> bool {
        let buckets = table.num_buckets();
        if table.is_empty() || buckets == 0 {
            return false;
        }
        let start = usize::try_from(self.random() % buckets as u64).unwrap_or(0);
        let mut best: Option<(Rank, usize)> = None;
        let mut sampled = 0;
        for i in 0..buckets {
            let at = (start + i) % buckets;
            if let Some(b) = table.get_bucket(at) {
                let rank = self.rank(&b.key, &b.entry, now);
                if best.is_none_or(|(b, _)| rank < b) {
                    best = Some((rank, at));
                }
                sampled += 1;
                if sampled == SAMPLE || rank == Rank::Fresh {
                    break;
                }
            }
        }
        self.searched += sampled as u64;
        if let Some((Rank::Full { .. }, _)) = best {
            if let Some(found) = self.search(table, now) {
                best = Some(found);
            }
        }
        let Some((rank, at)) = best else {
            return false;
        };
        let Ok(found) = table.get_bucket_entry(at) else {
            return false;
        };
        found.remove();
        self.evicted += 1;
        if let Rank::Full { .. } = rank {
            self.evicted_at_limit += 1;
        }
        true
    }

    /// Look on from the cursor for an entry not at its limit, one unit of
    /// credit per slot of the table looked at; at most one whole table.
    fn search(&mut self, table: &HashTable<Bucket>, now: u64) -> Option<(Rank, usize)> {
        let buckets = table.num_buckets();
        let mut looked = 0;
        let mut found = None;
        while self.credit > 0 && looked < buckets {
            let at = self.cursor % buckets;
            self.cursor = (at + 1) % buckets;
            looked += 1;
            self.credit -= 1;
            if let Some(b) = table.get_bucket(at) {
                self.searched += 1;
                let rank = self.rank(&b.key, &b.entry, now);
                if !matches!(rank, Rank::Full { .. }) {
                    found = Some((rank, at));
                    break;
                }
            }
        }
        found
    }

    /// xorshift64: where samples start.
    fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}
