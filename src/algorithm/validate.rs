//! Checks of algorithm parameters, usable in `const` constructors: an
//! invalid constant is a compile-time error, an invalid run-time value a
//! [`ConfigError`] (from `try_new`) or a documented panic (from `new`).
//!
//! The bounds keep every number the Lua code computes below 2^53, where
//! doubles are exact.

use crate::ConfigError;
use std::time::Duration;

/// Largest limit, capacity or burst.
pub(crate) const MAX_LIMIT: u64 = 1 << 40;
/// Longest window or period: about 34 years, in ms.
pub(crate) const MAX_WINDOW_MS: u64 = 1 << 40;

/// What is wrong with a parameter, in words fixed at compile time (a
/// `const fn` can only panic with a message it already has).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Invalid {
    pub(crate) field: &'static str,
    pub(crate) reason: &'static str,
    /// `invalid `field`: reason`, the panic message of `new`.
    pub(crate) message: &'static str,
}

impl From<Invalid> for ConfigError {
    fn from(e: Invalid) -> Self {
        ConfigError::new(e.field, e.reason)
    }
}

/// An [`Invalid`] for a literal field and reason.
macro_rules! invalid {
    ($field:literal, $reason:literal) => {
        Invalid {
            field: $field,
            reason: $reason,
            message: concat!("invalid `", $field, "`: ", $reason),
        }
    };
}

/// `?` for a `const fn`.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Err(e),
        }
    };
}
pub(crate) use tri;

/// The value of a `new` constructor, or its documented panic. With
/// `#[track_caller]` here and on `new`, the panic (and a constant's compile
/// error) points at the line that called `new`.
#[track_caller]
pub(crate) const fn or_panic<T: Copy>(checked: Result<T, Invalid>) -> T {
    match checked {
        Ok(v) => v,
        Err(e) => panic!("{}", e.message),
    }
}

/// The two ways a count (`limit`, `capacity`, `burst`) can be wrong.
macro_rules! count_errors {
    ($field:literal) => {
        [
            invalid!($field, "must be at least 1"),
            invalid!($field, "must be at most 2^40"),
        ]
    };
}

/// The three ways a window (`window`, `period`, ...) can be wrong.
macro_rules! window_errors {
    ($field:literal) => {
        [
            invalid!($field, "must be a whole number of milliseconds"),
            invalid!($field, "must be at least 1 ms"),
            invalid!($field, "must be at most 2^40 ms (about 34 years)"),
        ]
    };
}

/// The three ways a rate per second can be wrong.
macro_rules! rate_errors {
    ($field:literal) => {
        [
            invalid!($field, "must be a finite number above 0"),
            invalid!($field, "is too small: one unit would take over 34 years"),
            invalid!($field, "must be at most 2^40 per ms"),
        ]
    };
}

// The errors of every checked field, by name: each message is fixed at
// compile time.
pub(crate) const LIMIT: [Invalid; 2] = count_errors!("limit");
pub(crate) const CAPACITY: [Invalid; 2] = count_errors!("capacity");
pub(crate) const BURST: [Invalid; 2] = count_errors!("burst");
pub(crate) const WINDOW: [Invalid; 3] = window_errors!("window");
pub(crate) const PERIOD: [Invalid; 3] = window_errors!("period");
pub(crate) const COOL_DOWN: [Invalid; 3] = window_errors!("cool_down");
pub(crate) const LEASE: [Invalid; 3] = window_errors!("lease");
pub(crate) const REFILL_PER_SEC: [Invalid; 3] = rate_errors!("refill_per_sec");
pub(crate) const LEAK_PER_SEC: [Invalid; 3] = rate_errors!("leak_per_sec");
pub(crate) const FAILURES: Invalid = invalid!("failures", "must be at least 1");
/// A bucket's full refill or drain beyond 2^40 ms.
pub(crate) const LONG_REFILL: Invalid = invalid!(
    "capacity",
    "the time to refill or drain fully (1000 × capacity / rate ms) must be at most 2^40 ms"
);
pub(crate) const LONG_BURST: Invalid =
    invalid!("burst", "burst × period / limit must be at most 2^40 ms");
