use super::spec::{floor, reply, Reply, State, Write, SLACK_MS};
use super::validate::config_type;

config_type! {
    /// Fixed window: one counter per aligned window of time.
    ///
    /// The cheapest algorithm, and the loosest: a client that times its bursts
    /// to a window boundary gets up to twice the limit within a moment. Use it
    /// for coarse quotas (per day), where a brief 2× does not matter.
    ///
    /// ```
    /// use floodgate::algorithm::FixedWindow;
    /// use std::time::Duration;
    /// const DAILY: FixedWindow = FixedWindow::new(10_000, Duration::from_secs(86_400));
    /// assert!(FixedWindow::try_new(0, Duration::from_secs(1)).is_err());
    /// ```
    ///
    /// An invalid constant is a compile-time error:
    ///
    /// ```compile_fail
    /// use floodgate::algorithm::FixedWindow;
    /// use std::time::Duration;
    /// const NONE: FixedWindow = FixedWindow::new(0, Duration::from_secs(1));
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    FixedWindow { limit: u64 = count("limit"), window_ms: u64 = window("window") }
    new(limit: u64, window: std::time::Duration)
        "At most `limit` cost units per aligned `window` (whole ms, 1 ms to 2^40 ms; `limit` 1 to 2^40)."
    spec(this) super::Spec::FixedWindow { limit: this.limit, window_ms: this.window_ms }
}

/// Twin of `ALG.fw` in `lua/fixed_window.lua`.
pub(super) fn decide(
    (limit, window): (f64, f64),
    state: &mut Option<State>,
    (now, cost): (f64, f64),
    refund: bool,
    write: bool,
) -> (Reply, Write) {
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
        let w = if left != count { store(left) } else { None };
        return (
            reply(true, limit, limit - left, reset_if_used(left), None, 0.0),
            w,
        );
    }
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
