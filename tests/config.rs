//! Every way to build a bad configuration that can be written, and what it
//! gets: an error naming the field (`ConfigError::field`), from `try_new`,
//! `try_with`, `try_burst`, a builder's `build`, a store's constructor or a
//! key extractor's option; and for the `const fn new`s, a panic whose
//! message is that error's. Each bound is tried at both ends: the last
//! value accepted and the first rejected.
//!
//! What cannot be written at all, because it does not compile, is proved by
//! `compile_fail` doctests instead (each next to the same code with a valid
//! value, which compiles and runs):
//!
//! * an invalid constant of each algorithm (`const A: Gcra = Gcra::new(0, ..)`),
//!   one block per type: `src/guide/configuration.rs` (and next to the
//!   types: `FixedWindow` and `SlidingWindow` in `src/algorithm/windows.rs`,
//!   `TokenBucket` in `src/algorithm/buckets.rs`);
//! * `const B: CircuitBreaker = CircuitBreaker::new(0, ..)`:
//!   `src/guide/configuration.rs` and `src/failure/breaker.rs`;
//! * `Limits::new()` without a limit: `src/guide/configuration.rs` and
//!   `src/algorithm/limits.rs`;
//! * a `Limits` inside a `Limits`: `src/guide/configuration.rs` and
//!   `src/algorithm/mod.rs` (the `Single` trait);
//! * `deny_cache(0)`, `MemoryStore::with_max_keys(0)` and
//!   `RedisStore::connections(0)` (they take a `NonZeroUsize`):
//!   `src/guide/configuration.rs`.

use floodgate::algorithm::*;
use floodgate::concurrency::ConcurrencyLimiter;
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::key::{ClientIp, Header, PeerIp};
use floodgate::store::{MemoryStore, RedisClusterStore, RedisStore};
use floodgate::{ConfigError, Limiter};
use std::fmt::Debug;
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, UnwindSafe};
use std::time::Duration;

/// The largest count (limit, capacity, burst) and window in ms.
const MAX: u64 = 1 << 40;
const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);
/// The slowest rate: one unit per 2^40 ms.
#[allow(clippy::cast_precision_loss, reason = "2^40 is exact in f64")]
const MIN_RATE: f64 = 1000.0 / MAX as f64;
/// The fastest rate: 2^40 units per ms.
#[allow(clippy::cast_precision_loss, reason = "2^40 is exact in f64")]
const MAX_RATE: f64 = MAX as f64 * 1000.0;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The error of `result`, which must be one naming `field`.
#[track_caller]
fn rejected<T: Debug>(result: Result<T, ConfigError>, field: &str) -> ConfigError {
    let e = result.expect_err("a bad configuration was accepted");
    assert_eq!(e.field(), field, "{e}");
    assert!(
        e.to_string().starts_with(&format!("invalid `{field}`: ")),
        "{e}"
    );
    e
}

/// The message `f` panics with.
#[track_caller]
fn panic_message<T: Debug>(f: impl FnOnce() -> T + UnwindSafe) -> String {
    let payload = catch_unwind(f).expect_err("did not panic");
    match (
        payload.downcast_ref::<String>(),
        payload.downcast_ref::<&str>(),
    ) {
        (Some(s), _) => s.clone(),
        (_, Some(s)) => s.to_string(),
        _ => panic!("a panic without a message"),
    }
}

/// A type's `try_new` and `new`.
type Ctors<A, B, T> = (fn(A, B) -> Result<T, ConfigError>, fn(A, B) -> T);

/// `try_new(a, b)` names `field` and says `reason`, and `new(a, b)` panics
/// with exactly that error's message.
#[track_caller]
fn invalid<A: Copy + UnwindSafe, B: Copy + UnwindSafe, T: Debug>(
    (try_new, new): Ctors<A, B, T>,
    (a, b): (A, B),
    field: &str,
    reason: &str,
) {
    let e = rejected(try_new(a, b), field);
    assert_eq!(e.to_string(), format!("invalid `{field}`: {reason}"));
    assert_eq!(panic_message(move || new(a, b)), e.to_string());
}

/// `try_new(a, b)` and `new(a, b)` both accept.
#[track_caller]
fn valid<A: Copy, B: Copy, T: Debug + PartialEq>((try_new, new): Ctors<A, B, T>, (a, b): (A, B)) {
    assert_eq!(try_new(a, b).unwrap(), new(a, b));
}

mod algorithms {
    use super::*;

