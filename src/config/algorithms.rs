//! `Deserialize` and `Serialize` for the six algorithms and
//! [`AnyAlgorithm`]: a short form or a table in, a table out.

use super::duration::Human;
use super::fields::{refused, required, TableFields};
use super::rate::{self, Kind, Rate};
use crate::algorithm::sealed::One;
use crate::algorithm::{
    AnyAlgorithm, FixedWindow, Gcra, LeakyBucket, SlidingLog, SlidingWindow, Spec, TokenBucket,
};
use crate::ConfigError;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{self, SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Read a limit in either form; `want` is the algorithm the caller's type
/// is (`None` for [`AnyAlgorithm`]: the one the text names, GCRA for a
/// short form that names none).
pub(crate) fn read<'de, D: Deserializer<'de>>(
    d: D,
    want: Option<Kind>,
) -> Result<AnyAlgorithm, D::Error> {
    let (algorithm, _) = d.deserialize_any(LimitVisitor {
        want,
        shadow: false,
    })?;
    Ok(algorithm)
}

/// Read one limit of a `Limits`: either form, the table with an optional
/// `shadow = true`. Returns the limit and whether it is in shadow mode.
pub(crate) fn read_in_limits<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<(AnyAlgorithm, bool), D::Error> {
    d.deserialize_any(LimitVisitor {
        want: None,
        shadow: true,
    })
}

struct LimitVisitor {
    want: Option<Kind>,
    /// A limit of `Limits`: its table may say `shadow = true`.
    shadow: bool,
}

impl<'de> Visitor<'de> for LimitVisitor {
    type Value = (AnyAlgorithm, bool);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(rate::EXPECTED)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        let rate = rate::parse(v).map_err(E::custom)?;
        Ok((from_rate(rate, self.want).map_err(refused)?, false))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let f = TableFields::read(map, self.want, self.shadow)?;
        Ok((from_fields(&f, self.want)?, f.shadow == Some(true)))
    }
}

/// The algorithm a short form says: `count` per `per` (for a bucket, the
/// refill or leak rate, its capacity the burst, else `count`).
fn from_rate(r: Rate, want: Option<Kind>) -> Result<AnyAlgorithm, ConfigError> {
    let kind = rate::kind_of(r.algorithm, want, Kind::Gcra)?;
    // A bucket's rate, checked by its constructor: a count too large to be
    // exact as a double is far above any valid rate.
    #[allow(clippy::cast_precision_loss)]
    let per_sec = r.count as f64 / r.per.as_secs_f64();
    let no_burst = || match r.burst {
        Some(_) => Err(ConfigError::new(
            "burst",
            format!(
                "a {} has no burst (a token bucket, leaky bucket or GCRA has one)",
                kind.as_str()
            ),
        )),
        None => Ok(()),
    };
    Ok(match kind {
        Kind::FixedWindow => {
            no_burst()?;
            FixedWindow::try_new(r.count, r.per)?.into()
        }
        Kind::SlidingLog => {
            no_burst()?;
            SlidingLog::try_new(r.count, r.per)?.into()
        }
        Kind::SlidingWindow => {
            no_burst()?;
            SlidingWindow::try_new(r.count, r.per)?.into()
        }
        Kind::TokenBucket => TokenBucket::try_new(r.burst.unwrap_or(r.count), per_sec)?.into(),
        Kind::LeakyBucket => LeakyBucket::try_new(r.burst.unwrap_or(r.count), per_sec)?.into(),
        Kind::Gcra => {
            let gcra = Gcra::try_new(r.count, r.per)?;
            match r.burst {
                Some(n) => gcra.try_burst(n)?.into(),
                None => gcra.into(),
            }
        }
    })
}

/// The algorithm a table says, through its constructor (`jitter = true`:
/// `.jittered()` on a fixed or sliding window).
fn from_fields<E: de::Error>(f: &TableFields, want: Option<Kind>) -> Result<AnyAlgorithm, E> {
    let kind = f.kind(want)?;
    let limit = || required(f.limit, "limit");
    let window = || required(f.window, "window");
    let capacity = || required(f.capacity, "capacity");
    let jitter = f.jitter == Some(true);
    Ok(match kind {
        Kind::FixedWindow => {
            let w = FixedWindow::try_new(limit()?, window()?).map_err(refused)?;
            if jitter { w.jittered() } else { w }.into()
        }
        Kind::SlidingLog => SlidingLog::try_new(limit()?, window()?)
            .map_err(refused)?
            .into(),
        Kind::SlidingWindow => {
            let w = SlidingWindow::try_new(limit()?, window()?).map_err(refused)?;
            if jitter { w.jittered() } else { w }.into()
        }
        Kind::TokenBucket => {
            TokenBucket::try_new(capacity()?, required(f.refill_per_sec, "refill_per_sec")?)
                .map_err(refused)?
                .into()
        }
        Kind::LeakyBucket => {
            LeakyBucket::try_new(capacity()?, required(f.leak_per_sec, "leak_per_sec")?)
                .map_err(refused)?
                .into()
        }
        Kind::Gcra => {
            let gcra = Gcra::try_new(limit()?, required(f.period, "period")?).map_err(refused)?;
            match f.burst {
                Some(n) => gcra.try_burst(n).map_err(refused)?.into(),
                None => gcra.into(),
            }
        }
    })
}

