//! What the stores need of an algorithm: its parameters, its script, and its
//! in-memory twin.

use super::Policy;
use super::{fixed_window, gcra, sliding_log, sliding_window};
use crate::Decision;
use std::collections::VecDeque;
use std::sync::LazyLock;
use std::time::Duration;

/// Normalized parameters of one algorithm (public but unnameable: the sealed
/// trait needs it). Numbers are the exact values both
/// the script and the twin compute with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Spec {
    FixedWindow {
        limit: u64,
        window_ms: u64,
    },
    SlidingLog {
        limit: u64,
        window_ms: u64,
    },
    SlidingWindow {
        limit: u64,
        window_ms: u64,
    },
    TokenBucket {
        capacity: u64,
        rate: f64,
    },
    LeakyBucket {
        capacity: u64,
        rate: f64,
    },
    /// `interval_ms` = period / limit: the time one unit of cost takes.
    Gcra {
        limit: u64,
        period_ms: u64,
        burst: u64,
        interval_ms: f64,
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

/// A decision as the scripts return it: whole numbers, durations in ms
/// rounded up, `retry_ms` -1 for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reply {
    pub allowed: bool,
    pub limit: i64,
    pub remaining: i64,
    pub reset_ms: i64,
    pub retry_ms: i64,
    pub delay_ms: i64,
}

/// What a twin did to the state: nothing, or wrote it with a TTL in ms.
pub(crate) type Write = Option<u64>;

/// Keys outlive their use by this margin (the scripts' `SLACK`).
pub(crate) const SLACK_MS: f64 = 1000.0;

/// What a script call does with the keys it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Decide, and charge the cost if every key admits.
    Check,
    /// Decide, write nothing.
    Peek,
    /// Give the cost back.
    Refund,
}

impl Mode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Check => "check",
            Mode::Peek => "peek",
            Mode::Refund => "refund",
        }
    }
}

/// The code shared by the library and the script: every algorithm, and
/// `floodgate(KEYS, ARGV)`, the loop that decides several keys all or
/// nothing, joined by `build.rs` in the order of `lua/files.txt`. Only
/// definitions: nothing runs until that function is called.
const SHARED_SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/shared.lua"));

/// The EVAL form: the shared code, then one call. Redis runs a script's
/// whole body, definitions included, on every `EVALSHA`; only used where
/// Redis has no functions (before 7.0).
pub(crate) static SCRIPT_SOURCE: LazyLock<String> =
    LazyLock::new(|| format!("{SHARED_SOURCE}return floodgate(KEYS, ARGV)\n"));

/// [`SCRIPT_SOURCE`], with its SHA1 for `EVALSHA`.
pub(crate) static SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(&SCRIPT_SOURCE));

/// The Redis Function form (`FUNCTION LOAD`, `FCALL`): the shared code runs
/// once when the library is loaded, a call runs only `floodgate()`.
pub(crate) struct Library {
    /// The library's and its one function's name: `floodgate_` and the
    /// start of the script's SHA1. Functions outlive restarts and deploys
    /// (they are saved and replicated), so a new version of the code must
    /// not find an old one under the same name.
    pub name: String,
    /// The `FUNCTION LOAD` payload.
    pub source: String,
}

/// The one library of this build.
pub(crate) static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let name = format!("floodgate_{}", &SCRIPT.get_hash()[..16]);
    let source =
        format!("#!lua name={name}\n{SHARED_SOURCE}redis.register_function('{name}', floodgate)\n");
    Library { name, source }
});

/// The concurrency limiter's script (`lua/concurrency.lua`).
pub(crate) const LEASE_SOURCE: &str = include_str!("../../lua/concurrency.lua");

/// [`LEASE_SOURCE`], with its SHA1.
pub(crate) static LEASE_SCRIPT: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(LEASE_SOURCE));