    const AT_LEAST_1: &str = "must be at least 1";
    const AT_MOST_2_40: &str = "must be at most 2^40";
    const WHOLE_MS: &str = "must be a whole number of milliseconds";
    const AT_LEAST_1_MS: &str = "must be at least 1 ms";
    const AT_MOST_2_40_MS: &str = "must be at most 2^40 ms (about 34 years)";

    /// The bounds of a `(count, window)` algorithm whose fields are named
    /// `count` and `window`, whose count goes up to `most`. Values at the top
    /// of one range go with the bottom of the other, which every such type
    /// accepts (a sliding log also bounds their product).
    fn count_and_window<T: Debug + PartialEq>(
        ctors: Ctors<u64, Duration, T>,
        (count, most): (&str, u64),
        window: &str,
    ) {
        // The count: 1 to 2^40.
        invalid(ctors, (0, SEC), count, AT_LEAST_1);
        invalid(ctors, (MAX + 1, MS), count, AT_MOST_2_40);
        invalid(ctors, (u64::MAX, MS), count, AT_MOST_2_40);
        valid(ctors, (1, SEC));
        valid(ctors, (most, MS));
        // The window: whole ms, 1 ms to 2^40 ms.
        invalid(ctors, (1, Duration::ZERO), window, AT_LEAST_1_MS);
        invalid(ctors, (1, Duration::from_nanos(1)), window, WHOLE_MS);
        invalid(ctors, (1, Duration::from_micros(999)), window, WHOLE_MS);
        invalid(ctors, (1, Duration::from_micros(1_500)), window, WHOLE_MS);
        invalid(ctors, (1, SEC + Duration::from_nanos(1)), window, WHOLE_MS);
        invalid(ctors, (1, ms(MAX + 1)), window, AT_MOST_2_40_MS);
        invalid(
            ctors,
            (1, Duration::from_secs(u64::MAX)),
            window,
            AT_MOST_2_40_MS,
        );
        invalid(ctors, (1, Duration::MAX), window, WHOLE_MS);
        valid(ctors, (1, MS));
        valid(ctors, (1, Duration::new(0, 2_000_000)));
        valid(ctors, (1, ms(MAX)));
        // Both wrong: the first field is named.
        invalid(ctors, (0, Duration::ZERO), count, AT_LEAST_1);
    }

    #[test]
    fn fixed_window() {
        count_and_window(
            (FixedWindow::try_new, FixedWindow::new),
            ("limit", MAX),
            "window",
        );
        valid((FixedWindow::try_new, FixedWindow::new), (MAX, ms(MAX)));
    }

    #[test]
    fn sliding_window() {
        count_and_window(
            (SlidingWindow::try_new, SlidingWindow::new),
            ("limit", MAX),
            "window",
        );
        valid((SlidingWindow::try_new, SlidingWindow::new), (MAX, ms(MAX)));
    }

    #[test]
    fn sliding_log() {
        let ctors: Ctors<u64, Duration, SlidingLog> = (SlidingLog::try_new, SlidingLog::new);
        count_and_window(ctors, ("limit", MAX_LOG), "window");
        // At most 2^16 entries: one per unit admitted.
        assert_eq!(MAX_LOG, 1 << 16);
        let entries = "must be at most 2^16 for a sliding log (one entry per unit admitted): above, use a sliding window";
        invalid(ctors, (MAX_LOG + 1, MS), "limit", entries);
        invalid(ctors, (MAX, MS), "limit", entries);
        valid(ctors, (MAX_LOG, SEC));
        // limit × window (ms) below 2^50.
        let product = "limit × window (ms) must stay below 2^50 for a sliding log";
        valid(ctors, (MAX_LOG, ms((1 << 34) - 1)));
        invalid(ctors, (MAX_LOG, ms(1 << 34)), "limit", product);
        valid(ctors, ((1 << 10) - 1, ms(MAX)));
        invalid(ctors, (1 << 10, ms(MAX)), "limit", product);
        valid(ctors, (1 << 15, ms((1 << 35) - 1)));
        invalid(ctors, (1 << 15, ms(1 << 35)), "limit", product);
        // Each field's own bound comes first, then the entries, then the
        // product.
        invalid(ctors, (MAX + 1, ms(MAX)), "limit", AT_MOST_2_40);
        invalid(ctors, (MAX_LOG, ms(MAX + 1)), "window", AT_MOST_2_40_MS);
        invalid(ctors, (MAX_LOG + 1, ms(MAX)), "limit", entries);
    }