/// Write `spec` as the table of its algorithm, which reads back the same.
pub(crate) fn write<S: Serializer>(spec: Spec, s: S) -> Result<S::Ok, S::Error> {
    write_limit(spec, false, s)
}

/// [`write`], with `shadow = true` for a limit of `Limits` in shadow mode.
pub(crate) fn write_limit<S: Serializer>(
    spec: Spec,
    shadow: bool,
    s: S,
) -> Result<S::Ok, S::Error> {
    let ms = |n: u64| Human(Duration::from_millis(n));
    let mut m = s.serialize_map(None)?;
    match spec {
        Spec::FixedWindow {
            limit,
            window_ms,
            jittered,
        }
        | Spec::SlidingWindow {
            limit,
            window_ms,
            jittered,
        } => {
            let kind = match spec {
                Spec::FixedWindow { .. } => Kind::FixedWindow,
                _ => Kind::SlidingWindow,
            };
            m.serialize_entry("algorithm", &kind)?;
            m.serialize_entry("limit", &limit)?;
            m.serialize_entry("window", &ms(window_ms))?;
            if jittered {
                m.serialize_entry("jitter", &true)?;
            }
        }
        Spec::SlidingLog { limit, window_ms } => {
            m.serialize_entry("algorithm", &Kind::SlidingLog)?;
            m.serialize_entry("limit", &limit)?;
            m.serialize_entry("window", &ms(window_ms))?;
        }
        Spec::TokenBucket { capacity, rate, .. } => {
            m.serialize_entry("algorithm", &Kind::TokenBucket)?;
            m.serialize_entry("capacity", &capacity)?;
            m.serialize_entry("refill_per_sec", &rate)?;
        }
        Spec::LeakyBucket { capacity, rate, .. } => {
            m.serialize_entry("algorithm", &Kind::LeakyBucket)?;
            m.serialize_entry("capacity", &capacity)?;
            m.serialize_entry("leak_per_sec", &rate)?;
        }
        Spec::Gcra {
            limit,
            period_ms,
            burst,
            ..
        } => {
            m.serialize_entry("algorithm", &Kind::Gcra)?;
            m.serialize_entry("limit", &limit)?;
            m.serialize_entry("period", &ms(period_ms))?;
            m.serialize_entry("burst", &burst)?;
        }
        Spec::Concurrency { .. } => {
            return Err(ser::Error::custom(
                "a concurrency limit is not an algorithm of `floodgate::algorithm`",
            ))
        }
    }
    if shadow {
        m.serialize_entry("shadow", &true)?;
    }
    m.end()
}

/// The algorithm of type `want` in `any`, which `read` made for `want`.
fn expect<T, E: de::Error>(any: AnyAlgorithm, pick: fn(AnyAlgorithm) -> Option<T>) -> Result<T, E> {
    pick(any).ok_or_else(|| E::custom("the limit read is of another algorithm"))
}

impl<'de> Deserialize<'de> for AnyAlgorithm {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        read(d, None)
    }
}

impl Serialize for AnyAlgorithm {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.spec(), s)
    }
}

impl<'de> Deserialize<'de> for FixedWindow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        expect(read(d, Some(Kind::FixedWindow))?, |a| match a {
            AnyAlgorithm::FixedWindow(a) => Some(a),
            _ => None,
        })
    }
}

impl Serialize for FixedWindow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.spec(), s)
    }
}

impl<'de> Deserialize<'de> for SlidingLog {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        expect(read(d, Some(Kind::SlidingLog))?, |a| match a {
            AnyAlgorithm::SlidingLog(a) => Some(a),
            _ => None,
        })
    }
}

impl Serialize for SlidingLog {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.spec(), s)
    }
}

impl<'de> Deserialize<'de> for SlidingWindow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        expect(read(d, Some(Kind::SlidingWindow))?, |a| match a {
            AnyAlgorithm::SlidingWindow(a) => Some(a),
            _ => None,
        })
    }
}

impl Serialize for SlidingWindow {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.spec(), s)
    }
}

impl<'de> Deserialize<'de> for TokenBucket {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        expect(read(d, Some(Kind::TokenBucket))?, |a| match a {
            AnyAlgorithm::TokenBucket(a) => Some(a),
            _ => None,
        })
    }
}

impl Serialize for TokenBucket {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.spec(), s)
    }
}

impl<'de> Deserialize<'de> for LeakyBucket {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        expect(read(d, Some(Kind::LeakyBucket))?, |a| match a {
            AnyAlgorithm::LeakyBucket(a) => Some(a),
            _ => None,
        })
    }
}

impl Serialize for LeakyBucket {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.spec(), s)
    }
}

impl<'de> Deserialize<'de> for Gcra {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        expect(read(d, Some(Kind::Gcra))?, |a| match a {
            AnyAlgorithm::Gcra(a) => Some(a),
            _ => None,
        })
    }
}

impl Serialize for Gcra {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.spec(), s)
    }
}
