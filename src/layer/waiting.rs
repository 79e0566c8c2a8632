//! Waiting instead of refusing ([`RateLimitLayer::wait_up_to`]): a request
//! over the limit is booked at the earliest time its cost fits, at most the
//! layer's longest wait ahead (and never past a gRPC call's deadline), and
//! held until then. The requests waiting are bounded per key and in total
//! (a [`WaitingRoom`] of seats); a request that finds no seat is decided as
//! a check. One that is dropped while it waits (its client went away) gives
//! its reservation back.
//!
//! [`RateLimitLayer::wait_up_to`]: super::RateLimitLayer::wait_up_to

use super::rate_limit::RateLimitLayer;
use super::settle::Settlement;
use crate::algorithm::Algorithm;
use crate::key::KeyExtractor;
use crate::ConfigError;
use http::HeaderMap;
use metrics::{Counter, Gauge};
use smol_str::SmolStr;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Requests a layer holds at most, per key and in all, unless set with
/// [`RateLimitLayer::max_waiting`](super::RateLimitLayer::max_waiting).
pub(crate) const DEFAULT_PER_KEY: u32 = 100;
/// See [`DEFAULT_PER_KEY`].
pub(crate) const DEFAULT_TOTAL: usize = 10_000;

/// Where a layer's requests wait: how long at most, and how many.
pub(crate) struct WaitingRoom {
    pub(crate) max_wait: Duration,
    per_key: u32,
    total: usize,
    /// Seats taken, in all and per key (a key leaves the map with its last
    /// seat).
    taken: AtomicUsize,
    by_key: Mutex<HashMap<SmolStr, u32>>,
    /// `floodgate_waiting_requests`: the requests waiting now.
    waiting: Gauge,
    /// `floodgate_waits_total`, `end` = `served` / `gone`.
    served: Counter,
    gone: Counter,
}

impl WaitingRoom {
    pub(crate) fn new(limiter: &str, max_wait: Duration, per_key: u32, total: usize) -> Self {
        let name = limiter.to_owned();
        Self {
            max_wait,
            per_key,
            total,
            taken: AtomicUsize::new(0),
            by_key: Mutex::new(HashMap::new()),
            waiting: metrics::gauge!("floodgate_waiting_requests", "limiter" => name.clone()),
            served: metrics::counter!("floodgate_waits_total", "limiter" => name.clone(), "end" => "served"),
            gone: metrics::counter!("floodgate_waits_total", "limiter" => name, "end" => "gone"),
        }
    }

    /// The same room with other bounds (its counts start again: a layer's
    /// configuration is made before it serves).
    pub(crate) fn bounded(&self, limiter: &str, per_key: u32, total: usize) -> Self {
        Self::new(limiter, self.max_wait, per_key, total)
    }

    /// A seat for a request of `key`, if the room has one for it.
    pub(crate) fn seat(self: &Arc<Self>, key: &str) -> Option<Seat> {
        let total = self.taken.fetch_add(1, Ordering::AcqRel);
        if total >= self.total {
            self.taken.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let mut by_key = self
            .by_key
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = by_key.entry(SmolStr::new(key)).or_insert(0);
        if *n >= self.per_key {
            if *n == 0 {
                by_key.remove(key);
            }
            drop(by_key);
            self.taken.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        *n += 1;
        Some(Seat {
            room: Arc::clone(self),
            key: SmolStr::new(key),
            waiting: false,
        })
    }

    fn leave(&self, key: &str) {
        let mut by_key = self
            .by_key
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = by_key.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                by_key.remove(key);
            }
        }
        drop(by_key);
        self.taken.fetch_sub(1, Ordering::AcqRel);
    }

    /// How many seats are taken now (for tests and the debug output).
    pub(crate) fn taken(&self) -> usize {
        self.taken.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for WaitingRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoom")
            .field("max_wait", &self.max_wait)
            .field("per_key", &self.per_key)
            .field("total", &self.total)
            .field("taken", &self.taken())
            .finish_non_exhaustive()
    }
}

/// A request's place in the waiting room, from before its decision to the
/// end of its wait: given up when dropped.
pub(crate) struct Seat {
    room: Arc<WaitingRoom>,
    key: SmolStr,
    /// Whether the request is waiting (counted in the gauge).
    waiting: bool,
}

impl Drop for Seat {
    fn drop(&mut self) {
        if self.waiting {
            self.room.waiting.decrement(1.0);
        }
        self.room.leave(&self.key);
    }
}

/// A request held until its booked time: its seat (if the layer has a
/// waiting room) and its reservation, given back if the request is
/// dropped before its time (the client went away).
pub(crate) struct Waiter {
    seat: Option<Seat>,
    reservation: Option<Settlement>,
}

impl Waiter {
    /// A request starting to wait in `seat`, with the charge of
    /// `reservation` to give back if it never gets served.
    pub(crate) fn new(seat: Option<Seat>, reservation: Option<Settlement>) -> Self {
        let mut seat = seat;
        if let Some(seat) = &mut seat {
            seat.waiting = true;
            seat.room.waiting.increment(1.0);
        }
        Self { seat, reservation }
    }

