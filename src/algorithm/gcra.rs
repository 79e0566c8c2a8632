use super::spec::{ceil, floor, reply, Reply, Spec, State, Write, SLACK_MS};
use super::validate;
use crate::ConfigError;
use std::time::Duration;

/// GCRA, the generic cell rate algorithm (as go-redis/redis_rate and governor).
///
/// A steady rate of `limit` per `period`, and at most `burst` admitted at once
/// from a rested state (default: `limit`). The state is a single time per key,
/// the smallest of all. `burst(n)` is redis_rate's `Burst`; redis-cell's
/// `max_burst` is `n - 1`.
///
/// ```
/// use floodgate::algorithm::Gcra;
/// use std::time::Duration;
/// let api = Gcra::new(10, Duration::from_secs(1)).burst(20);
/// assert!(Gcra::new(10, Duration::from_secs(1)).try_burst(0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gcra {
    limit: u64,
    period_ms: u64,
    burst: u64,
}

impl Gcra {
    /// `limit` per `period` at a steady rate, with a burst of `limit`.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message names the field.
    pub fn new(limit: u64, period: Duration) -> Self {
        validate::or_panic(Self::try_new(limit, period))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid field.
    pub fn try_new(limit: u64, period: Duration) -> Result<Self, ConfigError> {
        Ok(Self {
            limit: validate::limit("limit", limit)?,
            period_ms: validate::window("period", period)?,
            burst: limit,
        })
    }

    /// At most `n` requests admitted at once from a rested state.
    ///
    /// # Panics
    /// When `n` is 0 or too large; see [`try_burst`](Self::try_burst).
    pub fn burst(self, n: u64) -> Self {
        validate::or_panic(self.try_burst(n))
    }

    /// Like [`burst`](Self::burst), returning an error that names the field.
    pub fn try_burst(mut self, n: u64) -> Result<Self, ConfigError> {
        self.burst = validate::limit("burst", n)?;
        Ok(self)
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

/// A ns: float rounding below it never costs a request (`EPS` in the script).
const EPS: f64 = 1e-6;

/// Twin of `virtual_schedule` in `lua/gcra.lua`: the core shared by GCRA,
/// the token bucket and the leaky bucket. `queue` reports the leaky
/// bucket's delay.
pub(super) fn virtual_schedule(
    (burst, interval): (f64, f64),
    state: &mut Option<State>,
    (now, cost): (f64, f64),
    refund: bool,
    write: bool,
    queue: bool,
) -> (Reply, Write) {
    let tau = burst * interval;
    let (backlog, ts) = match *state {
        Some(State::Backlog { backlog, ts }) => (backlog, ts),
        _ => (0.0, now),
    };
    let backlog = (backlog - (now - ts).max(0.0)).max(0.0);
    let ts = ts.max(now);
    let remaining = |b: f64| floor((tau - b + EPS) / interval);
    let mut store = |b: f64| {
        if write {
            *state = Some(State::Backlog { backlog: b, ts });
        }
        write.then_some((ceil(b) + SLACK_MS) as u64)
    };
    if refund {
        let b = (backlog - cost * interval).max(0.0);
        let w = if b != backlog { store(b) } else { None };
        return (reply(true, burst, remaining(b), b, None, 0.0), w);
    }
    let after = backlog + cost * interval;
    if cost > 0.0 && after - tau > EPS {
        let retry = (cost <= burst).then_some(after - tau);
        return (
            reply(false, burst, remaining(backlog), backlog, retry, 0.0),
            None,
        );
    }
    let delay = if queue { backlog } else { 0.0 };
    let w = if cost > 0.0 { store(after) } else { None };
    (reply(true, burst, remaining(after), after, None, delay), w)
}
