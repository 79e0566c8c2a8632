//! Shared checks for algorithm parameters. Bounds keep every number the Lua
//! scripts compute below 2^53, where doubles are exact.

use crate::ConfigError;
use std::time::Duration;

/// Largest limit, capacity or burst.
pub(crate) const MAX_LIMIT: u64 = 1 << 40;
/// Longest window or period: about 34 years, in ms.
pub(crate) const MAX_WINDOW_MS: u64 = 1 << 40;

pub(crate) fn limit(field: &'static str, n: u64) -> Result<u64, ConfigError> {
    if n == 0 {
        return Err(ConfigError::new(field, "must be at least 1"));
    }
    if n > MAX_LIMIT {
        return Err(ConfigError::new(
            field,
            format!("must be at most {MAX_LIMIT}"),
        ));
    }
    Ok(n)
}

pub(crate) fn window(field: &'static str, d: Duration) -> Result<u64, ConfigError> {
    if !d.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(ConfigError::new(
            field,
            "must be a whole number of milliseconds",
        ));
    }
    let ms = d.as_millis();
    if ms == 0 {
        return Err(ConfigError::new(field, "must be at least 1 ms"));
    }
    if ms > MAX_WINDOW_MS as u128 {
        return Err(ConfigError::new(
            field,
            "must be at most 2^40 ms (about 34 years)",
        ));
    }
    Ok(ms as u64)
}

pub(crate) fn rate(field: &'static str, r: f64) -> Result<f64, ConfigError> {
    if !r.is_finite() || r <= 0.0 {
        return Err(ConfigError::new(
            field,
            format!("must be a finite number above 0, got {r}"),
        ));
    }
    // Below this a single token takes longer to refill than MAX_WINDOW_MS.
    if r < 1000.0 / MAX_WINDOW_MS as f64 {
        return Err(ConfigError::new(
            field,
            "is too small: one unit would take over 34 years",
        ));
    }
    if r > MAX_LIMIT as f64 * 1000.0 {
        return Err(ConfigError::new(field, "is too large"));
    }
    Ok(r)
}

pub(crate) fn or_panic<T>(r: Result<T, ConfigError>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{e}"),
    }
}
