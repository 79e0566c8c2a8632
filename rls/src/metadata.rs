//! Metadata for Envoy: a descriptor's `metadata:` map in the configuration,
//! and the dynamic metadata an answer carries when the service is asked to
//! (`--response-dynamic-metadata`, envoyproxy/ratelimit's
//! `RESPONSE_DYNAMIC_METADATA`), which Envoy's `ratelimit` filter puts under
//! its namespace for logs and later filters to read. The fields are
//! envoyproxy/ratelimit's:
//!
//! ```text
//! domain: "edge"
//! descriptors: [ { entries: ["path=/upload"], limit: "requests_per_unit:5 unit:SECOND",
//!                  hitsAddend: 2 } ]         # limit and hitsAddend when the request has them
//! hitsAddend: 3                              # when the request sets it
//! metadata: { ... }                          # the descriptors' metadata, merged
//! ```
//!
//! `metadata` merges the `metadata:` of the rules of the descriptors whose
//! status is not `OVER_LIMIT` (one in shadow mode over its limit is `OK`;
//! an unlimited descriptor has none): maps are merged key by key, and
//! otherwise the first descriptor's value stays.

use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::{value::Kind, ListValue, Struct, Value};

use crate::slots::DescriptorLimit;

/// A descriptor's `metadata:` as Envoy gets it: a map of any YAML values
/// (numbers become doubles, as in every protobuf `Struct`; a number or a
/// boolean as a key, its text).
pub(crate) fn from_yaml(yaml: serde_yaml::Value) -> Result<Struct, String> {
    match value(yaml)?.kind {
        Some(Kind::StructValue(map)) => Ok(map),
        _ => Err("metadata must be a map".into()),
    }
}

fn value(yaml: serde_yaml::Value) -> Result<Value, String> {
    use serde_yaml::Value as Yaml;
    let kind = match yaml {
        Yaml::Null => Kind::NullValue(0),
        Yaml::Bool(b) => Kind::BoolValue(b),
        Yaml::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(f64::NAN)),
        Yaml::String(s) => Kind::StringValue(s),
        Yaml::Sequence(items) => Kind::ListValue(ListValue {
            values: items.into_iter().map(value).collect::<Result<_, _>>()?,
        }),
        Yaml::Mapping(map) => {
            let mut fields = std::collections::HashMap::with_capacity(map.len());
            for (k, v) in map {
                // A number or a boolean as a key is its text, as
                // envoyproxy/ratelimit reads it.
                let k = match k {
                    Yaml::String(k) => k,
                    Yaml::Number(n) => n.to_string(),
                    Yaml::Bool(b) => b.to_string(),
                    other => return Err(format!("metadata key {other:?} is not a string")),
                };
                fields.insert(k, value(v)?);
            }
            Kind::StructValue(Struct { fields })
        }
        Yaml::Tagged(tagged) => return value(tagged.value),
    };
    Ok(of(kind))
}

fn of(kind: Kind) -> Value {
    Value { kind: Some(kind) }
}

fn string(s: String) -> Value {
    of(Kind::StringValue(s))
}

fn number(n: u64) -> Value {
    // Exact up to 2^53, as any protobuf `Struct` number.
    #[allow(clippy::cast_precision_loss)]
    of(Kind::NumberValue(n as f64))
}

fn list(values: Vec<Value>) -> Value {
    of(Kind::ListValue(ListValue { values }))
}

/// The dynamic metadata of the answer to `req`, whose descriptors were
/// decided as `slots` say: the `metadata:` of those whose status is not
/// `OVER_LIMIT`.
pub(crate) fn of_answer(req: &RateLimitRequest, slots: &[DescriptorLimit]) -> Struct {
    let descriptors = req
        .descriptors
        .iter()
        .map(|d| {
            let entries = d
                .entries
                .iter()
                .map(|e| string(format!("{}={}", e.key, e.value)))
                .collect();
            let mut fields =
                std::collections::HashMap::from([("entries".to_owned(), list(entries))]);
            if let Some(limit) = &d.limit {
                // The override in protobuf's text form, as
                // envoyproxy/ratelimit writes it: fields at 0 left out.
                let mut text = Vec::new();
                if limit.requests_per_unit != 0 {
                    text.push(format!("requests_per_unit:{}", limit.requests_per_unit));
                }
                if limit.unit != 0 {
                    let unit = RateLimitUnit::try_from(limit.unit)
                        .map_or_else(|_| limit.unit.to_string(), |u| u.as_str_name().to_owned());
                    text.push(format!("unit:{unit}"));
                }
                fields.insert("limit".to_owned(), string(text.join(" ")));
            }
            if let Some(hits) = &d.hits_addend {
                fields.insert("hitsAddend".to_owned(), number(hits.value));
            }
            of(Kind::StructValue(Struct { fields }))
        })
        .collect();
    let mut fields = std::collections::HashMap::from([
        ("domain".to_owned(), string(req.domain.clone())),
        ("descriptors".to_owned(), list(descriptors)),
    ]);
    if req.hits_addend != 0 {
        fields.insert("hitsAddend".to_owned(), number(u64::from(req.hits_addend)));
    }
    let mut merged = Struct::default();
    for slot in slots {
        if let DescriptorLimit::Limited(l) = slot {
            if let Some(metadata) = l.metadata.as_deref().filter(|_| !l.reported_over()) {
                merge(&mut merged, metadata);
            }
        }
    }
    if !merged.fields.is_empty() {
        fields.insert("metadata".to_owned(), of(Kind::StructValue(merged)));
    }
    Struct { fields }
}

/// `src` into `dest`: maps merged key by key; any other value already in
/// `dest` stays.
fn merge(dest: &mut Struct, src: &Struct) {
    for (k, v) in &src.fields {
        match (dest.fields.get_mut(k), &v.kind) {
            (None, _) => {
                dest.fields.insert(k.clone(), v.clone());
            }
            (
                Some(Value {
                    kind: Some(Kind::StructValue(inner)),
                }),
                Some(Kind::StructValue(from)),
            ) => merge(inner, from),
            (Some(_), _) => {}
        }
    }
}