    #[test]
    fn gcra() {
        let ctors: Ctors<u64, Duration, Gcra> = (Gcra::try_new, Gcra::new);
        count_and_window(ctors, ("limit", MAX), "period");
        valid(ctors, (MAX, ms(MAX)));

        let steady = Gcra::new(10, SEC);
        assert_eq!(
            rejected(steady.try_burst(0), "burst").to_string(),
            "invalid `burst`: must be at least 1"
        );
        assert_eq!(
            rejected(steady.try_burst(MAX + 1), "burst").to_string(),
            "invalid `burst`: must be at most 2^40"
        );
        rejected(steady.try_burst(u64::MAX), "burst");
        // The schedule: burst × period / limit (100 ms) at most 2^40 ms.
        let long = "invalid `burst`: burst × period / limit must be at most 2^40 ms";
        assert_eq!(
            rejected(steady.try_burst(MAX / 100 + 1), "burst").to_string(),
            long
        );
        // At its ends: one unit of 2^40 ms; 2^20 units of 2^20 ms, above
        // the limit; any burst of a fast one.
        let slowest = Gcra::new(1, ms(MAX));
        assert_eq!(slowest.try_burst(1).unwrap(), slowest);
        assert_eq!(rejected(slowest.try_burst(2), "burst").to_string(), long);
        let wide = Gcra::new(1 << 10, ms(1 << 30));
        wide.try_burst(1 << 20).unwrap();
        let e = rejected(wide.try_burst((1 << 20) + 1), "burst");
        assert_eq!(e.to_string(), long);
        Gcra::new(MAX, MS).try_burst(MAX).unwrap();
        Gcra::new(MAX, ms(MAX)).try_burst(MAX).unwrap();
        // The burst's own bound comes first.
        assert_eq!(
            rejected(slowest.try_burst(MAX + 1), "burst").to_string(),
            "invalid `burst`: must be at most 2^40"
        );
        for n in [1, 10, MAX / 100] {
            assert_eq!(
                steady.try_burst(n).unwrap().quota(),
                steady.quota(),
                "the burst is not the quota"
            );
        }
        // The default burst is the limit.
        assert_eq!(steady.try_burst(10).unwrap(), steady);
    }

    /// The bounds of a bucket: its capacity, 1 to 2^40; its rate per
    /// second, finite and positive, one unit in 2^-40 ms to 2^40 ms; and
    /// the time to refill (or drain) fully, at most 2^40 ms, which names
    /// the capacity.
    fn bucket<T: Debug + PartialEq>(ctors: Ctors<u64, f64, T>, rate: &str) {
        invalid(ctors, (0, 1.0), "capacity", AT_LEAST_1);
        invalid(ctors, (MAX + 1, 1.0), "capacity", AT_MOST_2_40);
        invalid(ctors, (u64::MAX, 1.0), "capacity", AT_MOST_2_40);
        valid(ctors, (1, 1.0));
        // The time to refill or drain fully, at most 2^40 ms.
        let long =
            "the time to refill or drain fully (1000 × capacity / rate ms) must be at most 2^40 ms";
        valid(ctors, (MAX, 1000.0));
        invalid(ctors, (MAX, 1000.0_f64.next_down()), "capacity", long);
        valid(ctors, (1, MIN_RATE));
        invalid(ctors, (2, MIN_RATE), "capacity", long);
        valid(ctors, (2, 2.0 * MIN_RATE));
        invalid(ctors, (3, 2.0 * MIN_RATE), "capacity", long);
        // Each field's own bound comes first.
        invalid(ctors, (MAX + 1, MIN_RATE), "capacity", AT_MOST_2_40);
        let too_small = "is too small: one unit would take over 34 years";
        invalid(ctors, (2, MIN_RATE.next_down()), rate, too_small);

        let not_positive = "must be a finite number above 0";
        for r in [
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            -1.0,
            f64::MIN,
        ] {
            invalid(ctors, (1, r), rate, not_positive);
        }
        for r in [MIN_RATE.next_down(), f64::MIN_POSITIVE, 5e-324, 1e-12] {
            invalid(ctors, (1, r), rate, too_small);
        }
        let too_big = "must be at most 2^40 per ms";
        for r in [MAX_RATE.next_up(), 1e16, f64::MAX] {
            invalid(ctors, (1, r), rate, too_big);
        }
        for r in [MIN_RATE, 0.5, 1.0, 1e6, MAX_RATE] {
            valid(ctors, (1, r));
        }
        for r in [1e3, 1e6, MAX_RATE] {
            valid(ctors, (MAX, r));
        }
        // Both wrong: the capacity is named.
        invalid(ctors, (0, f64::NAN), "capacity", AT_LEAST_1);
    }

