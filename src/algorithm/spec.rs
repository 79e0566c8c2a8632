//! What the stores need of an algorithm: its normalized parameters, the
//! state of one key, and its in-memory twin. Nothing here knows a store.

use super::reply::Reply;
pub(crate) use super::twin_mode::TwinMode;
use super::{concurrency, fixed_window, gcra, jitter, sliding_log, sliding_window, Quota};
use std::collections::VecDeque;
use std::time::Duration;

/// Normalized parameters of one limit (public but unnameable: the sealed
/// trait needs it). Numbers are the exact values both the Lua code and the
/// twin compute with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Spec {
    /// `jittered`: each key's windows start at its own offset
    /// ([`Spec::offset`]).
    FixedWindow {
        limit: u64,
        window_ms: u64,
        jittered: bool,
    },
    SlidingLog {
        limit: u64,
        window_ms: u64,
    },
    /// As the fixed window.
    SlidingWindow {
        limit: u64,
        window_ms: u64,
        jittered: bool,
    },
    /// `interval_ms` = 1000 / rate: the time one token takes, computed
    /// once here and sent to the script as it is.
    TokenBucket {
        capacity: u64,
        rate: f64,
        interval_ms: f64,
    },
    /// As the token bucket.
    LeakyBucket {
        capacity: u64,
        rate: f64,
        interval_ms: f64,
    },
    /// `interval_ms` = period / limit: the time one unit of cost takes.
    Gcra {
        limit: u64,
        period_ms: u64,
        burst: u64,
        interval_ms: f64,
    },
    /// At most `max` leases alive per key, each for `lease_ms`: the
    /// concurrency limiter's (no public algorithm type makes one).
    Concurrency {
        max: u64,
        lease_ms: u64,
    },
}

/// The state of one key, mirroring what the script keeps in Redis. Numbers are
/// `f64` because Lua's are.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    /// Fixed window: (window index, count).
    Counter { idx: f64, count: f64 },
    /// Sliding log: times of admitted requests, oldest first.
    Log(VecDeque<f64>),
    /// Sliding window counter: (window index, current count, previous count).
    Counters { idx: f64, cur: f64, prev: f64 },
    /// Concurrency limit: (lease id, expiry) of each request in flight.
    Leases(Vec<(Box<str>, u64)>),
    /// GCRA, token bucket, leaky bucket: the backlog (ms until the bucket
    /// is full, or the queue empty, again) as of `ts`.
    Backlog { backlog: f64, ts: f64 },
}

/// What one twin decides at: the time and the (clamped) cost, as Lua's
/// numbers, whether it gives the cost back, whether it may write, and the
/// rest of what the mode says (a reservation's wait and lead, a debit, a
/// block), read as numbers only where they matter.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TwinInput<'a> {
    pub(crate) now: f64,
    pub(crate) cost: f64,
    pub(crate) refund: bool,
    pub(crate) write: bool,
    pub(crate) mode: &'a TwinMode,
}

/// What a twin did to the state: nothing, or wrote it with a TTL in ms.
pub(crate) type Write = Option<u64>;

/// Keys outlive their use by this margin (the scripts' `SLACK`).
pub(crate) const SLACK_MS: f64 = 1000.0;

