//! Hot keys on one app server: how often each key is decided here, and the
//! allotment (a slice of the key's quota, charged in the store) a hot key
//! is decided from. See [`HotKeys`](super::HotKeys) for what it guarantees.
//!
//! This is a step of the one decision path, not a path beside it:
//! [`Core::run`](super::core::Core::run) asks the table first for the
//! limiter's own limits, and a slice is taken by a store call of the same
//! path (`Core::decide`: guard, timeout, breaker, failure policy, metrics)
//! that also decides the request at hand (`decide.rs`).

use super::hot_keys::Sharing;
use super::outcome::Outcome;
use crate::store::key::bounded;
use hashbrown::HashMap;
use metrics::Counter;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

mod decide;

type Heats = HashMap<Box<str>, Heat, foldhash::fast::RandomState>;

/// The keys, and the latest instant the table has been shown.
#[derive(Default)]
struct Table {
    keys: Heats,
    /// Callers read the clock before they take the lock, so one that read
    /// it earlier can arrive after one that read it later. Every instant
    /// used under the lock is at least this one, and every instant stored
    /// is at most this one: time never runs backwards for a key, and
    /// `now - taken` cannot underflow.
    latest: u64,
}

impl Table {
    /// `at`, or the latest instant already seen if that is later.
    fn now(&mut self, at: u64) -> u64 {
        self.latest = self.latest.max(at);
        self.latest
    }
}

/// The end of a take under way, for a request that waits for it.
type TakeDone = Pin<Box<OwnedNotified>>;

/// A take that has not answered after this long is taken as lost (its
/// caller gave up): another request may take a slice.
const TAKE_STALE_MS: u64 = 1000;

/// The hot keys of one limiter's own limits on this server.
pub(crate) struct Allotments {
    sharing: Sharing,
    map: Mutex<Table>,
    counters: Counters,
    /// The id of the next take.
    takes: AtomicU64,
    /// The second of the last sweep of a full table, plus one (0: none).
    swept: AtomicU64,
    /// How long a request waits for a take under way (the limiter's
    /// timeout) before it asks the store alone.
    wait: Duration,
}

/// One key as this server sees it.
struct Heat {
    /// The second (of the limiter's clock) `count` is of, and the count of
    /// the second before.
    second: u64,
    count: u32,
    before: u32,
    held: Option<Allotment>,
    /// The last take found no room for a slice: until the store's retry
    /// time for one, requests are denied here with its answer, as of when.
    drained: Option<(u64, Outcome, u64)>,
    /// The take under way for this key: one at a time, so that a burst of
    /// requests takes one slice, not one each, and waits for it.
    taking: Option<Taking>,
}

struct Taking {
    id: u64,
    /// When it was sent.
    since: u64,
    done: Arc<Notify>,
}

/// A slice of a key's quota this server holds.
struct Allotment {
    units: u64,
    taken: u64,
    until: u64,
    /// The decisions of the call that took it, `remaining` as the store
    /// replied (without this slice).
    numbers: Outcome,
}

/// What the table says about one request.
pub(crate) enum AllotmentStep {
    /// Decided from the allotment.
    Local(Outcome),
    /// Ask the store, taking `want` units beside the request (take `id`).
    Take { want: u64, id: u64 },
    /// Wait for the take under way, then ask again.
    Wait(TakeDone),
    /// Ask the store for the request alone.
    Store,
}

struct Counters {
    local: Counter,
    taken: Counter,
    units_taken: Counter,
    units_returned: Counter,
    units_expired: Counter,
}

