use super::spec::{floor, reply, Reply, State, Write, SLACK_MS};
use super::validate::config_type;

config_type! {
    /// Sliding window counter: the current and the previous fixed-window counts,
    /// the previous one weighted by how much of it is still inside the sliding
    /// window: `prev × (1 − (now mod w)/w) + cur`, counted in whole requests.
    ///
    /// Nearly exact with constant memory: what most gateways run. A request is
    /// denied when adding its cost to the estimate would exceed the limit.
    ///
    /// ```
    /// use floodgate::algorithm::SlidingWindow;
    /// use std::time::Duration;
    /// const API: SlidingWindow = SlidingWindow::new(100, Duration::from_secs(60));
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    SlidingWindow { limit: u64 = count("limit"), window_ms: u64 = window("window") }
    new(limit: u64, window: std::time::Duration)
        "About `limit` cost units in any span of `window` (whole ms, 1 ms to 2^40 ms; `limit` 1 to 2^40)."
    spec(this) super::Spec::SlidingWindow { limit: this.limit, window_ms: this.window_ms }
}

/// Twin of `ALG.sw` in `lua/sliding_window.lua`.
pub(super) fn decide(
    (limit, window): (f64, f64),
    state: &mut Option<State>,
    (now, cost): (f64, f64),
    refund: bool,
    write: bool,
) -> (Reply, Write) {
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
    let u = used(prev, cur, elapsed);
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