    #[test]
    fn token_bucket() {
        bucket((TokenBucket::try_new, TokenBucket::new), "refill_per_sec");
    }

    #[test]
    fn leaky_bucket() {
        bucket((LeakyBucket::try_new, LeakyBucket::new), "leak_per_sec");
    }

    /// `new` in a constant is checked at compile time; at run time it is the
    /// documented panic (one kind per test, for the record; every kind is
    /// also compared with `try_new`'s message above).
    #[test]
    #[should_panic(expected = "invalid `limit`: must be at least 1")]
    fn new_panics_naming_the_limit() {
        let limit = std::hint::black_box(0);
        let _ = FixedWindow::new(limit, SEC);
    }

    #[test]
    #[should_panic(expected = "invalid `window`: must be a whole number of milliseconds")]
    fn new_panics_naming_the_window() {
        let window = std::hint::black_box(Duration::from_micros(1_500));
        let _ = SlidingWindow::new(1, window);
    }

    #[test]
    #[should_panic(expected = "invalid `limit`: limit × window (ms) must stay below 2^50")]
    fn new_panics_naming_the_sliding_log_product() {
        let window = std::hint::black_box(ms(MAX));
        let _ = SlidingLog::new(MAX_LOG, window);
    }

    #[test]
    #[should_panic(expected = "invalid `refill_per_sec`: must be a finite number above 0")]
    fn new_panics_naming_the_refill_rate() {
        let _ = TokenBucket::new(1, std::hint::black_box(f64::NAN));
    }

    #[test]
    #[should_panic(expected = "invalid `leak_per_sec`: is too small")]
    fn new_panics_naming_the_leak_rate() {
        let _ = LeakyBucket::new(1, std::hint::black_box(1e-12));
    }

    #[test]
    #[should_panic(expected = "invalid `limit`: must be at most 2^16 for a sliding log")]
    fn new_panics_naming_a_sliding_log_s_entries() {
        let _ = SlidingLog::new(std::hint::black_box(MAX_LOG + 1), SEC);
    }

    #[test]
    #[should_panic(expected = "invalid `capacity`: the time to refill or drain fully")]
    fn new_panics_naming_a_token_bucket_s_refill() {
        let _ = TokenBucket::new(std::hint::black_box(MAX), 999.0);
    }

    #[test]
    #[should_panic(expected = "invalid `capacity`: the time to refill or drain fully")]
    fn new_panics_naming_a_leaky_bucket_s_drain() {
        let _ = LeakyBucket::new(std::hint::black_box(2), MIN_RATE);
    }

    #[test]
    #[should_panic(expected = "invalid `period`: must be at most 2^40 ms")]
    fn new_panics_naming_the_period() {
        let _ = Gcra::new(1, std::hint::black_box(ms(MAX + 1)));
    }
}

mod limits {
    use super::*;

    const ONE: FixedWindow = FixedWindow::new(1, SEC);
    const BAD_NAME: &str = "must be 1 to 32 characters of A-Z a-z 0-9 _ - .";

    /// Names a limit may not have: 1 to 32 of `A-Z a-z 0-9 _ - .` only (the
    /// characters a limiter's name may have).
    fn bad_names() -> Vec<String> {
        let mut names: Vec<String> = ["", " ", "a b", "a/b", "a:b", "{a}", "é", "a\0", "ß"]
            .map(String::from)
            .into();
        names.push("a".repeat(33));
        names
    }

    #[test]
    fn names() {
        for name in bad_names() {
            let e = rejected(Limits::try_new(&name, ONE), "name");
            assert_eq!(e.to_string(), format!("invalid `name`: {BAD_NAME}"));
            // `new` panics with the same message.
            let n = name.clone();
            assert_eq!(panic_message(move || Limits::new(&n, ONE)), e.to_string());
            // And `try_with` checks them the same way.
            rejected(Limits::new("first", ONE).try_with(&name, ONE), "name");
        }
        let all = "azAZ09_-.";
        let longest = "a".repeat(32);
        for name in ["a", "Z", "0", "_", "-", ".", "a.b", all, &longest] {
            assert_eq!(Limits::try_new(name, ONE).unwrap(), Limits::new(name, ONE));
        }
    }

    #[test]
    #[should_panic(expected = "invalid `name`: must be 1 to 32 characters")]
    fn new_panics_naming_the_name() {
        let _ = Limits::new(std::hint::black_box("per second"), ONE);
    }