/// The script call deciding `targets` (one key and algorithm each, in
/// order): `FCALL <function>`, `EVALSHA <sha>` or `EVAL <source>` (`verb`,
/// `script`; the arguments are the same), written
/// straight into one buffer, numbers formatted in place.
pub(crate) fn script_cmd(
    verb: &str,
    script: &str,
    targets: &[(&str, &Spec)],
    now: Option<u64>,
    cost: u64,
    mode: Mode,
) -> redis::Cmd {
    let keys: usize = targets.iter().map(|(k, _)| k.len()).sum();
    let mut cmd = redis::Cmd::with_capacity(
        6 + 4 * targets.len(),
        verb.len() + script.len() + keys + 48 * (1 + targets.len()),
    );
    cmd.arg(verb).arg(script).arg(targets.len());
    for (key, _) in targets {
        cmd.arg(*key);
    }
    match now {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
    cmd.arg(mode.as_str()).arg(cost);
    for (_, spec) in targets {
        cmd.arg(spec.tag());
        // The same strings as `Spec::params` (checked by a test).
        match **spec {
            Spec::FixedWindow { limit, window_ms }
            | Spec::SlidingLog { limit, window_ms }
            | Spec::SlidingWindow { limit, window_ms } => {
                cmd.arg(limit).arg(window_ms);
            }
            Spec::TokenBucket { capacity, rate } | Spec::LeakyBucket { capacity, rate } => {
                cmd.arg(capacity);
                arg_f64(&mut cmd, rate);
            }
            Spec::Gcra {
                burst, interval_ms, ..
            } => {
                cmd.arg(burst);
                arg_f64(&mut cmd, interval_ms);
            }
        }
    }
    cmd
}

/// `x` as its `Display` form, the shortest string that parses back to the
/// same double, formatted on the stack.
fn arg_f64(cmd: &mut redis::Cmd, x: f64) {
    use std::fmt::Write;
    struct StackStr {
        buf: [u8; 64],
        len: usize,
    }
    impl std::fmt::Write for StackStr {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let end = self.len + s.len();
            self.buf
                .get_mut(self.len..end)
                .ok_or(std::fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }
    let mut buf = StackStr {
        buf: [0; 64],
        len: 0,
    };
    if write!(buf, "{x}").is_ok() {
        cmd.arg(&buf.buf[..buf.len]);
    } else {
        cmd.arg(x.to_string());
    }
}

/// The replies of a script call deciding `n` keys, read without collecting
/// them first.
pub(crate) fn parse_value(v: &redis::Value, n: usize) -> Option<Vec<Reply>> {
    let redis::Value::Array(items) = v else {
        return None;
    };
    if items.len() != 6 * n {
        return None;
    }
    items
        .chunks_exact(6)
        .map(|r| match *r {
            [redis::Value::Int(allowed), redis::Value::Int(limit), redis::Value::Int(remaining), redis::Value::Int(reset_ms), redis::Value::Int(retry_ms), redis::Value::Int(delay_ms)] => {
                Some(Reply { allowed: allowed == 1, limit, remaining, reset_ms, retry_ms, delay_ms })
            }
            _ => None,
        })
        .collect()
}

/// ARGV of a script call deciding `specs` (one per key, in KEYS order),
/// as plain strings: the oracle `script_cmd` is tested against.
#[cfg(test)]
pub(crate) fn script_args(now: Option<u64>, mode: Mode, cost: u64, specs: &[Spec]) -> Vec<String> {
    let mut args = Vec::with_capacity(3 + 3 * specs.len());
    args.push(now.map(|n| n.to_string()).unwrap_or_default());
    args.push(mode.as_str().to_string());
    args.push(cost.to_string());
    for spec in specs {
        let [p1, p2] = spec.params();
        args.push(spec.tag().to_string());
        args.push(p1);
        args.push(p2);
    }
    args
}

/// The reply of a script call deciding `n` keys, from plain integers.
#[cfg(test)]
pub(crate) fn parse_replies(v: &[i64], n: usize) -> Option<Vec<Reply>> {
    if v.len() != 6 * n {
        return None;
    }
    Some(
        v.chunks_exact(6)
            .map(|r| Reply {
                allowed: r[0] == 1,
                limit: r[1],
                remaining: r[2],
                reset_ms: r[3],
                retry_ms: r[4],
                delay_ms: r[5],
            })
            .collect(),
    )
}

impl Spec {
    /// The namespace of this algorithm's keys.
    pub(crate) fn tag(&self) -> &'static str {
        match self {
            Spec::FixedWindow { .. } => "fw",
            Spec::SlidingLog { .. } => "sl",
            Spec::SlidingWindow { .. } => "sw",
            Spec::TokenBucket { .. } => "tb",
            Spec::LeakyBucket { .. } => "lb",
            Spec::Gcra { .. } => "gcra",
        }
    }

    /// The largest cost that can ever be admitted.
    pub(crate) fn max_cost(&self) -> u64 {
        match *self {
            Spec::FixedWindow { limit, .. }
            | Spec::SlidingLog { limit, .. }
            | Spec::SlidingWindow { limit, .. } => limit,
            Spec::TokenBucket { capacity, .. } | Spec::LeakyBucket { capacity, .. } => capacity,
            Spec::Gcra { burst, .. } => burst,
        }
    }

    /// Clamp a cost so that the script's arithmetic stays exact: any cost
    /// above the maximum is denied the same way.
    pub(crate) fn clamp_cost(&self, cost: u64) -> u64 {
        cost.min(self.max_cost() + 1)
    }

    pub(crate) fn policy(&self) -> Policy {
        let (quota, window_ms) = match *self {
            Spec::FixedWindow { limit, window_ms }
            | Spec::SlidingLog { limit, window_ms }
            | Spec::SlidingWindow { limit, window_ms } => (limit, window_ms as f64),
            Spec::TokenBucket { capacity, rate } | Spec::LeakyBucket { capacity, rate } => {
                (capacity, capacity as f64 / rate * 1000.0)
            }
            Spec::Gcra {
                limit, period_ms, ..
            } => (limit, period_ms as f64),
        };
        Policy {
            quota,
            window: Duration::from_millis(window_ms.ceil() as u64),
        }
    }

    /// The algorithm's two parameters in the script's ARGV. `f64`'s `Display` is the shortest
    /// string that parses back to the same double, so Lua sees the same value.
    #[cfg(test)]
    pub(crate) fn params(&self) -> [String; 2] {
        match *self {
            Spec::FixedWindow { limit, window_ms }
            | Spec::SlidingLog { limit, window_ms }
            | Spec::SlidingWindow { limit, window_ms } => {
                [limit.to_string(), window_ms.to_string()]
            }
            Spec::TokenBucket { capacity, rate } | Spec::LeakyBucket { capacity, rate } => {
                [capacity.to_string(), rate.to_string()]
            }
            Spec::Gcra {
                burst, interval_ms, ..
            } => [burst.to_string(), interval_ms.to_string()],
        }
    }

    /// The in-memory twin: the script's decision, computed the same way.
    /// `cost` must already be clamped. Writes the new state only if `write`.
    pub(crate) fn decide(
        &self,
        state: &mut Option<State>,
        now: u64,
        cost: u64,
        refund: bool,
        write: bool,
    ) -> (Reply, Write) {
        let at = (now as f64, cost as f64);
        match *self {
            Spec::FixedWindow { limit, window_ms } => {
                fixed_window::decide((limit as f64, window_ms as f64), state, at, refund, write)
            }
            Spec::SlidingLog { limit, window_ms } => {
                sliding_log::decide((limit as f64, window_ms as f64), state, at, refund, write)
            }
            Spec::SlidingWindow { limit, window_ms } => {
                sliding_window::decide((limit as f64, window_ms as f64), state, at, refund, write)
            }
            Spec::TokenBucket { capacity, rate } => gcra::virtual_schedule(
                (capacity as f64, 1000.0 / rate),
                state,
                at,
                refund,
                write,
                false,
            ),
            Spec::LeakyBucket { capacity, rate } => gcra::virtual_schedule(
                (capacity as f64, 1000.0 / rate),
                state,
                at,
                refund,
                write,
                true,
            ),
            Spec::Gcra {
                burst, interval_ms, ..
            } => {
                gcra::virtual_schedule((burst as f64, interval_ms), state, at, refund, write, false)
            }
        }
    }
}

/// Lua's `ms()`: whole ms rounded up, 0 for anything not positive.
pub(crate) fn ms(x: f64) -> i64 {
    if x <= 0.0 {
        0
    } else {
        ceil(x) as i64
    }
}

/// `x.floor()`, without the call into libm that x86-64's baseline
/// instruction set needs (a fifth of a GCRA decision in memory). Exact:
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

/// Lua's `reply()`.
pub(crate) fn reply(
    allowed: bool,
    limit: f64,
    remaining: f64,
    reset: f64,
    retry: Option<f64>,
    delay: f64,
) -> Reply {
    Reply {
        allowed,
        limit: limit as i64,
        remaining: remaining.max(0.0) as i64,
        reset_ms: ms(reset),
        retry_ms: retry.map_or(-1, ms),
        delay_ms: ms(delay),
    }
}

impl Reply {
    pub(crate) fn decision(self) -> Decision {
        let d = |v: i64| Duration::from_millis(v.max(0) as u64);
        Decision {
            allowed: self.allowed,
            limit: self.limit.max(0) as u64,
            remaining: self.remaining.max(0) as u64,
            reset_after: d(self.reset_ms),
            retry_after: (!self.allowed && self.retry_ms >= 0).then(|| d(self.retry_ms)),
            delay: d(self.delay_ms),
            degraded: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::sealed::Sealed;
    use crate::algorithm::*;
    use proptest::prelude::*;

    fn same(a: f64, b: f64) -> bool {
        a.to_bits() == b.to_bits()
    }

    #[test]
    fn floor_and_ceil_are_libm_s_at_the_edges() {
        let two52 = 4_503_599_627_370_496.0_f64;
        for x in [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            -1.0,
            0.999_999_999,
            -0.999_999_999,
            1e-300,
            -1e-300,
            two52 - 0.5,
            -(two52 - 0.5),
            two52,
            -two52,
            two52 + 2.0,
            1e300,
            -1e300,
            (1u64 << 48) as f64 + 0.25,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            assert!(same(floor(x), x.floor()), "floor({x})");
            assert!(same(ceil(x), x.ceil()), "ceil({x})");
        }
    }

    proptest! {
        #[test]
        fn floor_and_ceil_are_libm_s(bits in any::<u64>()) {
            let x = f64::from_bits(bits);
            prop_assume!(!x.is_nan());
            prop_assert!(same(floor(x), x.floor()), "floor({x})");
            prop_assert!(same(ceil(x), x.ceil()), "ceil({x})");
        }

        #[test]
        fn floor_and_ceil_match_on_decision_sized_numbers(x in -1e16f64..1e16) {
            prop_assert!(same(floor(x), x.floor()), "floor({x})");
            prop_assert!(same(ceil(x), x.ceil()), "ceil({x})");
        }
    }

    #[test]
    fn the_command_sends_what_the_string_args_say() {
        let specs: Vec<Spec> = [
            FixedWindow::new(10, Duration::from_secs(1)).parts(),
            SlidingLog::new(1 << 24, Duration::from_millis(1)).parts(),
            SlidingWindow::new(7, Duration::from_millis(1 << 40)).parts(),
            TokenBucket::new(10, 0.1).parts(),
            TokenBucket::new(3, 1e-9).parts(),
            LeakyBucket::new(1 << 40, 1e15).parts(),
            Gcra::new(3, Duration::from_millis(1000)).parts(),
            Gcra::new(1 << 40, Duration::from_millis(1)).parts(),
        ]
        .into_iter()
        .flatten()
        .map(|(_, s)| s)
        .collect();
        let keys: Vec<String> = (0..specs.len())
            .map(|i| format!("rl:x{i}:{{ana}}"))
            .collect();
        let targets: Vec<(&str, &Spec)> = keys.iter().map(|k| k.as_str()).zip(&specs).collect();
        for (now, mode) in [
            (None, Mode::Check),
            (Some(1_791_860_000_123), Mode::Peek),
            (Some(7), Mode::Refund),
        ] {
            for n in [1, targets.len()] {
                let ours = script_cmd("EVALSHA", "sha", &targets[..n], now, 4, mode);
                let mut theirs = redis::cmd("EVALSHA");
                theirs.arg("sha").arg(n);
                for (k, _) in &targets[..n] {
                    theirs.arg(*k);
                }
                for a in script_args(now, mode, 4, &specs[..n]) {
                    theirs.arg(a);
                }
                assert_eq!(ours.get_packed_command(), theirs.get_packed_command());
            }
        }
    }

    #[test]
    fn replies_parse() {
        let ints =
            |v: &[i64]| redis::Value::Array(v.iter().map(|&n| redis::Value::Int(n)).collect());
        let r = parse_value(&ints(&[1, 10, 9, 100, -1, 0, 0, 5, 0, 30, 30, 0]), 2).unwrap();
        assert!(r[0].allowed && !r[1].allowed);
        assert_eq!((r[1].limit, r[1].retry_ms), (5, 30));
        assert_eq!(parse_replies(&[1, 10, 9, 100, -1, 0], 1).unwrap()[0], r[0]);
        assert!(parse_value(&ints(&[1, 2, 3]), 1).is_none());
        assert!(parse_value(&redis::Value::Nil, 1).is_none());
    }
}
