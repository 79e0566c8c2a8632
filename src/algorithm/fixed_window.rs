use super::reply::{reply, Reply};
use super::spec::{floor, State, TwinInput, Write, SLACK_MS};

/// Twin of `ALG.fw` in `lua/fixed_window.lua`.
pub(super) fn decide(
    p: (f64, f64),
    state: &mut Option<State>,
    at: TwinInput<'_>,
) -> (Reply, Write) {
    let (limit, window) = p;
    let (now, cost, refund, write) = (at.now, at.cost, at.refund, at.write);
    let idx = floor(now / window);
    let reset = (idx + 1.0) * window - now;
    let count = match state {
        Some(State::Counter { idx: i, count }) if *i == idx => *count,
        _ => 0.0,
    };
    let reset_if_used = |c: f64| if c > 0.0 { reset } else { 0.0 };
    let mut store = |c: f64| {
        if write {
            *state = Some(State::Counter { idx, count: c });
        }
        write.then_some((reset + SLACK_MS) as u64)
    };
    if refund {
        let left = (count - cost).max(0.0);
        let w = if left == count { None } else { store(left) };
        return (
            reply(true, limit, limit - left, reset_if_used(left), None, 0.0),
            w,
        );
    }
    // A debit takes what fits: a window holds no more than its limit.
    let cost = if at.mode.debit && count + cost > limit {
        (limit - count).max(0.0)
    } else {
        cost
    };
    if cost > 0.0 && count + cost > limit {
        let retry = (cost <= limit).then_some(reset);
        return (
            reply(
                false,
                limit,
                limit - count,
                reset_if_used(count),
                retry,
                0.0,
            ),
            None,
        );
    }
    let count = count + cost;
    let w = if cost > 0.0 { store(count) } else { None };
    (
        reply(true, limit, limit - count, reset_if_used(count), None, 0.0),
        w,
    )
}