    #[test]
    fn a_name_is_used_once() {
        let limits = Limits::new("a", ONE).try_with("b", ONE).unwrap();
        let e = rejected(limits.clone().try_with("a", ONE), "name");
        assert_eq!(e.to_string(), "invalid `name`: `a` is used twice");
        rejected(limits.clone().try_with("b", Gcra::new(1, SEC)), "name");
        // Names are case-sensitive.
        assert_eq!(limits.try_with("A", ONE).unwrap().quotas().count(), 3);
    }

    #[test]
    fn at_most_max_limits() {
        assert_eq!(MAX_LIMITS, 16);
        let mut limits = Limits::new("l0", ONE);
        for i in 1..MAX_LIMITS {
            limits = limits.try_with(&format!("l{i}"), ONE).unwrap();
        }
        assert_eq!(limits.quotas().count(), MAX_LIMITS);
        let e = rejected(limits.clone().try_with("one_more", ONE), "limits");
        assert_eq!(e.to_string(), "invalid `limits`: at most 16");
        // The name is checked first: a bad or taken one is named as such.
        rejected(limits.clone().try_with("l3", ONE), "name");
        rejected(limits.try_with("", ONE), "name");
    }
}

mod builders {
    use super::*;

    const GCRA: Gcra = Gcra::new(10, SEC);

    /// The result of building a rate limiter and a concurrency limiter with
    /// the same settings `$set` applied to builder `$b`.
    macro_rules! both {
        (|$b:ident| $set:expr) => {{
            let rate = {
                let $b = Limiter::builder(MemoryStore::new(), GCRA);
                $set.build().map(drop)
            };
            let concurrency = {
                let $b = ConcurrencyLimiter::builder(MemoryStore::new(), 4);
                $set.build().map(drop)
            };
            [rate, concurrency]
        }};
    }

    const BAD_PREFIX: &str = "invalid `prefix`: must be at most 64 bytes without `{` or `}`";
    const BAD_NAME: &str = "invalid `name`: must be 1 to 64 characters of A-Z a-z 0-9 _ - .";

    #[test]
    fn defaults_are_valid() {
        for r in both!(|b| b) {
            r.unwrap();
        }
    }

    #[test]
    fn prefix() {
        let too_long = "p".repeat(65);
        // 66 bytes in 33 characters: the bound is in bytes.
        let too_long_wide = "é".repeat(33);
        for prefix in [
            too_long.as_str(),
            &too_long_wide,
            "{",
            "}",
            "a{b",
            "rl}",
            "{}",
        ] {
            for r in both!(|b| b.prefix(prefix)) {
                assert_eq!(rejected(r, "prefix").to_string(), BAD_PREFIX);
            }
        }
        let longest = "p".repeat(64);
        let wide = "é".repeat(32);
        for prefix in ["", "rl", "a:b", "é", "with space", &longest, &wide] {
            for r in both!(|b| b.prefix(prefix)) {
                r.unwrap();
            }
        }
    }

    #[test]
    fn name() {
        let too_long = "n".repeat(65);
        for name in [
            "", " ", "a b", "a:b", "a/b", "{a}", "é", "a\n", "a,b", &too_long,
        ] {
            for r in both!(|b| b.name(name)) {
                assert_eq!(rejected(r, "name").to_string(), BAD_NAME);
            }
        }
        let longest = "n".repeat(64);
        for name in ["a", "api.v2", "A-Z_0-9", ".", "-", &longest] {
            for r in both!(|b| b.name(name)) {
                r.unwrap();
            }
        }
    }

    #[test]
    fn the_prefix_is_checked_before_the_name() {
        for r in both!(|b| b.prefix("{").name("")) {
            rejected(r, "prefix");
        }
    }

