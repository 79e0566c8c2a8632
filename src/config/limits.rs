//! `Deserialize` and `Serialize` for [`Limits`]: a table of limits by name,
//! each in either form of an [`AnyAlgorithm`].

use super::algorithms::{read_in_limits, write_limit};
use super::fields::refused;
use crate::algorithm::sealed::Sealed;
use crate::algorithm::{AnyAlgorithm, Limits, Spec};
use crate::ConfigError;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

impl<'de> Deserialize<'de> for Limits {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(LimitsVisitor)
    }
}

struct LimitsVisitor;

impl<'de> Visitor<'de> for LimitsVisitor {
    type Value = Limits;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of limits by name, such as { second = \"10/s\", hour = \"1000/h\" }")
    }

    /// In the order written (a format that keeps it), each added as
    /// [`Limits::try_with`] adds it: a name used twice, or more than
    /// [`MAX_LIMITS`](crate::algorithm::MAX_LIMITS), is refused.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Limits, A::Error> {
        let mut limits: Option<Limits> = None;
        while let Some(name) = map.next_key::<String>()? {
            let LimitEntry(algorithm, shadow) = map.next_value()?;
            let added = match limits {
                None => Limits::try_new(&name, algorithm),
                Some(limits) => limits.try_with(&name, algorithm),
            };
            let added = if shadow {
                added.and_then(|l| l.shadow(&name))
            } else {
                added
            };
            limits = Some(added.map_err(refused::<A::Error>)?);
        }
        limits.ok_or_else(|| {
            refused(ConfigError::new(
                "limits",
                "at least one limit, such as { second = \"10/s\" }",
            ))
        })
    }
}

/// One limit of a `Limits` read: the limit, and whether its table said
/// `shadow = true`.
struct LimitEntry(AnyAlgorithm, bool);

impl<'de> Deserialize<'de> for LimitEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (algorithm, shadow) = read_in_limits(d)?;
        Ok(LimitEntry(algorithm, shadow))
    }
}

impl Serialize for Limits {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let parts = self.parts();
        let mut m = s.serialize_map(Some(parts.len()))?;
        for (name, spec) in parts {
            let name = name.as_deref().unwrap_or_default();
            let shadow = self.is_shadowed(name);
            m.serialize_entry(name, &LimitTable(spec, shadow))?;
        }
        m.end()
    }
}

/// One limit of a `Limits`, written as its algorithm's table (with
/// `shadow = true` in shadow mode).
struct LimitTable(Spec, bool);

impl Serialize for LimitTable {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write_limit(self.0, self.1, s)
    }
}
