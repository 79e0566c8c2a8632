use super::reply::Reply;
use super::spec::{float, ms, units, Spec, State, TwinInput, Write, SLACK_MS};
use super::validate::{count, or_panic, schedule, tri, window, Invalid};
use super::validate::{BURST, LIMIT, LONG_BURST, PERIOD};
use crate::{ConfigError, Quota, Reason};
use std::time::Duration;

/// GCRA, the generic cell rate algorithm (as go-redis/redis_rate and governor).
///
/// A steady rate of `limit` per `period`, and at most `burst` admitted at once
/// from a rested state (default: `limit`). The state is a single time per key,
/// the smallest of all. [`try_burst(n)`](Self::try_burst) is `redis_rate`'s
/// `Burst`; redis-cell's `max_burst` is `n - 1`.
///
/// ```
/// # fn main() -> Result<(), floodgate::ConfigError> {
/// use floodgate::algorithm::Gcra;
/// use std::time::Duration;
/// const STEADY: Gcra = Gcra::new(10, Duration::from_secs(1));
/// let bursty = STEADY.try_burst(20)?;
/// assert!(STEADY.try_burst(0).is_err());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gcra {
    limit: u64,
    period_ms: u64,
    burst: u64,
}

impl Gcra {
    /// `limit` per `period` at a steady rate (`limit` 1 to 2^40; `period`
    /// whole ms, 1 ms to 2^40 ms), with a burst of `limit`.
    ///
    /// A `const fn`: in a constant, an invalid value does not compile.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message
    /// names the field, and the panic points at the caller.
    #[track_caller]
    pub const fn new(limit: u64, period: Duration) -> Self {
        or_panic(Self::checked(limit, period))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field instead of panicking.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `limit` or `period` when it is out of bounds.
    pub fn try_new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Self::checked(limit, period).map_err(ConfigError::from)
    }

    const fn checked(limit: u64, period: Duration) -> Result<Self, Invalid> {
        let limit = tri!(count(limit, LIMIT));
        Ok(Self {
            limit,
            period_ms: tri!(window(period, PERIOD)),
            burst: limit,
        })
    }

    /// At most `n` requests (1 to 2^40) admitted at once from a rested state,
    /// `n × period / limit` at most 2^40 ms.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `burst` when `n` is 0, above 2^40, or makes
    /// the schedule longer than 2^40 ms.
    pub fn try_burst(mut self, n: u64) -> Result<Self, ConfigError> {
        self.burst = count(n, BURST)?;
        let interval = self.period_ms as f64 / self.limit as f64;
        schedule(self.burst, interval, LONG_BURST)?;
        Ok(self)
    }

    /// The limit as it reads on the wire (`RateLimit-Policy`): `limit`
    /// per `period` (the burst is not part of it).
    pub fn quota(&self) -> Quota {
        self.to_spec().quota()
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::Gcra {
            limit: self.limit,
            period_ms: self.period_ms,
            burst: self.burst,
            interval_ms: self.period_ms as f64 / self.limit as f64,
        }
    }
}

/// A ns: float rounding below it never costs a request (`EPS` in the
/// script); for units shorter than 1 ms, a millionth of a unit, so that it
/// never buys one either.
const EPS: f64 = 1e-6;

