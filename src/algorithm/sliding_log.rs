use super::reply::{reply, Reply};
use super::spec::{State, TwinInput, Write, SLACK_MS};
use std::collections::VecDeque;

/// Twin of `ALG.sl` in `lua/sliding_log.lua`. The log is kept sorted by time.
pub(super) fn decide(
    p: (f64, f64),
    state: &mut Option<State>,
    at: TwinInput<'_>,
) -> (Reply, Write) {
    let (limit, window) = p;
    let (now, cost, refund, write) = (at.now, at.cost, at.refund, at.write);
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
    // A debit takes what fits: the log holds no more than its limit.
    let cost = if at.mode.debit && count + cost > limit {
        (limit - count).max(0.0)
    } else {
        cost
    };
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
    if !matches!(state, Some(State::Log(_))) {
        *state = Some(State::Log(VecDeque::new()));
    }
    let Some(State::Log(log)) = state else {
        return (r, None);
    };
    log.drain(..first_live);
    // Insert in time order even if the clock went backwards.
    let at = log.partition_point(|&t| t <= now);
    for _ in 0..cost as u64 {
        log.insert(at, now);
    }
    (r, Some((window + SLACK_MS) as u64))
}