impl Spec {
    /// The namespace of this algorithm's keys: state is shared exactly by
    /// limits of the same name and tag. Also the algorithm's name in the
    /// Redis code (`ALG[tag]`). A jittered window has a tag of its own: its
    /// state counts other windows than the aligned one's.
    pub(crate) fn tag(&self) -> &'static str {
        match self {
            Spec::FixedWindow {
                jittered: false, ..
            } => "fw",
            Spec::FixedWindow { jittered: true, .. } => "fwj",
            Spec::SlidingLog { .. } => "sl",
            Spec::SlidingWindow {
                jittered: false, ..
            } => "sw",
            Spec::SlidingWindow { jittered: true, .. } => "swj",
            Spec::TokenBucket { .. } => "tb",
            Spec::LeakyBucket { .. } => "lb",
            Spec::Gcra { .. } => "gcra",
            Spec::Concurrency { .. } => "cc",
        }
    }

    /// The name the Redis code knows this algorithm by in shadow mode: its
    /// tag and `~` (`lua/main.lua`: a denial that stops no other charge).
    pub(crate) fn shadow_tag(&self) -> &'static str {
        match self {
            Spec::FixedWindow {
                jittered: false, ..
            } => "fw~",
            Spec::FixedWindow { jittered: true, .. } => "fwj~",
            Spec::SlidingLog { .. } => "sl~",
            Spec::SlidingWindow {
                jittered: false, ..
            } => "sw~",
            Spec::SlidingWindow { jittered: true, .. } => "swj~",
            Spec::TokenBucket { .. } => "tb~",
            Spec::LeakyBucket { .. } => "lb~",
            Spec::Gcra { .. } => "gcra~",
            Spec::Concurrency { .. } => "cc~",
        }
    }

    /// Whether a reservation can book this limit ahead: GCRA and the
    /// buckets keep a schedule, the windows and the sliding log count what
    /// happened (and a lease is held now).
    pub(crate) fn books_ahead(&self) -> bool {
        matches!(
            self,
            Spec::TokenBucket { .. } | Spec::LeakyBucket { .. } | Spec::Gcra { .. }
        )
    }

    /// The largest cost that can ever be admitted.
    #[inline]
    pub(crate) fn max_cost(&self) -> u64 {
        match *self {
            Spec::FixedWindow { limit, .. }
            | Spec::SlidingLog { limit, .. }
            | Spec::SlidingWindow { limit, .. } => limit,
            Spec::TokenBucket { capacity, .. } | Spec::LeakyBucket { capacity, .. } => capacity,
            Spec::Gcra { burst, .. } => burst,
            Spec::Concurrency { max, .. } => max,
        }
    }

    /// The largest cost worth telling apart (the maximum + 1): costs are
    /// clamped to it so that the arithmetic stays exact, and any cost above
    /// the maximum is denied the same way.
    pub(crate) fn cost_cap(&self) -> u64 {
        self.max_cost().saturating_add(1)
    }

    /// The limit as it reads on the wire.
    pub(crate) fn quota(&self) -> Quota {
        let (units, window_ms) = match *self {
            Spec::FixedWindow {
                limit, window_ms, ..
            }
            | Spec::SlidingLog { limit, window_ms }
            | Spec::SlidingWindow {
                limit, window_ms, ..
            } => (limit, window_ms as f64),
            Spec::TokenBucket { capacity, rate, .. } | Spec::LeakyBucket { capacity, rate, .. } => {
                (capacity, capacity as f64 / rate * 1000.0)
            }
            Spec::Gcra {
                limit, period_ms, ..
            } => (limit, period_ms as f64),
            Spec::Concurrency { max, lease_ms } => (max, lease_ms as f64),
        };
        Quota {
            units,
            window: Duration::from_millis(ceil(window_ms) as u64),
        }
    }

    /// Where `key`'s windows start, in ms past the aligned ones: its
    /// offset in `0..window_ms` for a jittered window
    /// (`algorithm/jitter.rs`), else `None` (no parameter of its own on
    /// the wire).
    #[inline]
    pub(crate) fn offset(&self, key: &str) -> Option<u64> {
        match *self {
            Spec::FixedWindow {
                window_ms,
                jittered: true,
                ..
            }
            | Spec::SlidingWindow {
                window_ms,
                jittered: true,
                ..
            } => Some(jitter::offset(key, window_ms)),
            _ => None,
        }
    }

    /// The in-memory twin: the Lua code's decision, computed the same way.
    /// `cost` must already be clamped; `lease` names the lease a
    /// concurrency limit acquires or releases (ignored by the others);
    /// `key` is the user key (a jittered window's offset). Writes the new
    /// state only if `write`; `mode` says the rest of the store's mode
    /// ([`TwinMode::PLAIN`] for a check, a peek or a refund). The windows
    /// and the sliding log decide
    /// a reservation as a check (they book nothing ahead), and charge a
    /// debit up to their limit (GCRA and the buckets go into debt).
    // `#[inline(always)]`, and the schedule with it: a call of its own was
    // ~35 instructions of ~560 a GCRA decision (its frame, its arguments
    // and the reply written back), 557 -> 523 with both inlined into the
    // memory store's decision, and every other algorithm fewer too (fixed
    // window 650 -> 597, sliding log 875 -> 791; callgrind,
    // `benches/memory.rs`). With `#[inline]` alone the compiler kept it out
    // of line.
    #[inline(always)]
    pub(crate) fn decide(
        &self,
        state: &mut Option<State>,
        now: u64,
        cost: u64,
        (refund, write): (bool, bool),
        mode: &TwinMode,
        (lease, key): (&str, &str),
    ) -> (Reply, Write) {
        let at = TwinInput {
            now: float(now),
            cost: float(cost),
            refund,
            write,
            mode,
        };
        // A jittered window is the aligned one on a clock `offset` behind:
        // its windows start at `k × window + offset`, and every duration
        // it answers is a difference of times on that clock.
        let shifted = |jittered: bool, window_ms: u64| {
            if jittered {
                TwinInput {
                    now: at.now - float(jitter::offset(key, window_ms)),
                    ..at
                }
            } else {
                at
            }
        };
        match *self {
            Spec::FixedWindow {
                limit,
                window_ms,
                jittered,
            } => fixed_window::decide(
                (limit as f64, window_ms as f64),
                state,
                shifted(jittered, window_ms),
            ),
            Spec::SlidingLog { limit, window_ms } => {
                sliding_log::decide((limit as f64, window_ms as f64), state, at)
            }
            Spec::SlidingWindow {
                limit,
                window_ms,
                jittered,
            } => sliding_window::decide(
                (limit as f64, window_ms as f64),
                state,
                shifted(jittered, window_ms),
            ),
            // One arm for the three, the schedule inlined here (see above).
            Spec::TokenBucket {
                capacity: units,
                interval_ms,
                ..
            }
            | Spec::LeakyBucket {
                capacity: units,
                interval_ms,
                ..
            }
            | Spec::Gcra {
                burst: units,
                interval_ms,
                ..
            } => {
                let queue = matches!(self, Spec::LeakyBucket { .. });
                gcra::virtual_schedule((units, interval_ms), state, at, queue)
            }
            Spec::Concurrency { max, lease_ms } => {
                concurrency::decide((max, lease_ms), state, now, (refund, write), lease)
            }
        }
    }
}

