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
        $crate::algorithm::validate::Invalid {
            field: $field,
            reason: $reason,
            message: concat!("invalid `", $field, "`: ", $reason),
        }
    };
}
pub(crate) use invalid;

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

/// The value of a `new` constructor, or its documented panic.
macro_rules! or_panic {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => panic!("{}", e.message),
        }
    };
}
pub(crate) use or_panic;

/// The two ways a count (`limit`, `capacity`, `burst`) can be wrong.
macro_rules! count_errors {
    ($field:literal) => {
        [
            $crate::algorithm::validate::invalid!($field, "must be at least 1"),
            $crate::algorithm::validate::invalid!($field, "must be at most 2^40"),
        ]
    };
}
pub(crate) use count_errors;

/// The three ways a window (`window`, `period`) can be wrong.
macro_rules! window_errors {
    ($field:literal) => {
        [
            $crate::algorithm::validate::invalid!($field, "must be a whole number of milliseconds"),
            $crate::algorithm::validate::invalid!($field, "must be at least 1 ms"),
            $crate::algorithm::validate::invalid!(
                $field,
                "must be at most 2^40 ms (about 34 years)"
            ),
        ]
    };
}
pub(crate) use window_errors;

/// The three ways a rate per second can be wrong.
macro_rules! rate_errors {
    ($field:literal) => {
        [
            $crate::algorithm::validate::invalid!($field, "must be a finite number above 0"),
            $crate::algorithm::validate::invalid!(
                $field,
                "is too small: one unit would take over 34 years"
            ),
            $crate::algorithm::validate::invalid!($field, "must be at most 2^40 per ms"),
        ]
    };
}
pub(crate) use rate_errors;

/// The errors of the check named `count`, `window` or `rate`, for `field`.
macro_rules! errors {
    (count, $field:literal) => {
        $crate::algorithm::validate::count_errors!($field)
    };
    (window, $field:literal) => {
        $crate::algorithm::validate::window_errors!($field)
    };
    (rate, $field:literal) => {
        $crate::algorithm::validate::rate_errors!($field)
    };
}
pub(crate) use errors;

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

/// Declares one of the algorithm config types: the struct, a `const fn new`
/// that panics naming the field, a `try_new` that returns the error, and its
/// normalized [`Spec`](super::Spec).
macro_rules! config_type {
    (
        $(#[$meta:meta])*
        $name:ident { $a:ident: $a_ty:ty = $a_check:ident($a_field:literal),
                      $b:ident: $b_ty:ty = $b_check:ident($b_field:literal) $(,)? }
        new($a_arg:ident: $a_arg_ty:ty, $b_arg:ident: $b_arg_ty:ty) $new_doc:literal
        $(also $extra:expr;)?
        spec($this:ident) $spec:expr
    ) => {
        $(#[$meta])*
        pub struct $name {
            $a: $a_ty,
            $b: $b_ty,
        }

        impl $name {
            #[doc = $new_doc]
            ///
            /// A `const fn`: in a constant, an invalid value does not compile.
            ///
            /// # Panics
            /// When a value is invalid (see [`try_new`](Self::try_new)); the
            /// message names the field.
            pub const fn new($a_arg: $a_arg_ty, $b_arg: $b_arg_ty) -> Self {
                $crate::algorithm::validate::or_panic!(Self::checked($a_arg, $b_arg))
            }

            /// Like [`new`](Self::new), returning an error that names the
            /// invalid field instead of panicking.
            ///
            /// # Errors
            /// A [`ConfigError`](crate::ConfigError) naming the field that is
            /// out of bounds.
            pub fn try_new($a_arg: $a_arg_ty, $b_arg: $b_arg_ty) -> Result<Self, $crate::ConfigError> {
                Self::checked($a_arg, $b_arg).map_err($crate::ConfigError::from)
            }

            const fn checked(
                $a_arg: $a_arg_ty,
                $b_arg: $b_arg_ty,
            ) -> Result<Self, $crate::algorithm::validate::Invalid> {
                use $crate::algorithm::validate::{self as check, errors, tri};
                let $this = Self {
                    $a: tri!(check::$a_check($a_arg, errors!($a_check, $a_field))),
                    $b: tri!(check::$b_check($b_arg, errors!($b_check, $b_field))),
                };
                $(tri!(($extra)(&$this));)?
                Ok($this)
            }

            pub(super) fn to_spec(self) -> $crate::algorithm::Spec {
                let $this = self;
                $spec
            }
        }
    };
}
pub(crate) use config_type;

/// The window algorithms' config types: `limit` cost units per `window`.
macro_rules! window_types {
    ($($(#[$meta:meta])* $name:ident: $new_doc:literal $(, also $extra:expr)?;)*) => {$(
        $crate::algorithm::validate::config_type! {
            $(#[$meta])*
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
            $name { limit: u64 = count("limit"), window_ms: u64 = window("window") }
            new(limit: u64, window: std::time::Duration) $new_doc
            $(also $extra;)?
            spec(t) $crate::algorithm::Spec::$name { limit: t.limit, window_ms: t.window_ms }
        }
    )*};
}
pub(crate) use window_types;

/// The bucket algorithms' config types: `capacity` units, and a rate per
/// second (its argument `$rate`, its field name `$field`).
macro_rules! bucket_types {
    ($($(#[$meta:meta])* $name:ident($rate:ident = $field:literal): $new_doc:literal;)*) => {$(
        $crate::algorithm::validate::config_type! {
            $(#[$meta])*
            #[derive(Debug, Clone, Copy, PartialEq)]
            $name { capacity: u64 = count("capacity"), rate: f64 = rate($field) }
            new(capacity: u64, $rate: f64) $new_doc
            also Self::refill_in_bounds;
            spec(t) $crate::algorithm::Spec::$name { capacity: t.capacity, rate: t.rate }
        }

        impl $name {
            /// The time to refill (or drain) fully, at most 2^40 ms.
            const fn refill_in_bounds(t: &Self) -> Result<(), $crate::algorithm::validate::Invalid> {
                $crate::algorithm::validate::schedule(t.capacity, 1000.0 / t.rate, $crate::algorithm::validate::invalid!(
                    "capacity",
                    "the time to refill or drain fully (1000 × capacity / rate ms) must be at most 2^40 ms"
                ))
            }
        }
    )*};
}
pub(crate) use bucket_types;

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: [Invalid; 2] = count_errors!("limit");
    const WINDOW: [Invalid; 3] = window_errors!("window");
    const RATE: [Invalid; 3] = rate_errors!("rate");

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
