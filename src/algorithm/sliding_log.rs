use super::spec::{reply, Reply, Spec, State, Write, SLACK_MS};
use super::validate;
use crate::ConfigError;
use std::collections::VecDeque;
use std::time::Duration;

/// Sliding log: the time of every admitted request within the window.
///
/// Exact: no span of `window` ever admits more than `limit`. The price is
/// memory: one entry per admitted request, so `limit` entries per busy key.
/// Use it for low limits that must be exact (login attempts). Rejected
/// requests are never recorded, so a client that keeps hammering is released
/// as soon as its old requests leave the window.
///
/// ```
/// use floodgate::algorithm::SlidingLog;
/// use std::time::Duration;
/// let logins = SlidingLog::new(5, Duration::from_secs(60));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    limit: u64,
    window_ms: u64,
}

impl SlidingLog {
    /// At most `limit` cost units in any span of `window`.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message names the field.
    pub fn new(limit: u64, window: Duration) -> Self {
        validate::or_panic(Self::try_new(limit, window))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field. Also rejects `limit` × `window` above 2^50 ms, where the log's
    /// member numbering would lose precision (and memory would be enormous).
    pub fn try_new(limit: u64, window: Duration) -> Result<Self, ConfigError> {
        let limit = validate::limit("limit", limit)?;
        let window_ms = validate::window("window", window)?;
        if (limit as u128) * (window_ms as u128) * 2 > 1 << 51 {
            return Err(ConfigError::new(
                "limit",
                "limit × window (ms) must stay below 2^50 for a sliding log",
            ));
        }
        Ok(Self { limit, window_ms })
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::SlidingLog {
            limit: self.limit,
            window_ms: self.window_ms,
        }
    }
}

/// Twin of `ALG.sl` in `lua/sliding_log.lua`. The log is kept sorted by time.
pub(super) fn decide(
    (limit, window): (f64, f64),
    state: &mut Option<State>,
    (now, cost): (f64, f64),
    refund: bool,
    write: bool,
) -> (Reply, Write) {
    let cut = now - window;
    if !matches!(state, Some(State::Log(_))) {
        *state = None;
    }
    let empty = VecDeque::new();
    let log = match state {
        Some(State::Log(log)) => &*log,
        _ => &empty,
    };
    // Entries after `cut` are live (ZCOUNT (cut +inf).
    let first_live = log.partition_point(|&t| t <= cut);
    let count = (log.len() - first_live) as f64;
    let newest_reset = || log.back().map_or(0.0, |&t| t + window - now);
    if refund {
        // Give back the newest entries: those of the request being refunded.
        let n = cost.min(count) as usize;
        let reset = match log.len().checked_sub(n + 1) {
            Some(i) if count as usize > n => log[i] + window - now,
            _ => 0.0,
        };
        let r = reply(true, limit, limit - (count - n as f64), reset, None, 0.0);
        if n == 0 {
            return (r, None);
        }
        if write {
            if let Some(State::Log(log)) = state {
                log.truncate(log.len() - n);
            }
        }
        return (r, write.then_some((window + SLACK_MS) as u64));
    }
    if cost > 0.0 && count + cost > limit {
        let reset = if count > 0.0 { newest_reset() } else { 0.0 };
        let retry = (cost <= limit).then(|| {
            let k = (count + cost - limit) as usize;
            log[first_live + k - 1] + window - now
        });
        return (reply(false, limit, limit - count, reset, retry, 0.0), None);
    }
    let mut reset = if count + cost > 0.0 { window } else { 0.0 };
    if cost == 0.0 && count > 0.0 {
        reset = newest_reset();
    }
    let r = reply(true, limit, limit - count - cost, reset, None, 0.0);
    if cost == 0.0 || !write {
        return (
            r,
            (cost > 0.0 && write).then_some((window + SLACK_MS) as u64),
        );
    }
    let log = match state {
        Some(State::Log(log)) => log,
        _ => {
            *state = Some(State::Log(VecDeque::new()));
            match state {
                Some(State::Log(log)) => log,
                _ => return (r, None),
            }
        }
    };
    log.drain(..first_live);
    // Insert in time order even if the clock went backwards.
    let at = log.partition_point(|&t| t <= now);
    for _ in 0..cost as u64 {
        log.insert(at, now);
    }
    (r, Some((window + SLACK_MS) as u64))
}
