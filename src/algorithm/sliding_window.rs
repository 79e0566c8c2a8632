use super::reply::{reply, Reply};
use super::spec::{floor, State, TwinInput, Write, SLACK_MS};

/// Twin of `ALG.sw` in `lua/sliding_window.lua`.
pub(super) fn decide(
    p: (f64, f64),
    state: &mut Option<State>,
    at: TwinInput<'_>,
) -> (Reply, Write) {
    let (limit, window) = p;
    let (now, cost, refund, write) = (at.now, at.cost, at.refund, at.write);
    let idx = floor(now / window);
    let (cur, prev) = match *state {
        Some(State::Counters { idx: i, cur, prev }) if i == idx => (cur, prev),
        Some(State::Counters { idx: i, cur, .. }) if i == idx - 1.0 => (0.0, cur),
        _ => (0.0, 0.0),
    };
    let elapsed = now - idx * window;
    let used = |p: f64, c: f64, e: f64| floor(p * (window - e) / window + c);
    let reset_of = |c: f64, p: f64| {
        if c > 0.0 {
            (idx + 2.0) * window - now
        } else if p > 0.0 {
            (idx + 1.0) * window - now
        } else {
            0.0
        }
    };
    let mut store = |c: f64, p: f64| {
        if write {
            *state = Some(State::Counters {
                idx,
                cur: c,
                prev: p,
            });
        }
        write.then_some(((idx + 2.0) * window - now + SLACK_MS) as u64)
    };
    if refund {
        // Take back from the current window first, the rest from the previous one.
        let from_cur = cur.min(cost);
        let (c, p) = (cur - from_cur, (prev - (cost - from_cur)).max(0.0));
        let w = if c != cur || p != prev {
            store(c, p)
        } else {
            None
        };
        return (
            reply(
                true,
                limit,
                limit - used(p, c, elapsed),
                reset_of(c, p),
                None,
                0.0,
            ),
            w,
        );
    }
    let u = used(prev, cur, elapsed);
    // A debit takes what fits: the window holds no more than its limit.
    let cost = if at.mode.debit && u + cost > limit {
        (limit - u).max(0.0)
    } else {
        cost
    };
    let room = limit - cost;
    let first_fit = |p: f64, c: f64, lo: f64| {
        let mut e = lo;
        if p > 0.0 {
            e = floor(window - (room + 1.0 - c) * window / p) + 1.0;
            e = e.max(lo).min(window);
        }
        while e > lo && used(p, c, e - 1.0) <= room {
            e -= 1.0;
        }
        while e < window && used(p, c, e) > room {
            e += 1.0;
        }
        e
    };
    if cost > 0.0 && u + cost > limit {
        let retry = (cost <= limit).then(|| {
            if cur + cost <= limit {
                idx * window + first_fit(prev, cur, elapsed + 1.0) - now
            } else {
                (idx + 1.0) * window + first_fit(cur, 0.0, 0.0) - now
            }
        });
        return (
            reply(false, limit, limit - u, reset_of(cur, prev), retry, 0.0),
            None,
        );
    }
    let cur = cur + cost;
    let w = if cost > 0.0 { store(cur, prev) } else { None };
    (
        reply(
            true,
            limit,
            limit - used(prev, cur, elapsed),
            reset_of(cur, prev),
            None,
            0.0,
        ),
        w,
    )
}
