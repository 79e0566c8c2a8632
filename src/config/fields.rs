//! The structured form of a limit: a table of the algorithm's name and its
//! constructor's parameters. Each value that can be checked alone is
//! checked as it is read, so that a format that knows where each value is
//! (TOML, YAML, JSON) points at it; the checks that take two fields come
//! after the table.

use super::duration::DurationVisitor;
use super::rate::Kind;
use crate::algorithm::validate::{self as check, Invalid};
use crate::ConfigError;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use std::fmt;
use std::time::Duration;

/// Every field of every algorithm, for the message of a field no algorithm
/// has.
const ALL: &[&str] = &[
    "algorithm",
    "limit",
    "window",
    "period",
    "burst",
    "capacity",
    "refill_per_sec",
    "leak_per_sec",
    "jitter",
];

/// The fields of one table, each checked alone.
#[derive(Debug, Default)]
pub(crate) struct TableFields {
    pub(crate) algorithm: Option<Kind>,
    pub(crate) limit: Option<u64>,
    pub(crate) window: Option<Duration>,
    pub(crate) period: Option<Duration>,
    pub(crate) burst: Option<u64>,
    pub(crate) capacity: Option<u64>,
    pub(crate) refill_per_sec: Option<f64>,
    pub(crate) leak_per_sec: Option<f64>,
    /// Fixed and sliding windows: `jittered()` when true.
    pub(crate) jitter: Option<bool>,
    /// A limit of `Limits` only: in shadow mode when true.
    pub(crate) shadow: Option<bool>,
}

impl TableFields {
    /// Read a table's fields; `want` is the algorithm the caller expects
    /// (`None`: whichever the table names). A field that `want` does not
    /// have is refused at once, listing the ones it has.
    /// `shadow`: whether the table is a limit of `Limits`, which may
    /// say `shadow = true`.
    pub(crate) fn read<'de, A: MapAccess<'de>>(
        mut map: A,
        want: Option<Kind>,
        shadow: bool,
    ) -> Result<Self, A::Error> {
        let expected = want.map_or(ALL, Kind::fields);
        let mut f = TableFields::default();
        while let Some(key) = map.next_key::<String>()? {
            if shadow && key == "shadow" {
                once(&mut f.shadow, "shadow", map.next_value()?)?;
                continue;
            }
            if !expected.contains(&key.as_str()) {
                return Err(de::Error::unknown_field(&key, expected));
            }
            match key.as_str() {
                "algorithm" => once(&mut f.algorithm, "algorithm", map.next_value()?)?,
                "limit" => once(
                    &mut f.limit,
                    "limit",
                    map.next_value_seed(Count(check::LIMIT))?,
                )?,
                "burst" => once(
                    &mut f.burst,
                    "burst",
                    map.next_value_seed(Count(check::BURST))?,
                )?,
                "capacity" => once(
                    &mut f.capacity,
                    "capacity",
                    map.next_value_seed(Count(check::CAPACITY))?,
                )?,
                "window" => once(
                    &mut f.window,
                    "window",
                    map.next_value_seed(Window(check::WINDOW))?,
                )?,
                "period" => once(
                    &mut f.period,
                    "period",
                    map.next_value_seed(Window(check::PERIOD))?,
                )?,
                "refill_per_sec" => once(
                    &mut f.refill_per_sec,
                    "refill_per_sec",
                    map.next_value_seed(RateSeed(check::REFILL_PER_SEC))?,
                )?,
                "leak_per_sec" => once(
                    &mut f.leak_per_sec,
                    "leak_per_sec",
                    map.next_value_seed(RateSeed(check::LEAK_PER_SEC))?,
                )?,
                "jitter" => once(&mut f.jitter, "jitter", map.next_value()?)?,
                _ => {
                    return Err(de::Error::unknown_field(&key, expected));
                }
            }
        }
        Ok(f)
    }

    /// The algorithm of this table: the one it names, else `want`; an
    /// error when it names none and none is wanted, or another than
    /// `want`, or has a field the algorithm has not.
    pub(crate) fn kind<E: de::Error>(&self, want: Option<Kind>) -> Result<Kind, E> {
        let kind = match (self.algorithm, want) {
            (None, None) => return Err(E::missing_field("algorithm")),
            (named, want) => super::rate::kind_of(named, want, Kind::Gcra).map_err(E::custom)?,
        };
        let given = [
            ("limit", self.limit.is_some()),
            ("window", self.window.is_some()),
            ("period", self.period.is_some()),
            ("burst", self.burst.is_some()),
            ("capacity", self.capacity.is_some()),
            ("refill_per_sec", self.refill_per_sec.is_some()),
            ("leak_per_sec", self.leak_per_sec.is_some()),
            ("jitter", self.jitter.is_some()),
        ];
        for (field, is_given) in given {
            if is_given && !kind.fields().contains(&field) {
                return Err(E::unknown_field(field, kind.fields()));
            }
        }
        Ok(kind)
    }
}

/// The value of a field given once; twice is an error naming it.
fn once<T, E: de::Error>(slot: &mut Option<T>, field: &'static str, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(field));
    }
    *slot = Some(value);
    Ok(())
}

/// A present field, or the error of a missing one.
pub(crate) fn required<T, E: de::Error>(value: Option<T>, field: &'static str) -> Result<T, E> {
    value.ok_or_else(|| E::missing_field(field))
}

/// A configuration error as the format's error, where the format puts it.
pub(crate) fn refused<E: de::Error>(e: impl Into<ConfigError>) -> E {
    E::custom(e.into())
}

// Each check runs inside the value's visitor, where a format that tracks
// positions (serde_json) still knows where the value is.

/// A count (`limit`, `burst`, `capacity`), checked as its constructor does.
struct Count([Invalid; 2]);

impl<'de> DeserializeSeed<'de> for Count {
    type Value = u64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_u64(self)
    }
}

impl Visitor<'_> for Count {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<u64, E> {
        check::count(n, self.0).map_err(refused)
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<u64, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::invalid_value(de::Unexpected::Signed(n), &self)),
        }
    }
}

/// A window or period, checked as its constructor does.
pub(crate) struct Window(pub(crate) [Invalid; 3]);

impl<'de> DeserializeSeed<'de> for Window {
    type Value = Duration;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Duration, D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for Window {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        DurationVisitor.expecting(f)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        let window = DurationVisitor.visit_str(v)?;
        check::window(window, self.0).map_err(refused)?;
        Ok(window)
    }
}

/// A rate per second, checked as its constructor does.
struct RateSeed([Invalid; 3]);

impl<'de> DeserializeSeed<'de> for RateSeed {
    type Value = f64;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        d.deserialize_f64(self)
    }
}

impl Visitor<'_> for RateSeed {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number")
    }

    fn visit_f64<E: de::Error>(self, r: f64) -> Result<f64, E> {
        check::rate(r, self.0).map_err(refused)
    }

    // Whole numbers as doubles, as the constructor takes them (any valid
    // rate is far below 2^53).
    #[allow(clippy::cast_precision_loss)]
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<f64, E> {
        self.visit_f64(n as f64)
    }

    #[allow(clippy::cast_precision_loss)]
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<f64, E> {
        self.visit_f64(n as f64)
    }
}
