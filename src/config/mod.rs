//! Limits from configuration files (feature `serde`, off by default).
//!
//! With the feature on, every algorithm, [`AnyAlgorithm`], [`Limits`],
//! [`HotKeys`](crate::HotKeys), [`FailurePolicy`](crate::failure::FailurePolicy)
//! and [`CircuitBreaker`](crate::failure::CircuitBreaker) implement serde's
//! `Deserialize` and `Serialize`, in the forms people write in TOML, YAML or
//! JSON. The guide's page
//! [Limits as configuration](crate::guide::limits_as_configuration) shows a
//! whole service's file, with environment overrides.
//!
//! # A limit
//!
//! **Short form**: `"<count>/<period>"`, a burst after it, the algorithm's
//! name before it: `"100/min"`, `"10/s burst 20"`, `"100/30s"`,
//! `"sliding_window 100/min"`. The period is a unit (`s`, `sec`, `second`,
//! `min`, `minute`, `h`, `hour`, `d`, `day`) or a duration (`30s`,
//! `1h30m`). Read as each algorithm:
//!
//! | algorithm | `"N/P"` | `"N/P burst B"` |
//! |---|---|---|
//! | [`FixedWindow`], [`SlidingLog`], [`SlidingWindow`] | `limit` N per `window` P | refused, naming `burst` |
//! | [`Gcra`] | `limit` N per `period` P | `try_burst(B)` |
//! | [`TokenBucket`], [`LeakyBucket`] | `capacity` N, refilled (leaked) at N / P per second | `capacity` B |
//!
//! An [`AnyAlgorithm`] (or a limit of [`Limits`]) is the algorithm its short
//! form names, and a [`Gcra`] when it names none.
//!
//! **Table**: the algorithm's name in `algorithm` and its constructor's
//! parameters, durations as strings:
//!
//! | `algorithm` | fields |
//! |---|---|
//! | `"fixed_window"`, `"sliding_window"` | `limit`, `window`, `jitter` (optional: `false`; `true` is [`FixedWindow::jittered`](crate::algorithm::FixedWindow::jittered)) |
//! | `"sliding_log"` | `limit`, `window` |
//! | `"token_bucket"` | `capacity`, `refill_per_sec` |
//! | `"leaky_bucket"` | `capacity`, `leak_per_sec` |
//! | `"gcra"` | `limit`, `period`, `burst` (optional: `limit`) |
//!
//! `algorithm` is required for an [`AnyAlgorithm`], optional for a given
//! type (and then must be its own). A field the algorithm does not have is
//! refused. Writing always gives the table, which reads back the same.
//!
//! **Durations** everywhere (`window`, `period`, `cool_down`) are strings
//! with a unit: `"250ms"`, `"2s"`, `"1h30m"` ([`duration`], which also
//! reads your own `Duration` fields). A bare number is refused.
//!
//! # Refused as in code
//!
//! A value that `try_new`, `try_with`, `try_burst` or `build` refuses is
//! refused when it is read, with the same message naming the field (``invalid
//! `window`: must be at least 1 ms``); the format adds where it is (TOML,
//! YAML and JSON give the line and column):
//!
//! ```
//! use floodgate::algorithm::{AnyAlgorithm, Gcra, Limits, SlidingWindow};
//! use std::time::Duration;
//!
//! let limits: Limits = toml::from_str(r#"
//!     second = "10/s burst 20"
//!     hour = { algorithm = "sliding_window", limit = 1000, window = "1h" }
//! "#).unwrap();
//! let expected = Limits::new("second", Gcra::new(10, Duration::from_secs(1)).try_burst(20).unwrap())
//!     .try_with("hour", SlidingWindow::new(1_000, Duration::from_secs(3_600)))
//!     .unwrap();
//! assert_eq!(limits, expected);
//!
//! let e = toml::from_str::<Limits>(r#"
//!     second = "10/s"
//!     hour = { algorithm = "sliding_window", limit = 1000, window = "0s" }
//! "#).unwrap_err();
//! assert!(e.to_string().contains("invalid `window`: must be at least 1 ms"));
//! assert!(e.to_string().contains("line 3"));
//!
//! let e = serde_json::from_str::<AnyAlgorithm>(r#"{"algorithm": "gcra", "limit": 10, "per": "1s"}"#);
//! assert!(e.unwrap_err().to_string().starts_with("unknown field `per`, expected one of"));
//! ```
//!
//! # The other settings
//!
//! | type | written as |
//! |---|---|
//! | [`Limits`] | a table of limits by name, in the order written: `{ second = "10/s", hour = "1000/h" }` |
//! | [`HotKeys`](crate::HotKeys) | `{ servers = 8, threshold = 200, max_keys = 10000 }` (`threshold`, `max_keys` optional) |
//! | [`FailurePolicy`](crate::failure::FailurePolicy) | `"fail_open"`, `"fail_closed"` or `"return_error"` (a fallback is a limiter: set it in code) |
//! | [`CircuitBreaker`](crate::failure::CircuitBreaker) | `{ failures = 5, cool_down = "500ms" }` (each optional), or `{ enabled = false }` |
//!
//! [`AnyAlgorithm`]: crate::algorithm::AnyAlgorithm
//! [`Limits`]: crate::algorithm::Limits
//! [`FixedWindow`]: crate::algorithm::FixedWindow
//! [`SlidingLog`]: crate::algorithm::SlidingLog
//! [`SlidingWindow`]: crate::algorithm::SlidingWindow
//! [`TokenBucket`]: crate::algorithm::TokenBucket
//! [`LeakyBucket`]: crate::algorithm::LeakyBucket
//! [`Gcra`]: crate::algorithm::Gcra

mod algorithms;
pub mod duration;
mod fields;
mod limits;
mod rate;
mod settings;
