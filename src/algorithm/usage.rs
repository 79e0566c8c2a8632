//! How much of its quota a key has used, read from its twin's state: what
//! the memory store evicts by (the least used first, so that making room
//! loosens limits least). Nothing here decides or writes.

#[cfg(test)]
use super::spec::TwinMode;
use super::spec::{floor, Spec, State};

/// How much of its quota a key's state has used at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Usage {
    /// The fraction used, 0 (what a key nobody used has: evicting it changes
    /// nothing) to 1 (all of it).
    pub(crate) used: f64,
    /// Whether a request of cost 1 would be denied now: the key is at its
    /// limit, and evicting it would admit requests that are denied today.
    pub(crate) full: bool,
}

/// A key's usage at `now` under `spec`, as its twin would see it:
///
/// - fixed window: the count of the current window / limit (another
///   window's count is 0);
/// - sliding log: the entries still in the window / limit;
/// - sliding window: the weighted estimate / limit;
/// - token bucket, leaky bucket, GCRA: the backlog left at `now` /
///   (burst × interval);
/// - concurrency: the leases alive / max.
///
/// A state of another algorithm than `spec`'s reads as unused, as the twin
/// would read it. `key` is the user key as the store keeps it: a jittered
/// window's windows are read at its offset (for a key the memory store
/// keeps as a hash, the hash's offset: a rank for eviction, no decision).
pub(crate) fn quota_used(spec: &Spec, state: &State, now: u64, key: &str) -> Usage {
    // A jittered window's clock, as its twin reads it (`Spec::decide`).
    let now = now as f64 - spec.offset(key).unwrap_or(0) as f64;
    // Units used and units allowed; `full` when one more unit does not fit.
    let of = |used: f64, limit: f64| Usage {
        used: (used / limit).clamp(0.0, 1.0),
        full: used + 1.0 > limit,
    };
    let unused = Usage {
        used: 0.0,
        full: false,
    };
    match (*spec, state) {
        (
            Spec::FixedWindow {
                limit, window_ms, ..
            },
            State::Counter { idx, count },
        ) => {
            let current = floor(now / window_ms as f64);
            of(if *idx == current { *count } else { 0.0 }, limit as f64)
        }
        (Spec::SlidingLog { limit, window_ms }, State::Log(log)) => {
            let cut = now - window_ms as f64;
            let live = log.len() - log.partition_point(|&t| t <= cut);
            of(live as f64, limit as f64)
        }
        (
            Spec::SlidingWindow {
                limit, window_ms, ..
            },
            State::Counters { idx, cur, prev },
        ) => {
            let window = window_ms as f64;
            let current = floor(now / window);
            let (cur, prev) = if *idx == current {
                (*cur, *prev)
            } else if *idx == current - 1.0 {
                (0.0, *cur)
            } else {
                (0.0, 0.0)
            };
            let elapsed = now - current * window;
            of(
                floor(prev * (window - elapsed) / window + cur),
                limit as f64,
            )
        }
        (
            Spec::TokenBucket {
                capacity,
                interval_ms,
                ..
            }
            | Spec::LeakyBucket {
                capacity,
                interval_ms,
                ..
            },
            State::Backlog { backlog, ts },
        ) => schedule(capacity as f64, interval_ms, (*backlog, *ts), now),
        (
            Spec::Gcra {
                burst, interval_ms, ..
            },
            State::Backlog { backlog, ts },
        ) => schedule(burst as f64, interval_ms, (*backlog, *ts), now),
        (Spec::Concurrency { max, .. }, State::Leases(leases)) => {
            let now = now as u64;
            let live = leases.iter().filter(|(_, e)| *e > now).count();
            of(live as f64, max as f64)
        }
        _ => unused,
    }
}