/// Lua's `ms()`: whole ms rounded up, 0 for anything not positive
/// (`ceil(x) as i64` for `x > 0`). On integers: the cast truncates toward
/// 0, so the ceiling is the cast, plus one when the cast is below `x`.
#[inline]
pub(crate) fn ms(x: f64) -> i64 {
    let t = x as i64;
    t.saturating_add(i64::from((t as f64) < x)).max(0)
}

/// `floor(x).max(0.0) as i64`, a count of whole units that is never
/// negative: at or above 0 the cast's truncation is the floor, and below
/// 0 both give 0.
#[inline]
pub(crate) fn units(x: f64) -> i64 {
    (x as i64).max(0)
}

/// `x as f64`, through `i64`: the same double for any `x` below 2^63
/// (the twins' times, costs and limits are below 2^53), in the one
/// instruction x86-64 has for it where a `u64` takes five.
#[inline]
pub(crate) fn float(x: u64) -> f64 {
    debug_assert!(x < 1 << 63);
    x as i64 as f64
}

/// `x.floor()`, without the call into libm that x86-64's baseline
/// instruction set needs (it was a fifth of a GCRA decision in memory). Exact:
/// below 2^52 in magnitude truncating to an integer is exact, and from 2^52
/// on every double is already whole.
#[inline]
pub(crate) fn floor(x: f64) -> f64 {
    if x.abs() < 4_503_599_627_370_496.0 {
        let t = x as i64 as f64;
        if t > x {
            t - 1.0
        } else if t == x {
            x // keeps -0.0
        } else {
            t
        }
    } else {
        x
    }
}

/// `x.ceil()`, like [`floor`].
#[inline]
pub(crate) fn ceil(x: f64) -> f64 {
    -floor(-x)
}

#[cfg(test)]
mod tests;