    #[test]
    fn timeout() {
        let at_least = "invalid `timeout`: must be at least 1 ms";
        for t in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_micros(999),
        ] {
            for r in both!(|b| b.timeout(t)) {
                assert_eq!(rejected(r, "timeout").to_string(), at_least);
            }
        }
        // No upper bound, and no whole-ms rule.
        for t in [MS, Duration::from_micros(1_500), Duration::MAX] {
            for r in both!(|b| b.timeout(t)) {
                r.unwrap();
            }
        }
    }

    #[test]
    fn a_fallback_is_a_limiter_of_the_same_kind() {
        let rate = || Limiter::builder(MemoryStore::new(), GCRA).build().unwrap();
        let concurrency = || {
            ConcurrencyLimiter::builder(MemoryStore::new(), 2)
                .build()
                .unwrap()
        };
        let e = rejected(
            Limiter::builder(MemoryStore::new(), GCRA)
                .on_store_failure(FailurePolicy::fallback(concurrency()))
                .build(),
            "on_store_failure",
        );
        assert!(e.to_string().contains("falls back to a `Limiter`"), "{e}");
        let e = rejected(
            ConcurrencyLimiter::builder(MemoryStore::new(), 2)
                .on_store_failure(FailurePolicy::fallback(rate()))
                .build(),
            "on_store_failure",
        );
        assert!(
            e.to_string()
                .contains("falls back to a `ConcurrencyLimiter`"),
            "{e}"
        );
        // The right kinds, of any algorithm, and the other policies.
        let limits = Limits::new("a", FixedWindow::new(1, SEC));
        let other_algorithm = Limiter::builder(MemoryStore::new(), limits)
            .build()
            .unwrap();
        Limiter::builder(MemoryStore::new(), GCRA)
            .on_store_failure(FailurePolicy::fallback(other_algorithm))
            .build()
            .unwrap();
        ConcurrencyLimiter::builder(MemoryStore::new(), 2)
            .on_store_failure(FailurePolicy::fallback(concurrency()))
            .build()
            .unwrap();
        for policy in [
            FailurePolicy::FailOpen,
            FailurePolicy::FailClosed,
            FailurePolicy::ReturnError,
        ] {
            for r in both!(|b| b.on_store_failure(policy.clone())) {
                r.unwrap();
            }
        }
    }

    #[test]
    fn deny_cache_and_breaker_settings_are_valid_by_type() {
        for n in [1, 1_000, usize::MAX] {
            Limiter::builder(MemoryStore::new(), GCRA)
                .deny_cache(NonZeroUsize::new(n).unwrap())
                .build()
                .unwrap();
        }
        for breaker in [CircuitBreaker::disabled(), CircuitBreaker::new(1, MS)] {
            for r in both!(|b| b.circuit_breaker(breaker)) {
                r.unwrap();
            }
        }
    }

    #[test]
    fn concurrency_max() {
        let e = "invalid `max`: must be between 1 and 2^20";
        for max in [0, (1 << 20) + 1, u64::MAX] {
            let r = ConcurrencyLimiter::builder(MemoryStore::new(), max).build();
            assert_eq!(rejected(r, "max").to_string(), e);
        }
        for max in [1, 1 << 20] {
            let l = ConcurrencyLimiter::builder(MemoryStore::new(), max)
                .build()
                .unwrap();
            assert_eq!(l.max(), max);
        }
    }

    #[test]
    fn concurrency_lease() {
        let lease = |d: Duration| {
            ConcurrencyLimiter::builder(MemoryStore::new(), 1)
                .lease(d)
                .build()
        };
        let cases = [
            (Duration::ZERO, "must be at least 1 ms"),
            (
                Duration::from_micros(1_500),
                "must be a whole number of milliseconds",
            ),
            (
                Duration::from_nanos(1),
                "must be a whole number of milliseconds",
            ),
            (ms(MAX + 1), "must be at most 2^40 ms (about 34 years)"),
            (Duration::MAX, "must be a whole number of milliseconds"),
        ];
        for (d, reason) in cases {
            let e = rejected(lease(d), "lease");
            assert_eq!(e.to_string(), format!("invalid `lease`: {reason}"));
        }
        for d in [MS, SEC, ms(MAX)] {
            lease(d).unwrap();
        }
    }

    #[test]
    fn concurrency_checks_max_then_lease_then_settings() {
        let r = ConcurrencyLimiter::builder(MemoryStore::new(), 0)
            .lease(Duration::ZERO)
            .name("")
            .build();
        rejected(r, "max");
        let r = ConcurrencyLimiter::builder(MemoryStore::new(), 1)
            .lease(Duration::ZERO)
            .name("")
            .build();
        rejected(r, "lease");
    }
}

mod circuit_breaker {
    use super::*;

    const CTORS: Ctors<u32, Duration, CircuitBreaker> =
        (CircuitBreaker::try_new, CircuitBreaker::new);

    #[test]
    fn failures_and_cool_down() {
        invalid(CTORS, (0, SEC), "failures", "must be at least 1");
        valid(CTORS, (1, SEC));
        valid(CTORS, (u32::MAX, SEC));
        let whole = "must be a whole number of milliseconds";
        invalid(
            CTORS,
            (1, Duration::ZERO),
            "cool_down",
            "must be at least 1 ms",
        );
        invalid(CTORS, (1, Duration::from_nanos(1)), "cool_down", whole);
        invalid(CTORS, (1, Duration::from_micros(1_500)), "cool_down", whole);
        let long = "must be at most 2^40 ms (about 34 years)";
        invalid(CTORS, (1, ms(MAX + 1)), "cool_down", long);
        invalid(CTORS, (1, Duration::MAX), "cool_down", whole);
        valid(CTORS, (1, MS));
        valid(CTORS, (1, ms(MAX)));
        // Both wrong: the failures are named.
        invalid(CTORS, (0, Duration::ZERO), "failures", "must be at least 1");
    }