/// Twin of `virtual_schedule` in `lua/gcra.lua`: the core shared by GCRA,
/// the token bucket and the leaky bucket (`burst` units of `interval` ms
/// each). `queue` reports the leaky bucket's delay.
///
/// The script's doubles, and its reply's roundings done on integers: a
/// backlog is never negative, so `ceil(b) + SLACK` is `ms(b) + SLACK` (the
/// reset's), and `floor(x)` floored at 0 is `x` cast at 0 ([`units`]):
/// the same numbers as the script's `put()`.
// The integer roundings: 120 instructions a GCRA decision where the float
// roundings took 190 (callgrind). `#[inline(always)]` with `Spec::decide`,
// which says what it buys.
#[inline(always)]
pub(super) fn virtual_schedule(
    (burst, interval): (u64, f64),
    state: &mut Option<State>,
    at: TwinInput<'_>,
    queue: bool,
) -> (Reply, Write) {
    let (limit, burst) = (burst as i64, float(burst));
    let (now, cost, refund, write) = (at.now, at.cost, at.refund, at.write);
    let tau = burst * interval;
    // The script's `if interval < 1 then eps = EPS * interval end`: the
    // same double (EPS × 1.0 is EPS), without a branch.
    let eps = EPS * interval.min(1.0);
    let (backlog, ts) = match *state {
        Some(State::Backlog { backlog, ts }) => (backlog, ts),
        _ => (0.0, now),
    };
    let backlog = (backlog - (now - ts).max(0.0)).max(0.0);
    // As the script writes it (`ts.max(now)` also handles NaN, which no
    // state holds: 4 instructions more).
    let ts = if ts < now { now } else { ts };
    let reply = |reason, b: f64, retry_ms, delay_ms| Reply {
        reason,
        limit,
        remaining: units((tau - b + eps) / interval),
        reset_ms: ms(b),
        retry_ms,
        delay_ms,
    };
    // The key outlives its reset (`ms(b)`) by the slack.
    let mut store = |b: f64, r: &Reply| store_backlog(state, write, (b, ts), r);
    // A refund gives the cost back; a block pushes the schedule so that a
    // request of cost 1 fits only `blocked` ms from now (never pulled
    // back: a longer wait stays).
    if refund || at.mode.blocked.is_some() {
        let b = match at.mode.blocked {
            Some(blocked) => backlog.max(tau - interval + float(blocked)),
            None => (backlog - cost * interval).max(0.0),
        };
        let r = reply(Reason::WithinLimit, b, -1, 0);
        let w = if b == backlog { None } else { store(b, &r) };
        return (r, w);
    }
    // A reservation: a check that may book up to `wait` ms ahead, at or
    // after `lead` (the longest wait of several limits).
    let (backlog, room) = match at.mode.wait {
        None => (backlog, 0.0),
        Some(wait) => (
            backlog.max(float(at.mode.lead)),
            // The leaky bucket's queue holds no more than its capacity,
            // whatever the wait.
            if queue { 0.0 } else { float(wait) },
        ),
    };
    let after = backlog + cost * interval;
    // A debit is charged whatever it leaves: beyond the burst, a debt.
    if cost > 0.0 && after - tau > eps + room && !at.mode.debit {
        let (reason, retry) = if cost <= burst {
            (Reason::OverLimit, ms(after - tau - room))
        } else {
            (Reason::CostTooHigh, -1)
        };
        return (reply(reason, backlog, retry, 0), None);
    }
    let delay = match at.mode.wait {
        None if queue => ms(backlog),
        None => 0,
        Some(wait) => match booked(backlog, after - tau, float(wait), (eps, queue, cost)) {
            Ok(delay) => delay,
            Err(retry) => return (reply(Reason::OverLimit, backlog, retry, 0), None),
        },
    };
    let r = reply(Reason::WithinLimit, after, -1, delay);
    let w = if cost > 0.0 { store(after, &r) } else { None };
    (r, w)
}

/// The wait of an admitted reservation (`Ok`, in ms), given its backlog
/// and how far past the burst it ends (`over`): the leaky bucket's queue
/// delay, which must be at most `wait` (else `Err` with when it would
/// be), or the time until the cost fits. Never said longer than `wait`:
/// within `eps` of it is it.
fn booked(
    backlog: f64,
    over: f64,
    wait: f64,
    (eps, queue, cost): (f64, bool, f64),
) -> Result<i64, i64> {
    let delay = if queue {
        if cost > 0.0 && backlog - wait > eps {
            return Err(ms(backlog - wait));
        }
        backlog
    } else if over > eps {
        over
    } else {
        0.0
    };
    Ok(ms(delay.min(wait)))
}

/// Write backlog `b` as of `ts` into `state` when `write`, and say for how
/// long the key lives (its reset, `r`'s, and the slack).
// `#[inline(always)]`: as a closure the compiler called it out of line
// once the schedule had a third place that writes (32 instructions a GCRA
// decision, callgrind).
#[inline(always)]
fn store_backlog(state: &mut Option<State>, write: bool, (b, ts): (f64, f64), r: &Reply) -> Write {
    if write {
        // In place when the key has its state already (the common case):
        // replacing the `Option` would drop the old one first, a call of
        // its own (24 instructions of ~800 a decision).
        match state {
            Some(State::Backlog { backlog, ts: at }) => (*backlog, *at) = (b, ts),
            _ => *state = Some(State::Backlog { backlog: b, ts }),
        }
    }
    write.then_some(r.reset_ms as u64 + SLACK_MS as u64)
}
