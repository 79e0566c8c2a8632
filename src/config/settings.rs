//! `Deserialize` and `Serialize` for the limiter's other settings that a
//! file gives: [`HotKeys`], [`FailurePolicy`] and [`CircuitBreaker`].

use super::duration::Human;
use super::fields::{refused, Window};
use crate::algorithm::validate::{COOL_DOWN, FAILURES};
use crate::failure::{CircuitBreaker, FailurePolicy, DEFAULT_COOL_DOWN, DEFAULT_FAILURES};
use crate::{ConfigError, HotKeys};
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{self, SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

/// `HotKeys` as written: `{ servers = 8, threshold = 200, max_keys = 10000 }`,
/// `threshold` and `max_keys` optional (100 and 10 000).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HotKeysFields {
    #[serde(deserialize_with = "at_least_one")]
    servers: u32,
    #[serde(default, deserialize_with = "some_at_least_one")]
    threshold: Option<u32>,
    #[serde(default, deserialize_with = "some_at_least_one")]
    max_keys: Option<usize>,
}

/// A hot-key setting: 0 is refused as `build` refuses it.
fn at_least_one<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    whole(d, HotKeys::zero())
}

/// A whole number of at least 1 that fits a `T`; 0 is refused with `zero`.
fn whole<'de, D, T>(d: D, zero: ConfigError) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    let n = d.deserialize_u64(AtLeastOne(zero))?;
    T::try_from(n)
        .map_err(|_| de::Error::invalid_value(de::Unexpected::Unsigned(n), &"a smaller number"))
}

fn some_at_least_one<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    at_least_one(d).map(Some)
}

/// A whole number of at least 1; 0 is refused with `zero`, in the
/// value's visitor (where the format knows the value's place).
struct AtLeastOne(ConfigError);

impl Visitor<'_> for AtLeastOne {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number, at least 1")
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<u64, E> {
        match n {
            0 => Err(refused(self.0)),
            n => Ok(n),
        }
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<u64, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::invalid_value(de::Unexpected::Signed(n), &self)),
        }
    }
}

/// A settings table read with its checks inside the map's visitor, so that
/// a check of two fields is reported where the table is.
struct Checked<T>(PhantomData<T>);

/// The fields of a settings table, and what they make once checked.
trait Check<'de>: Deserialize<'de> {
    type Output;
    fn check<E: de::Error>(self) -> Result<Self::Output, E>;
}

impl<'de, T: Check<'de>> Visitor<'de> for Checked<T> {
    type Value = T::Output;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T::Output, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map))?.check()
    }
}

impl<'de> Deserialize<'de> for HotKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(Checked(PhantomData::<HotKeysFields>))
    }
}

impl Check<'_> for HotKeysFields {
    type Output = HotKeys;

    fn check<E: de::Error>(self) -> Result<HotKeys, E> {
        let mut hot = HotKeys::new(self.servers);
        if let Some(n) = self.threshold {
            hot = hot.threshold(n);
        }
        if let Some(n) = self.max_keys {
            hot = hot.max_keys(n);
        }
        Ok(hot)
    }
}

impl Serialize for HotKeys {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (servers, threshold, max_keys) = self.settings();
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("servers", &servers)?;
        m.serialize_entry("threshold", &threshold)?;
        m.serialize_entry("max_keys", &max_keys)?;
        m.end()
    }
}

/// The policies a file can name (a fallback is a limiter, built in code).
const POLICIES: &[&str] = &["fail_open", "fail_closed", "return_error"];

impl<'de> Deserialize<'de> for FailurePolicy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(PolicyVisitor)
    }
}

struct PolicyVisitor;

impl Visitor<'_> for PolicyVisitor {
    type Value = FailurePolicy;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("one of \"fail_open\", \"fail_closed\" or \"return_error\"")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<FailurePolicy, E> {
        match v {
            "fail_open" => Ok(FailurePolicy::FailOpen),
            "fail_closed" => Ok(FailurePolicy::FailClosed),
            "return_error" => Ok(FailurePolicy::ReturnError),
            "fallback" => Err(refused(ConfigError::new(
                "on_store_failure",
                "a fallback is a limiter, set in code: \
                 `.on_store_failure(FailurePolicy::fallback(limiter))`",
            ))),
            _ => Err(E::unknown_variant(v, POLICIES)),
        }
    }
}

/// Written as its name (`"fail_open"`, ...); a fallback cannot be written.
impl Serialize for FailurePolicy {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FailurePolicy::Fallback(_) => Err(ser::Error::custom(
                "a fallback policy is a limiter and cannot be written as configuration",
            )),
            policy => s.serialize_str(policy.name()),
        }
    }
}

/// `CircuitBreaker` as written: `{ failures = 5, cool_down = "500ms" }`
/// (each optional, the default otherwise), or `{ enabled = false }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BreakerFields {
    #[serde(default, deserialize_with = "failures")]
    failures: Option<u32>,
    #[serde(default, deserialize_with = "cool_down")]
    cool_down: Option<Duration>,
    enabled: Option<bool>,
}

fn failures<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    whole(d, FAILURES.into()).map(Some)
}

fn cool_down<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    d.deserialize_str(Window(COOL_DOWN)).map(Some)
}

impl<'de> Deserialize<'de> for CircuitBreaker {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(Checked(PhantomData::<BreakerFields>))
    }
}

impl Check<'_> for BreakerFields {
    type Output = CircuitBreaker;

    fn check<E: de::Error>(self) -> Result<CircuitBreaker, E> {
        if self.enabled == Some(false) {
            if self.failures.is_some() || self.cool_down.is_some() {
                return Err(refused(ConfigError::new(
                    "enabled",
                    "a disabled circuit breaker takes no `failures` or `cool_down`",
                )));
            }
            return Ok(CircuitBreaker::disabled());
        }
        CircuitBreaker::try_new(
            self.failures.unwrap_or(DEFAULT_FAILURES),
            self.cool_down.unwrap_or(DEFAULT_COOL_DOWN),
        )
        .map_err(refused)
    }
}

impl Serialize for CircuitBreaker {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if self.is_enabled() {
            m.serialize_entry("failures", &self.failures())?;
            m.serialize_entry("cool_down", &Human(self.cool_down()))?;
        } else {
            m.serialize_entry("enabled", &false)?;
        }
        m.end()
    }
}