pub(crate) const LONG_LOG: Invalid = invalid!(
    "limit",
    "must be at most 2^16 for a sliding log (one entry per unit admitted): above, use a sliding window"
);
pub(crate) const WIDE_LOG: Invalid = invalid!(
    "limit",
    "limit × window (ms) must stay below 2^50 for a sliding log"
);

/// A count in 1..=2^40.
pub(crate) const fn count(n: u64, [zero, big]: [Invalid; 2]) -> Result<u64, Invalid> {
    if n == 0 {
        Err(zero)
    } else if n > MAX_LIMIT {
        Err(big)
    } else {
        Ok(n)
    }
}

/// A window in whole ms, 1..=2^40 ms.
pub(crate) const fn window(d: Duration, [ms, short, long]: [Invalid; 3]) -> Result<u64, Invalid> {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(ms);
    }
    let n = d.as_millis();
    if n == 0 {
        Err(short)
    } else if n > MAX_WINDOW_MS as u128 {
        Err(long)
    } else {
        Ok(n as u64)
    }
}

/// A rate per second at which one unit takes at most 2^40 ms and at least
/// 2^-40 ms.
pub(crate) const fn rate(r: f64, [nan, small, big]: [Invalid; 3]) -> Result<f64, Invalid> {
    // `!(r > 0.0)` is also true for NaN.
    if r.is_nan() || r.is_infinite() || r <= 0.0 {
        Err(nan)
    } else if r < 1000.0 / MAX_WINDOW_MS as f64 {
        Err(small)
    } else if r > MAX_LIMIT as f64 * 1000.0 {
        Err(big)
    } else {
        Ok(r)
    }
}

/// A schedule of `units` of `interval_ms` each that ends within 2^40 ms, so
/// that the time until it has drained stays below 2^53 in every sum.
pub(crate) const fn schedule(units: u64, interval_ms: f64, long: Invalid) -> Result<(), Invalid> {
    if units as f64 * interval_ms > MAX_WINDOW_MS as f64 {
        Err(long)
    } else {
        Ok(())
    }
}

/// `limit` per `window`, the parameters of every window algorithm: the
/// limit and the window in ms.
pub(crate) const fn per_window(limit: u64, window_: Duration) -> Result<(u64, u64), Invalid> {
    Ok((tri!(count(limit, LIMIT)), tri!(window(window_, WINDOW))))
}

/// `capacity` and a rate per second (whose errors are `rate_errors`), the
/// parameters of both buckets: a full refill or drain within 2^40 ms.
pub(crate) const fn bucket(
    capacity: u64,
    rate_per_sec: f64,
    rate_errors: [Invalid; 3],
) -> Result<(u64, f64), Invalid> {
    let capacity = tri!(count(capacity, CAPACITY));
    let rate_per_sec = tri!(rate(rate_per_sec, rate_errors));
    tri!(schedule(capacity, 1000.0 / rate_per_sec, LONG_REFILL));
    Ok((capacity, rate_per_sec))
}

/// The characters of limiter and limit names (`A-Z a-z 0-9 _ - .`): both
/// go into storage keys and header fields as they are.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATE: [Invalid; 3] = REFILL_PER_SEC;

    #[test]
    fn messages_name_the_field() {
        let e = count(0, LIMIT).unwrap_err();
        assert_eq!(e.message, "invalid `limit`: must be at least 1");
        assert_eq!(ConfigError::from(e).field(), "limit");
        assert!(count(MAX_LIMIT + 1, LIMIT).is_err());
        assert_eq!(count(MAX_LIMIT, LIMIT).unwrap(), MAX_LIMIT);
    }

    #[test]
    fn windows_are_whole_bounded_milliseconds() {
        assert!(window(Duration::from_micros(1_500), WINDOW).is_err());
        assert!(window(Duration::ZERO, WINDOW).is_err());
        assert!(window(Duration::from_millis(MAX_WINDOW_MS + 1), WINDOW).is_err());
        assert_eq!(window(Duration::from_secs(2), WINDOW).unwrap(), 2_000);
    }

    #[test]
    fn rates_are_finite_positive_and_bounded() {
        for r in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e-12, 1e16] {
            assert!(rate(r, RATE).is_err(), "{r}");
        }
        assert_eq!(rate(10.0, RATE).unwrap(), 10.0);
    }
}