    #[test]
    #[should_panic(expected = "invalid `failures`: must be at least 1")]
    fn new_panics_naming_the_failures() {
        let _ = CircuitBreaker::new(std::hint::black_box(0), SEC);
    }

    #[test]
    fn disabled_and_default_are_valid() {
        assert!(!CircuitBreaker::disabled().is_enabled());
        assert_eq!(
            CircuitBreaker::default(),
            CircuitBreaker::try_new(5, ms(500)).unwrap()
        );
    }
}

mod stores {
    use super::*;

    #[test]
    fn redis_urls() {
        for url in [
            "",
            "nope://x",
            "http://127.0.0.1:6379",
            "127.0.0.1:6379",
            "redis://",
            "redis://:0",
            "redis://127.0.0.1:99999",
            "redis://127.0.0.1:port",
            "redis://127.0.0.1/db",
            "redis://127.0.0.1?protocol=nope",
        ] {
            let e = rejected(RedisStore::from_url(url), "url");
            assert!(e.to_string().contains("not a Redis URL"), "{url}: {e}");
        }
        // Connections are lazy: a URL of nothing listening is valid.
        for url in [
            "redis://127.0.0.1:1",
            "redis://localhost",
            "redis://user:password@127.0.0.1:6379/3",
            "redis://[::1]:6379",
            "redis+unix:///tmp/nothing.sock",
            "unix:///tmp/nothing.sock",
            // TLS, verified or (tests only) not.
            "rediss://127.0.0.1:6379",
            "rediss://127.0.0.1:6379/#insecure",
            "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster",
            "rediss+sentinel://user:pass@127.0.0.1:26379/mymaster/1",
        ] {
            RedisStore::from_url(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        }
    }

    #[test]
    fn redis_store_options_are_valid_by_type() {
        let store = RedisStore::from_url("redis://127.0.0.1:1").unwrap();
        let _ = store
            .clone()
            .connections(NonZeroUsize::MIN)
            .connect_timeout(Duration::ZERO);
        let _ = store
            .connections(NonZeroUsize::new(64).unwrap())
            .connect_timeout(Duration::MAX);
    }

    #[test]
    fn cluster_nodes() {
        let none: [&str; 0] = [];
        let e = rejected(RedisClusterStore::from_nodes(none), "nodes");
        assert!(e.to_string().contains("at least one node"), "{e}");
        // One bad node spoils the list.
        rejected(
            RedisClusterStore::from_nodes(["redis://127.0.0.1:7000", "nope://x"]),
            "nodes",
        );
        rejected(RedisClusterStore::from_nodes([""]), "nodes");
        // TLS nodes are fine.
        RedisClusterStore::from_nodes(["rediss://127.0.0.1:7000"]).unwrap();
        // A cluster announces IP addresses: unix sockets cannot be followed.
        rejected(
            RedisClusterStore::from_nodes(["unix:///tmp/x.sock"]),
            "nodes",
        );
        // `from_url` is `from_nodes([url])`, and names the same field.
        rejected(RedisClusterStore::from_url("nope://x"), "nodes");
        RedisClusterStore::from_nodes(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"])
            .unwrap();
        RedisClusterStore::from_url("redis://127.0.0.1:7000").unwrap();
    }

    #[tokio::test]
    async fn memory_store_bounds_are_valid_by_type() {
        // The smallest store holds one key.
        let one = MemoryStore::with_max_keys(NonZeroUsize::MIN);
        let limiter = Limiter::new(one.clone(), FixedWindow::new(5, SEC));
        for key in ["a", "b", "c"] {
            assert!(limiter.check(key, 1).await.unwrap().allowed());
        }
        assert_eq!(one.len(), 1);
        // The largest allocates nothing up front.
        assert!(MemoryStore::with_max_keys(NonZeroUsize::MAX).is_empty());
    }
}

/// Every constructor that can panic does so at its caller's line, not
/// inside floodgate (`#[track_caller]`).
mod panic_locations {
    use super::*;
    use std::cell::RefCell;
    use std::panic::{set_hook, take_hook};
    use std::sync::Once;

    thread_local! {
        /// Where the last panic of this thread happened.
        static WHERE: RefCell<Option<(String, u32)>> = const { RefCell::new(None) };
    }

    /// The file and line `f` panics at, as the panic hook sees them. The
    /// hook records the location per thread, then runs the previous hook:
    /// tests running in parallel see their own panics only.
    fn panic_location<T: Debug>(f: impl FnOnce() -> T + UnwindSafe) -> (String, u32) {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let previous = take_hook();
            set_hook(Box::new(move |info| {
                let at = info.location().map(|l| (l.file().to_owned(), l.line()));
                WHERE.with(|w| *w.borrow_mut() = at);
                previous(info);
            }));
        });
        WHERE.with(|w| w.borrow_mut().take());
        panic_message(f);
        WHERE
            .with(|w| w.borrow_mut().take())
            .expect("the panic has a location")
    }