/// The virtual schedule's usage (`gcra.rs`): the backlog left at `now` out
/// of `burst × interval`, full when one more interval goes past it by more
/// than the twin's rounding margin.
fn schedule(burst: f64, interval: f64, (backlog, ts): (f64, f64), now: f64) -> Usage {
    let tau = burst * interval;
    // `EPS` of `gcra.rs` and of the script.
    let eps = if interval < 1.0 {
        1e-6 * interval
    } else {
        1e-6
    };
    let left = (backlog - (now - ts).max(0.0)).max(0.0);
    Usage {
        used: (left / tau).clamp(0.0, 1.0),
        full: left + interval - tau > eps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    const HOUR: u64 = 3_600_000;
    /// The start of an hour.
    const T: u64 = 1_791_860_400_000;
    /// The user key of every state here.
    const KEY: &str = "ana";

    /// Run the twin `n` times at `now` (cost 1) from a fresh state.
    fn driven(spec: &Spec, n: usize, now: u64) -> State {
        let mut state = None;
        for _ in 0..n {
            spec.decide(
                &mut state,
                now,
                1,
                (false, true),
                &TwinMode::PLAIN,
                ("lease", KEY),
            );
        }
        state.expect("a written state")
    }

    fn specs() -> Vec<Spec> {
        let interval_ms = HOUR as f64 / 5.0;
        vec![
            Spec::FixedWindow {
                limit: 5,
                window_ms: HOUR,
                jittered: false,
            },
            Spec::FixedWindow {
                limit: 5,
                window_ms: HOUR,
                jittered: true,
            },
            Spec::SlidingLog {
                limit: 5,
                window_ms: HOUR,
            },
            Spec::SlidingWindow {
                limit: 5,
                window_ms: HOUR,
                jittered: false,
            },
            Spec::SlidingWindow {
                limit: 5,
                window_ms: HOUR,
                jittered: true,
            },
            crate::algorithm::TokenBucket::new(5, 5.0 / 3_600.0).to_spec(),
            crate::algorithm::LeakyBucket::new(5, 5.0 / 3_600.0).to_spec(),
            Spec::Gcra {
                limit: 5,
                period_ms: HOUR,
                burst: 5,
                interval_ms,
            },
            Spec::Concurrency {
                max: 5,
                lease_ms: HOUR,
            },
        ]
    }

    #[test]
    fn used_is_the_fraction_of_the_quota_and_full_means_denied() {
        for spec in specs() {
            for n in 1..=5 {
                // Concurrency leases need distinct names.
                let state = if let Spec::Concurrency { .. } = spec {
                    let leases = (0..n).map(|i| (i.to_string().into(), T + HOUR)).collect();
                    State::Leases(leases)
                } else {
                    driven(&spec, n, T)
                };
                let u = quota_used(&spec, &state, T, KEY);
                assert!(
                    (u.used - n as f64 / 5.0).abs() < 1e-9,
                    "{spec:?} after {n}: {u:?}"
                );
                assert_eq!(u.full, n == 5, "{spec:?} after {n}: {u:?}");
                // The twin agrees that a full key denies one more.
                let mut s = Some(state);
                let (reply, _) = spec.decide(
                    &mut s,
                    T,
                    1,
                    (false, false),
                    &TwinMode::PLAIN,
                    ("other", KEY),
                );
                assert_eq!(reply.allowed(), !u.full, "{spec:?} after {n}");
            }
        }
    }

    #[test]
    fn state_that_time_has_freed_reads_as_unused() {
        for spec in specs() {
            let state = if let Spec::Concurrency { .. } = spec {
                State::Leases(vec![("a".into(), T + HOUR)])
            } else {
                driven(&spec, 5, T)
            };
            // Two windows (or a full refill, or the leases' life) later.
            let u = quota_used(&spec, &state, T + 2 * HOUR + 1, KEY);
            assert_eq!(
                u,
                Usage {
                    used: 0.0,
                    full: false
                },
                "{spec:?}"
            );
        }
    }

    #[test]
    fn the_windows_read_their_twins_edges() {
        let log = Spec::SlidingLog {
            limit: 4,
            window_ms: 100,
        };
        let state = State::Log(VecDeque::from([10.0, 20.0, 30.0, 40.0]));
        // At 120, the entries at 10 and 20 are out (t <= now - window).
        assert_eq!(quota_used(&log, &state, 120, KEY).used, 0.5);
        assert!(quota_used(&log, &state, 109, KEY).full);
        let sw = Spec::SlidingWindow {
            limit: 10,
            window_ms: 100,
            jittered: false,
        };
        let state = State::Counters {
            idx: 0.0,
            cur: 10.0,
            prev: 0.0,
        };
        // A quarter into the next window: floor(10 × 0.75) = 7 used.
        let u = quota_used(&sw, &state, 125, KEY);
        assert!((u.used - 0.7).abs() < 1e-12 && !u.full, "{u:?}");
        // A state of another algorithm is a fresh key's.
        assert_eq!(
            quota_used(&sw, &State::Log(VecDeque::new()), 0, KEY).used,
            0.0
        );
    }
}
