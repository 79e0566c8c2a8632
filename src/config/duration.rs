//! Durations as people write them: `"250ms"`, `"2s"`, `"1h30m"`, `"1 day"`.
//!
//! Read by [`humantime`](https://docs.rs/humantime) (units `ns`, `us`, `ms`,
//! `s`/`sec`/`second`, `m`/`min`/`minute`, `h`/`hour`, `d`/`day`, `w`/`week`,
//! and plurals; parts may be separated by spaces), written back in the
//! largest units that are exact (`"1h30m"`, `"250ms"`). A bare number is
//! refused: `60` could be seconds or milliseconds.
//!
//! For a [`Duration`] field of your own configuration, with the same forms:
//!
//! ```
//! use serde::Deserialize;
//! use std::time::Duration;
//!
//! #[derive(Deserialize)]
//! struct Settings {
//!     #[serde(with = "floodgate::config::duration")]
//!     timeout: Duration,
//! }
//!
//! let s: Settings = toml::from_str(r#"timeout = "150ms""#).unwrap();
//! assert_eq!(s.timeout, Duration::from_millis(150));
//! assert!(toml::from_str::<Settings>("timeout = 150").is_err());
//! ```

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;
use std::fmt::{self, Write};
use std::time::Duration;

/// What a duration looks like, for error messages.
pub(crate) const EXPECTED: &str =
    "a duration with its unit, such as \"250ms\", \"2s\" or \"1h30m\"";

/// `d` read as a duration string.
///
/// # Errors
/// The deserializer's error when `d` holds no string, or a string that is
/// not a duration.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_str(DurationVisitor)
}

/// `duration` written as a string in the largest units that are exact:
/// `"1h30m"`, `"250ms"`, `"1d"`.
///
/// # Errors
/// The serializer's own, if it cannot write a string.
pub fn serialize<S: Serializer>(duration: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format(*duration))
}

/// `text` as a duration, or a message saying why not.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("invalid duration \"{text}\": {e}; expected {EXPECTED}"))
}

/// `d` in the largest units that are exact, biggest first: `1h30m`,
/// `250ms`, `0s` for zero. [`parse`] reads it back to the same duration.
pub(crate) fn format(d: Duration) -> String {
    const UNITS: [(u128, &str); 7] = [
        (86_400_000_000_000, "d"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    let mut left = d.as_nanos();
    if left == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (size, unit) in UNITS {
        if left >= size {
            let _ = write!(out, "{}{unit}", left / size);
            left %= size;
        }
    }
    out
}

/// A duration read from a string.
pub(crate) struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(EXPECTED)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse(v).map_err(E::custom)
    }
}

/// A [`Duration`] field of the crate's own forms, read and written as above.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Human(pub(crate) Duration);

impl<'de> serde::Deserialize<'de> for Human {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        deserialize(d).map(Human)
    }
}

impl serde::Serialize for Human {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize(&self.0, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_forms_read_back() {
        for (text, d) in [
            ("250ms", Duration::from_millis(250)),
            ("2s", Duration::from_secs(2)),
            ("1h30m", Duration::from_secs(5_400)),
            ("1d", Duration::from_secs(86_400)),
            ("1m1s1ms1us1ns", Duration::new(61, 1_001_001)),
        ] {
            assert_eq!(format(d), text);
            assert_eq!(parse(text), Ok(d));
        }
        assert_eq!(parse("1 hour 30 minutes"), Ok(Duration::from_secs(5_400)));
        assert_eq!(format(Duration::ZERO), "0s");
        assert!(parse("60").unwrap_err().contains("\"60\""));
    }
}