    /// Its time has come: the request goes on, its charge kept.
    pub(crate) fn served(mut self) {
        self.reservation = None;
        if let Some(seat) = &self.seat {
            seat.room.served.increment(1);
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some(reservation) = self.reservation.take() {
            if let Some(seat) = &self.seat {
                seat.room.gone.increment(1);
            }
            // Owes nothing: the charge is given back.
            reservation.settle(0);
        }
    }
}

impl<K: KeyExtractor, A: Algorithm, C> RateLimitLayer<K, A, C> {
    /// Hold a request over the limit until its cost fits, when that is at
    /// most `max_wait` away, instead of answering 429 at once: the request
    /// is booked for that time
    /// ([`Limiter::reserve`](crate::Limiter::reserve): charged now, so the
    /// fleet never admits more than the limit) and the inner service is
    /// called then. A request that would wait longer is answered 429 at
    /// once, charged nothing, its `Retry-After` saying when a request
    /// would be held no longer than `max_wait`. A leaky bucket's delay is
    /// the same wait: with this set, bounded by `max_wait` too.
    ///
    /// - A client that goes away while its request waits (the response
    ///   future is dropped) gives its reservation back.
    /// - A gRPC call never waits past its `grpc-timeout`: when the wait
    ///   would exceed it the call is answered `RESOURCE_EXHAUSTED` at once
    ///   and nothing is booked (a leaky bucket's delay too, with or without
    ///   this setting).
    /// - The requests waiting are bounded, per key and in all
    ///   ([`max_waiting`](Self::max_waiting): 100 and 10 000 by default);
    ///   a request that finds no room is decided as it would be without
    ///   waiting (served now, or 429). The metrics show them:
    ///   `floodgate_waiting_requests` (a gauge) and
    ///   `floodgate_waits_total` (`end` = `served` / `gone`).
    /// - Requests charged only once their response is known
    ///   ([`count_only_when`](Self::count_only_when)) never wait.
    ///
    /// `Duration::ZERO` turns waiting off.
    ///
    /// ```
    /// # fn main() -> Result<(), floodgate::ConfigError> {
    /// use floodgate::{algorithm::Gcra, key::PeerIp, layer::RateLimitLayer, store::MemoryStore, Limiter};
    /// use std::time::Duration;
    ///
    /// let limiter = Limiter::new(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(limiter, PeerIp::new())
    ///     .wait_up_to(Duration::from_millis(500))?
    ///     .max_waiting(20, 1_000);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A [`ConfigError`] naming `wait_up_to` when the limiter's limits
    /// cannot book ahead: a window or the sliding log counts what happened
    /// in it, and a request booked for a later window would not count there
    /// (GCRA and the buckets keep a schedule). Limits resolved per request
    /// ([`limits_for`](Self::limits_for)) that hold one are decided without
    /// waiting.
    pub fn wait_up_to(self, max_wait: Duration) -> Result<Self, ConfigError> {
        if !max_wait.is_zero() && !self.config.limiter.version().plan.books_ahead {
            return Err(ConfigError::new(
                "wait_up_to",
                "requests wait only for GCRA, a token bucket or a leaky bucket: a window or a \
                 sliding log books nothing ahead",
            ));
        }
        Ok(self.map(|c| {
            c.waiting = (!max_wait.is_zero()).then(|| {
                let (per_key, total) = c.seats;
                Arc::new(WaitingRoom::new(c.limiter.name(), max_wait, per_key, total))
            });
        }))
    }

    /// At most `per_key` requests of one key, and `total` in all, wait at
    /// once (see [`wait_up_to`](Self::wait_up_to); default 100 and 10 000).
    pub fn max_waiting(self, per_key: u32, total: usize) -> Self {
        self.map(|c| {
            c.seats = (per_key, total);
            if let Some(room) = &c.waiting {
                c.waiting = Some(Arc::new(room.bounded(c.limiter.name(), per_key, total)));
            }
        })
    }
}

/// The time left to a gRPC call (its `grpc-timeout`), if the request says:
/// up to 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`). A value that
/// is not one is no deadline.
pub(crate) fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.as_bytes();
    let (unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout(v: &str) -> Option<Duration> {
        let mut h = HeaderMap::new();
        h.insert("grpc-timeout", v.parse().unwrap());
        grpc_timeout(&h)
    }

    #[test]
    fn grpc_timeouts_read_as_the_protocol_writes_them() {
        assert_eq!(timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(timeout("3S"), Some(Duration::from_secs(3)));
        assert_eq!(timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(timeout("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "m", "123456789m", "12x", "-1S", "1.5S", "S1"] {
            assert_eq!(timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn seats_are_bounded_per_key_and_in_all_and_given_back_on_drop() {
        let room = Arc::new(WaitingRoom::new("t", Duration::from_secs(1), 2, 3));
        let a1 = room.seat("a").unwrap();
        let a2 = room.seat("a").unwrap();
        assert!(room.seat("a").is_none(), "two per key");
        let b1 = room.seat("b").unwrap();
        assert!(room.seat("c").is_none(), "three in all");
        drop(a1);
        assert!(room.seat("c").is_some(), "a seat given back");
        drop((a2, b1));
        assert_eq!(room.taken(), 0);
        assert!(room.by_key.lock().unwrap().is_empty());
    }
}
