//! Dynamic metadata over real gRPC (`--response-dynamic-metadata`,
//! envoyproxy/ratelimit's `RESPONSE_DYNAMIC_METADATA`): the request's
//! domain and descriptors, and the configuration's `metadata:` of the
//! descriptors not over their limit, merged.

mod common;

use common::{descriptor, request, start, start_with, OK, OVER_LIMIT};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::google::protobuf::{value::Kind, Struct, UInt64Value};

const SERVICES: &str = r#"
domain: meta
descriptors:
  - key: service
    value: one
    rate_limit: { unit: hour, requests_per_unit: 1 }
    metadata:
      service_with_quota: { name: one, tier: 1 }
      owner: team-a
  - key: service
    value: two
    rate_limit: { unit: hour, requests_per_unit: 5 }
    metadata:
      service_with_quota: { region: eu }
      owner: team-b
      tags: [ fast, "2" ]
      codes: { 404: not_found }
  - key: free
    rate_limit: { unlimited: true }
    metadata: { never: shown }
"#;

fn get<'a>(s: &'a Struct, path: &[&str]) -> Option<&'a Kind> {
    let (last, inner) = path.split_last()?;
    let mut at = s;
    for k in inner {
        match at.fields.get(*k)?.kind.as_ref()? {
            Kind::StructValue(next) => at = next,
            _ => return None,
        }
    }
    at.fields.get(*last)?.kind.as_ref()
}

fn text<'a>(s: &'a Struct, path: &[&str]) -> Option<&'a str> {
    match get(s, path)? {
        Kind::StringValue(v) => Some(v),
        _ => None,
    }
}

fn number(s: &Struct, path: &[&str]) -> Option<f64> {
    match get(s, path)? {
        Kind::NumberValue(v) => Some(*v),
        _ => None,
    }
}

/// The `descriptors` list, each as its struct.
fn descriptors(s: &Struct) -> Vec<&Struct> {
    match get(s, &["descriptors"]) {
        Some(Kind::ListValue(list)) => list
            .values
            .iter()
            .map(|v| match &v.kind {
                Some(Kind::StructValue(d)) => d,
                other => panic!("a descriptor is a struct: {other:?}"),
            })
            .collect(),
        other => panic!("descriptors is a list: {other:?}"),
    }
}

fn entries(d: &Struct) -> Vec<&str> {
    match get(d, &["entries"]) {
        Some(Kind::ListValue(list)) => list
            .values
            .iter()
            .map(|v| match &v.kind {
                Some(Kind::StringValue(e)) => e.as_str(),
                other => panic!("an entry is a string: {other:?}"),
            })
            .collect(),
        other => panic!("entries is a list: {other:?}"),
    }
}

#[tokio::test]
async fn answers_carry_the_request_and_the_metadata_of_descriptors_not_over() {
    let mut rls = start_with(SERVICES, |o| o.response_dynamic_metadata = true).await;
    let mut free = descriptor(&[("free", "x")]);
    free.hits_addend = Some(UInt64Value { value: 2 });
    let ask = || {
        request(
            "meta",
            vec![
                descriptor(&[("service", "one")]),
                descriptor(&[("service", "two")]),
                free.clone(),
            ],
        )
    };

    let r = rls.ask(ask()).await;
    assert_eq!(r.overall_code, OK);
    let m = r.dynamic_metadata.expect("dynamic metadata");
    assert_eq!(text(&m, &["domain"]), Some("meta"));
    let ds = descriptors(&m);
    assert_eq!(ds.len(), 3);
    assert_eq!(entries(ds[0]), ["service=one"]);
    assert_eq!(entries(ds[1]), ["service=two"]);
    assert_eq!(entries(ds[2]), ["free=x"]);
    assert_eq!(number(ds[2], &["hitsAddend"]), Some(2.0));
    assert_eq!(get(ds[0], &["hitsAddend"]), None);
    assert_eq!(get(&m, &["hitsAddend"]), None, "the request sets none");
    // Both limited descriptors passed: their maps merged key by key, the
    // first one's value kept for a key both set; the unlimited one has none.
    assert_eq!(
        text(&m, &["metadata", "service_with_quota", "name"]),
        Some("one")
    );
    assert_eq!(
        number(&m, &["metadata", "service_with_quota", "tier"]),
        Some(1.0)
    );
    assert_eq!(
        text(&m, &["metadata", "service_with_quota", "region"]),
        Some("eu")
    );
    assert_eq!(text(&m, &["metadata", "owner"]), Some("team-a"));
    assert!(
        matches!(get(&m, &["metadata", "tags"]), Some(Kind::ListValue(l)) if l.values.len() == 2)
    );
    assert_eq!(get(&m, &["metadata", "never"]), None);
    // A number as a key is its text, as envoyproxy/ratelimit reads it.
    assert_eq!(text(&m, &["metadata", "codes", "404"]), Some("not_found"));

    // `service=one` is now over its limit of 1 an hour: only `two`'s.
    let r = rls.ask(ask()).await;
    assert_eq!(r.overall_code, OVER_LIMIT);
    assert_eq!(r.statuses[0].code, OVER_LIMIT);
    assert_eq!(r.statuses[1].code, OK);
    let m = r.dynamic_metadata.expect("dynamic metadata");
    assert_eq!(get(&m, &["metadata", "service_with_quota", "name"]), None);
    assert_eq!(
        text(&m, &["metadata", "service_with_quota", "region"]),
        Some("eu")
    );
    assert_eq!(text(&m, &["metadata", "owner"]), Some("team-b"));

    // The request's hits and a descriptor's limit override are reported.
    let mut overridden = descriptor(&[("service", "two")]);
    overridden.limit = Some(RateLimitOverride {
        requests_per_unit: 7,
        unit: 3, // HOUR
    });
    let mut req = request("meta", vec![overridden]);
    req.hits_addend = 3;
    let r = rls.ask(req).await;
    let m = r.dynamic_metadata.expect("dynamic metadata");
    assert_eq!(number(&m, &["hitsAddend"]), Some(3.0));
    let ds = descriptors(&m);
    assert_eq!(
        text(ds[0], &["limit"]),
        Some("requests_per_unit:7 unit:HOUR")
    );
    // An override is a limit of the request's own: no rule, no metadata.
    assert_eq!(get(&m, &["metadata"]), None);
}

#[tokio::test]
async fn without_the_option_answers_carry_none() {
    let mut rls = start(SERVICES).await;
    let r = rls
        .ask(request("meta", vec![descriptor(&[("service", "two")])]))
        .await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(r.dynamic_metadata, None);
}
