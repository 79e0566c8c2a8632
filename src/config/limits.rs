//! `Deserialize` and `Serialize` for [`Limits`]: a table of limits by name,
//! each in either form of an [`AnyAlgorithm`].

use super::algorithms::write;
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
            let algorithm: AnyAlgorithm = map.next_value()?;
            limits = Some(
                match limits {
                    None => Limits::try_new(&name, algorithm),
                    Some(limits) => limits.try_with(&name, algorithm),
                }
                .map_err(refused::<A::Error>)?,
            );
        }
        limits.ok_or_else(|| {
            refused(ConfigError::new(
                "limits",
                "at least one limit, such as { second = \"10/s\" }",
            ))
        })
    }
}

impl Serialize for Limits {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let parts = self.parts();
        let mut m = s.serialize_map(Some(parts.len()))?;
        for (name, spec) in parts {
            m.serialize_entry(name.as_deref().unwrap_or_default(), &Table(spec))?;
        }
        m.end()
    }
}

/// One limit of a `Limits`, written as its algorithm's table.
struct Table(Spec);

impl Serialize for Table {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        write(self.0, s)
    }
}