    /// `here` is the line of the call, given by `line!()` on it.
    #[track_caller]
    fn at_caller<T: Debug>(f: impl FnOnce() -> T + UnwindSafe, here: u32) {
        assert_eq!(panic_location(f), (file!().to_owned(), here));
    }

    #[test]
    fn constructors_panic_at_the_caller() {
        at_caller(|| SlidingWindow::new(0, SEC), line!());
        at_caller(|| FixedWindow::new(1, Duration::ZERO), line!());
        at_caller(|| SlidingLog::new(MAX_LOG + 1, SEC), line!());
        at_caller(|| TokenBucket::new(1, f64::NAN), line!());
        at_caller(|| LeakyBucket::new(0, 1.0), line!());
        at_caller(|| Gcra::new(1, Duration::from_micros(1)), line!());
        at_caller(|| CircuitBreaker::new(0, SEC), line!());
        at_caller(|| Limits::new("", Gcra::new(1, SEC)), line!());
    }

    #[test]
    fn the_location_is_not_inside_floodgate() {
        let (file, _) = panic_location(|| SlidingWindow::new(0, SEC));
        assert!(!file.contains("src/algorithm"), "{file}");
        assert!(file.ends_with("config.rs"), "{file}");
    }
}

mod keys {
    use super::*;

    #[test]
    fn header_names() {
        for name in ["", " ", "x api key", "x-api-key:", "é", "x\nkey", "(x)"] {
            let e = rejected(Header::try_new(name), "name");
            assert!(e.to_string().contains("is not a valid header name"), "{e}");
        }
        for name in [
            "x-api-key",
            "X-Api-Key",
            "authorization",
            "x_key",
            "!#$%&'*+-.^_`|~",
        ] {
            assert!(Header::try_new(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn header_max_len() {
        let header = || Header::try_new("x-api-key").unwrap();
        let e = rejected(header().max_len(0), "max_len");
        assert_eq!(e.to_string(), "invalid `max_len`: must be at least 1 byte");
        for n in [1, Header::DEFAULT_MAX_LEN, usize::MAX] {
            assert!(header().max_len(n).is_ok());
        }
    }

    #[test]
    fn ip_prefix_lengths() {
        for len in [0, 33, 64, 128, u8::MAX] {
            let e = rejected(PeerIp::new().ipv4_prefix(len), "ipv4_prefix");
            assert!(e.to_string().contains("use 1 to 32"), "{e}");
            rejected(ClientIp::new().ipv4_prefix(len), "ipv4_prefix");
        }
        for len in [0, 129, u8::MAX] {
            let e = rejected(PeerIp::new().ipv6_prefix(len), "ipv6_prefix");
            assert!(e.to_string().contains("use 1 to 128"), "{e}");
            rejected(ClientIp::new().ipv6_prefix(len), "ipv6_prefix");
        }
        for len in [1, 24, 32] {
            assert!(PeerIp::new().ipv4_prefix(len).is_ok());
            assert!(ClientIp::new().ipv4_prefix(len).is_ok());
        }
        for len in [1, 33, 64, 128] {
            assert!(PeerIp::new().ipv6_prefix(len).is_ok());
            assert!(ClientIp::new().ipv6_prefix(len).is_ok());
        }
    }

    #[test]
    fn trusted_hops() {
        for n in [65, 1_000, usize::MAX] {
            let e = rejected(ClientIp::new().trusted_hops(n), "trusted_hops");
            assert!(e.to_string().contains("more than the 64 hops"), "{e}");
        }
        for n in [0, 1, 64] {
            assert!(ClientIp::new().trusted_hops(n).is_ok());
        }
    }
}