impl Allotments {
    pub(crate) fn new(sharing: Sharing, limiter: &str, wait: Duration) -> Self {
        let units = |event: &'static str| metrics::counter!("floodgate_allotment_units_total", "limiter" => limiter.to_owned(), "event" => event);
        let counters = Counters {
            local: metrics::counter!("floodgate_local_decisions_total", "limiter" => limiter.to_owned()),
            taken: metrics::counter!("floodgate_allotments_total", "limiter" => limiter.to_owned()),
            units_taken: units("taken"),
            units_returned: units("returned"),
            units_expired: units("expired"),
        };
        Self {
            sharing,
            map: Mutex::new(Table::default()),
            counters,
            takes: AtomicU64::new(0),
            swept: AtomicU64::new(0),
            wait,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A decision made here that the metrics count as a decision.
    pub(crate) fn counted_local(&self) {
        self.counters.local.increment(1);
    }

    /// What to do with a request of `cost` for `key` at `now`, and the
    /// units of an ended allotment to give back to the store (0: none).
    pub(crate) fn step(&self, key: &str, cost: u64, now: u64) -> (AllotmentStep, u64) {
        let mut table = self.lock();
        let now = table.now(now);
        let map = &mut table.keys;
        let key = bounded(key);
        if !map.contains_key(&*key) && !self.room(map, now) {
            return (AllotmentStep::Store, 0);
        }
        let heat = map.entry_ref(&*key).or_insert_with(|| Heat {
            second: now / 1000,
            count: 0,
            before: 0,
            held: None,
            drained: None,
            taking: None,
        });
        heat.count_one(now);
        let mut give_back = 0;
        if let Some(held) = &mut heat.held {
            if now < held.until && held.units >= cost {
                held.units -= cost;
                let since = Duration::from_millis(now - held.taken);
                let left = held.units;
                let numbers = held
                    .numbers
                    .map_each(|d| d.with_remaining(d.remaining() + left).aged(since));
                return (AllotmentStep::Local(numbers), 0);
            }
            // Ended, or too small for this request: what is left (less than
            // the cost, or expired) goes back where the algorithm allows.
            let left = held.units;
            heat.held = None;
            if self.sharing.gives_back() {
                give_back = left;
                self.counters.units_returned.increment(left);
            } else {
                self.counters.units_expired.increment(left);
            }
        }
        if let Some((until, numbers, asked)) = &heat.drained {
            if now < *until {
                let since = Duration::from_millis(now - asked);
                return (
                    AllotmentStep::Local(numbers.map_each(|d| d.aged(since))),
                    give_back,
                );
            }
            heat.drained = None;
        }
        if heat.count.max(heat.before) < self.sharing.threshold {
            return (AllotmentStep::Store, give_back);
        }
        if let Some(t) = heat
            .taking
            .as_ref()
            .filter(|t| now < t.since + TAKE_STALE_MS)
        {
            // Registered before the lock is let go: a fill cannot slip by.
            let mut done = Box::pin(t.done.clone().notified_owned());
            done.as_mut().enable();
            return (AllotmentStep::Wait(done), give_back);
        }
        let id = self.takes.fetch_add(1, Ordering::Relaxed);
        heat.taking = Some(Taking {
            id,
            since: now,
            done: Arc::new(Notify::new()),
        });
        let want = self.sharing.slice;
        (AllotmentStep::Take { want, id }, give_back)
    }

    /// Room for one more key. When the table is full, keys quiet for a
    /// second that hold no live slice and no take are forgotten, at most
    /// once a second: a spray of new keys meets a full table at the cost
    /// of a lookup, not a sweep each.
    fn room(&self, map: &mut Heats, now: u64) -> bool {
        if map.len() < self.sharing.max_keys {
            return true;
        }
        let second = now / 1000;
        if self.swept.swap(second + 1, Ordering::Relaxed) == second + 1 {
            return false;
        }
        map.retain(|_, h| {
            h.second + 1 >= second
                || h.held.as_ref().is_some_and(|a| now < a.until)
                || h.taking
                    .as_ref()
                    .is_some_and(|t| now < t.since + TAKE_STALE_MS)
        });
        map.len() < self.sharing.max_keys
    }

    /// Take `id`, sent at `sent`, got `want` units for `key`; `numbers` is
    /// its reply (the request's and the slice's charge).
    pub(crate) fn fill(&self, key: &str, id: u64, want: u64, sent: u64, numbers: &Outcome) {
        let lifetime = self
            .sharing
            .lifetime(want, numbers.each().map(|d| d.reset_after()));
        self.counters.taken.increment(1);
        self.counters.units_taken.increment(want);
        let mut table = self.lock();
        table.now(sent);
        let Some(heat) = table.keys.get_mut(&*bounded(key)) else {
            return; // Forgotten meanwhile: the units are lost, never doubled.
        };
        heat.drained = None;
        heat.held = Some(Allotment {
            units: want,
            taken: sent,
            until: sent.saturating_add(lifetime),
            numbers: numbers.clone(),
        });
        heat.end_take(id);
    }

    /// Take `id` for `key`, asked at `asked`, found no room for a slice:
    /// `denial` (of the cost and a slice) says until when.
    pub(crate) fn drained(&self, key: &str, id: u64, asked: u64, denial: &Outcome) {
        let Some(wait) = denial.overall().retry_after() else {
            return; // A slice never fits: ask the store each time.
        };
        let mut table = self.lock();
        table.now(asked);
        if let Some(heat) = table.keys.get_mut(&*bounded(key)) {
            let until = asked.saturating_add(crate::clock::millis(wait));
            heat.drained = Some((until, denial.clone(), asked));
            heat.end_take(id);
        }
    }

    /// Forget every key, and the room they took: the limits changed. The
    /// units held are left to expire; requests waiting for a take ask
    /// again (under the limits they started with).
    pub(crate) fn clear(&self) {
        let mut table = self.lock();
        for heat in table.keys.values_mut() {
            if let Some(t) = heat.taking.take() {
                t.done.notify_waiters();
            }
        }
        // The latest instant stays: time never runs backwards.
        table.keys = Heats::default();
    }

    /// Take `id` for `key` ended without a slice (or was given up).
    pub(crate) fn took_none(&self, key: &str, id: u64) {
        if let Some(heat) = self.lock().keys.get_mut(&*bounded(key)) {
            heat.end_take(id);
        }
    }
}

impl Heat {
    /// Take `id` is over: wake who waits for it (a later take stays).
    fn end_take(&mut self, id: u64) {
        if self.taking.as_ref().is_some_and(|t| t.id == id) {
            if let Some(t) = self.taking.take() {
                t.done.notify_waiters();
            }
        }
    }

    fn count_one(&mut self, now: u64) {
        let second = now / 1000;
        if second != self.second {
            self.before = if second == self.second + 1 {
                self.count
            } else {
                0
            };
            self.second = second;
            self.count = 0;
        }
        self.count = self.count.saturating_add(1);
    }
}
