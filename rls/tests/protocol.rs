//! `ShouldRateLimit` over real gRPC (tonic's client, envoy-types'
//! messages), field by field, for the behaviours envoyproxy/ratelimit
//! documents, and floodgate's differences.

mod common;

use common::{descriptor, request, same_window, start, start_with, EDGE, OK, OVER_LIMIT};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::google::protobuf::UInt64Value;
use floodgate_rls::Headers;
use std::time::Duration;

#[tokio::test]
async fn a_key_at_50_a_second_answers_49_remaining_after_its_first_hit() {
    let mut rls = start(EDGE).await;
    let r = rls
        .ask(request(
            "edge",
            vec![descriptor(&[("remote_address", "10.0.0.1")])],
        ))
        .await;
    assert_eq!(r.overall_code, OK);
    let s = &r.statuses[0];
    assert_eq!(s.code, OK);
    assert_eq!(s.limit_remaining, 49);
    let limit = s.current_limit.as_ref().expect("the limit is reported");
    assert_eq!((limit.requests_per_unit, limit.unit), (50, 1)); // SECOND
    let reset = s.duration_until_reset.as_ref().expect("a reset");
    assert!(
        reset.seconds <= 1 && (reset.seconds, reset.nanos) != (0, 0),
        "{reset:?}"
    );
    // Another address has its own counter.
    let r = rls
        .ask(request(
            "edge",
            vec![descriptor(&[("remote_address", "10.0.0.2")])],
        ))
        .await;
    assert_eq!(r.statuses[0].limit_remaining, 49);
}

#[tokio::test]
async fn at_20_a_minute_the_21st_hit_is_over_the_limit() {
    let mut rls = start(EDGE).await;
    same_window(60, Duration::from_secs(10)).await;
    let upload = || request("edge", vec![descriptor(&[("path", "/upload")])]);
    for i in 0..20 {
        let r = rls.ask(upload()).await;
        assert_eq!(r.overall_code, OK, "hit {}", i + 1);
        assert_eq!(r.statuses[0].limit_remaining, 19 - i);
    }
    let r = rls.ask(upload()).await;
    assert_eq!(r.overall_code, OVER_LIMIT);
    let s = &r.statuses[0];
    assert_eq!((s.code, s.limit_remaining), (OVER_LIMIT, 0));
    let limit = s.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.name.as_str(), limit.requests_per_unit, limit.unit),
        ("upload", 20, 2)
    );
    let reset = s.duration_until_reset.as_ref().unwrap();
    assert!((0..=60).contains(&reset.seconds), "{reset:?}");
}

#[tokio::test]
async fn nested_descriptors_take_the_most_specific_rule_of_their_last_entry() {
    let mut rls = start(EDGE).await;
    let free = descriptor(&[("api_key", "k1"), ("plan", "free")]);
    let pro = descriptor(&[("api_key", "k1"), ("plan", "pro")]);
    let alone = descriptor(&[("api_key", "k1")]);
    let r = rls
        .ask(request("edge", vec![free.clone(), pro, alone]))
        .await;
    let per_unit: Vec<u32> = r
        .statuses
        .iter()
        .map(|s| s.current_limit.as_ref().unwrap().requests_per_unit)
        .collect();
    assert_eq!(per_unit, [3, 5, 100]);
    assert_eq!(r.statuses[0].limit_remaining, 2);
    // An entry the tree does not have: no limit, OK.
    let deeper = descriptor(&[("api_key", "k1"), ("plan", "free"), ("region", "eu")]);
    let r = rls.ask(request("edge", vec![deeper])).await;
    assert_eq!(
        (r.overall_code, r.statuses[0].current_limit.is_none()),
        (OK, true)
    );
}

#[tokio::test]
async fn wildcards_match_prefixes_and_middles() {
    let mut rls = start(EDGE).await;
    let r = rls
        .ask(request(
            "edge",
            vec![descriptor(&[("path", "/static/app.js")])],
        ))
        .await;
    let s = &r.statuses[0];
    assert_eq!(
        (s.code, s.limit_remaining, s.current_limit.is_none()),
        (OK, u32::MAX, true)
    );
    // /v1/*/items: every matching path has its own counter of 2 an hour.
    for path in ["/v1/a/items", "/v1/b/items"] {
        for left in [1, 0] {
            let r = rls
                .ask(request("edge", vec![descriptor(&[("path", path)])]))
                .await;
            assert_eq!(r.statuses[0].limit_remaining, left, "{path}");
        }
        let r = rls
            .ask(request("edge", vec![descriptor(&[("path", path)])]))
            .await;
        assert_eq!(r.overall_code, OVER_LIMIT, "{path}");
    }
    let r = rls
        .ask(request(
            "edge",
            vec![descriptor(&[("path", "/v1/a/other")])],
        ))
        .await;
    assert!(r.statuses[0].current_limit.is_none());
}

#[tokio::test]
async fn shadow_mode_reports_ok_over_its_limit() {
    let mut rls = start(EDGE).await;
    let ask = || request("edge", vec![descriptor(&[("shadowed", "x")])]);
    assert_eq!(rls.ask(ask()).await.overall_code, OK);
    let r = rls.ask(ask()).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK));
    assert_eq!(r.statuses[0].limit_remaining, 0);
}

#[tokio::test]
async fn global_shadow_mode_answers_ok_and_decides_as_usual() {
    let mut rls = start_with(
        "domain: d\ndescriptors: [ { key: user, rate_limit: { unit: hour, requests_per_unit: 2 } } ]",
        |o| o.shadow_mode = true,
    )
    .await;
    let ask = || request("d", vec![descriptor(&[("user", "ana")])]);
    for remaining in [1, 0] {
        let r = rls.ask(ask()).await;
        assert_eq!(
            (r.overall_code, r.statuses[0].limit_remaining),
            (OK, remaining)
        );
    }
    // Over its limit: the status says so, the answer is OK, and the refused
    // hit is charged nothing (as when enforced).
    for _ in 0..2 {
        let r = rls.ask(ask()).await;
        assert_eq!(r.overall_code, OK);
        assert_eq!(r.statuses[0].code, OVER_LIMIT);
        assert_eq!(r.statuses[0].limit_remaining, 0);
    }
}

#[tokio::test]
async fn a_hot_rule_in_shadow_mode_over_its_limit_is_given_nothing_back() {
    let mut rls = start(
        "domain: d\ndescriptors:\n  - key: tenant\n    shadow_mode: true\n    rate_limit: { unit: hour, requests_per_unit: 20, hot_keys: { servers: 1 } }\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n",
    )
    .await;
    let tenant = || descriptor(&[("tenant", "acme")]);
    for _ in 0..21 {
        assert_eq!(rls.ask(request("d", vec![tenant()])).await.overall_code, OK);
    }
    assert_eq!(
        rls.ask(request("d", vec![descriptor(&[("user", "ana")])]))
            .await
            .overall_code,
        OK
    );
    // The tenant (shadowed) denies, the user refuses: nothing was charged
    // to the tenant, so nothing goes back to it.
    let r = rls
        .ask(request("d", vec![tenant(), descriptor(&[("user", "ana")])]))
        .await;
    assert_eq!(r.overall_code, OVER_LIMIT);
    let mut look = tenant();
    look.hits_addend = Some(UInt64Value { value: 0 });
    let r = rls.ask(request("d", vec![look])).await;
    assert_eq!(
        r.statuses[0].limit_remaining, 0,
        "the tenant is still spent"
    );
}

#[tokio::test]
async fn replaces_drops_the_named_limit_when_both_apply() {
    let mut rls = start(EDGE).await;
    let both = || {
        request(
            "edge",
            vec![
                descriptor(&[("tenant", "t1")]),
                descriptor(&[("tenant_vip", "t1")]),
            ],
        )
    };
    for _ in 0..3 {
        let r = rls.ask(both()).await;
        assert_eq!(r.overall_code, OK);
        assert!(
            r.statuses[0].current_limit.is_none(),
            "tenant_small is replaced"
        );
    }
    // Alone, tenant_small applies: 1 an hour.
    let alone = || request("edge", vec![descriptor(&[("tenant", "t2")])]);
    assert_eq!(rls.ask(alone()).await.overall_code, OK);
    assert_eq!(rls.ask(alone()).await.overall_code, OVER_LIMIT);
}

#[tokio::test]
async fn unknown_domains_and_descriptors_are_ok_without_a_limit() {
    let mut rls = start(EDGE).await;
    let r = rls
        .ask(request("nowhere", vec![descriptor(&[("a", "b")])]))
        .await;
    assert_eq!((r.overall_code, r.statuses.len()), (OK, 1));
    assert!(r.statuses[0].current_limit.is_none());
    let r = rls
        .ask(request("edge", vec![descriptor(&[("unknown", "b")])]))
        .await;
    assert_eq!(r.overall_code, OK);
}

#[tokio::test]
async fn descriptors_are_decided_all_or_nothing() {
    let mut rls = start(EDGE).await;
    // Use up tenant t3's one hit.
    let t3 = descriptor(&[("tenant", "t3")]);
    assert_eq!(
        rls.ask(request("edge", vec![t3.clone()]))
            .await
            .overall_code,
        OK
    );
    // A request of an address and t3: refused by t3, so the address is not
    // charged (envoyproxy/ratelimit would have counted it).
    let addr = descriptor(&[("remote_address", "10.9.9.9")]);
    let r = rls.ask(request("edge", vec![addr.clone(), t3])).await;
    assert_eq!(r.overall_code, OVER_LIMIT);
    assert_eq!((r.statuses[0].code, r.statuses[1].code), (OK, OVER_LIMIT));
    assert_eq!(
        r.statuses[0].limit_remaining, 50,
        "the address was not charged"
    );
    let r = rls.ask(request("edge", vec![addr])).await;
    assert_eq!(r.statuses[0].limit_remaining, 49);
    // A limit of 0 refuses and charges none of the others.
    let zero = descriptor(&[("zero", "z")]);
    let addr = descriptor(&[("remote_address", "10.9.9.8")]);
    let r = rls.ask(request("edge", vec![addr, zero])).await;
    assert_eq!(r.overall_code, OVER_LIMIT);
    assert_eq!(
        (r.statuses[0].limit_remaining, r.statuses[1].code),
        (50, OVER_LIMIT)
    );
}

#[tokio::test]
async fn negative_hits_give_back_what_was_charged() {
    let mut rls = start_with(
        "domain: d\ndescriptors: [ { key: user, rate_limit: { unit: hour, requests_per_unit: 3, algorithm: gcra } }, { key: zero, rate_limit: { unit: hour, requests_per_unit: 0 } } ]",
        |_| {},
    )
    .await;
    let charge = || request("d", vec![descriptor(&[("user", "ana")])]);
    for _ in 0..3 {
        assert_eq!(rls.ask(charge()).await.overall_code, OK);
    }
    assert_eq!(rls.ask(charge()).await.overall_code, OVER_LIMIT);
    // Two hits given back: OK, two remaining, and two more admitted.
    let mut give_back = descriptor(&[("user", "ana")]);
    give_back.hits_addend = Some(UInt64Value { value: 2 });
    give_back.is_negative_hits = true;
    let r = rls.ask(request("d", vec![give_back.clone()])).await;
    assert_eq!((r.overall_code, r.statuses[0].code), (OK, OK));
    assert_eq!(r.statuses[0].limit_remaining, 2);
    for _ in 0..2 {
        assert_eq!(rls.ask(charge()).await.overall_code, OK);
    }
    assert_eq!(rls.ask(charge()).await.overall_code, OVER_LIMIT);
    // Given back to a limit of 0, or beside a refusal: never a refusal of
    // its own, and given back all the same.
    let mut zero = descriptor(&[("zero", "z")]);
    zero.is_negative_hits = true;
    let r = rls.ask(request("d", vec![zero])).await;
    assert_eq!(r.overall_code, OK);
    let r = rls
        .ask(request(
            "d",
            vec![give_back, charge().descriptors[0].clone()],
        ))
        .await;
    assert_eq!(r.statuses[0].limit_remaining, 2);
    assert_eq!(r.overall_code, OK, "the charge fits once the hits are back");
}

#[tokio::test]
async fn hits_addend_per_request_and_per_descriptor() {
    let mut rls = start(EDGE).await;
    // Four hits on a limit of 50 a second: all in one second.
    same_window(1, Duration::from_millis(500)).await;
    let mut req = request("edge", vec![descriptor(&[("remote_address", "10.1.1.1")])]);
    req.hits_addend = 10;
    assert_eq!(rls.ask(req).await.statuses[0].limit_remaining, 40);
    let mut d = descriptor(&[("remote_address", "10.1.1.1")]);
    d.hits_addend = Some(UInt64Value { value: 5 });
    let mut req = request("edge", vec![d]);
    req.hits_addend = 10; // the descriptor's own wins
    assert_eq!(rls.ask(req).await.statuses[0].limit_remaining, 35);
    // More than the limit at once: over, nothing charged.
    let mut req = request("edge", vec![descriptor(&[("remote_address", "10.1.1.1")])]);
    req.hits_addend = u32::MAX;
    let r = rls.ask(req).await;
    assert_eq!(r.overall_code, OVER_LIMIT);
    let r = rls
        .ask(request(
            "edge",
            vec![descriptor(&[("remote_address", "10.1.1.1")])],
        ))
        .await;
    assert_eq!(r.statuses[0].limit_remaining, 34);
}

#[tokio::test]
async fn a_limit_override_replaces_the_configured_limit() {
    let mut rls = start(EDGE).await;
    let mut d = descriptor(&[("remote_address", "10.2.2.2")]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 2,
        unit: 3, // HOUR
    });
    for left in [1, 0] {
        let r = rls.ask(request("edge", vec![d.clone()])).await;
        let limit = r.statuses[0].current_limit.as_ref().unwrap();
        assert_eq!((limit.requests_per_unit, limit.unit), (2, 3));
        assert_eq!(r.statuses[0].limit_remaining, left);
    }
    assert_eq!(
        rls.ask(request("edge", vec![d])).await.overall_code,
        OVER_LIMIT
    );
}

#[tokio::test]
async fn malformed_requests_get_invalid_argument_never_a_crash() {
    let mut rls = start(EDGE).await;
    let code = |r: Result<_, tonic::Status>| r.map(|_| ()).unwrap_err().code();
    let empty_domain = request("", vec![descriptor(&[("a", "b")])]);
    assert_eq!(
        code(rls.client.should_rate_limit(empty_domain).await),
        tonic::Code::InvalidArgument
    );
    let none = request("edge", vec![]);
    assert_eq!(
        code(rls.client.should_rate_limit(none).await),
        tonic::Code::InvalidArgument
    );
    let empty = request("edge", vec![descriptor(&[])]);
    assert_eq!(
        code(rls.client.should_rate_limit(empty).await),
        tonic::Code::InvalidArgument
    );
    let many = request("edge", vec![descriptor(&[("remote_address", "x")]); 10_000]);
    assert_eq!(
        code(rls.client.should_rate_limit(many).await),
        tonic::Code::InvalidArgument
    );
    let mut bad_unit = descriptor(&[("remote_address", "x")]);
    bad_unit.limit = Some(RateLimitOverride {
        requests_per_unit: 1,
        unit: 99,
    });
    let r = rls
        .client
        .should_rate_limit(request("edge", vec![bad_unit]))
        .await;
    assert_eq!(code(r), tonic::Code::InvalidArgument);
    // Still serving.
    let r = rls
        .ask(request(
            "edge",
            vec![descriptor(&[("remote_address", "10.3.3.3")])],
        ))
        .await;
    assert_eq!(r.statuses[0].limit_remaining, 49);
}

#[tokio::test]
async fn header_fields_for_envoy_describe_the_closest_limit() {
    let mut rls = start_with(EDGE, |o| o.headers = Headers::Legacy).await;
    let d = vec![
        descriptor(&[("remote_address", "10.4.4.4")]),
        descriptor(&[("path", "/upload")]),
    ];
    let r = rls.ask(request("edge", d)).await;
    let fields: Vec<(String, String)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("x-ratelimit-limit"), Some("20"), "{fields:?}");
    assert_eq!(get("x-ratelimit-remaining"), Some("19"));
    assert!(get("x-ratelimit-reset").is_some());
    let mut rls = start_with(EDGE, |o| o.headers = Headers::Ietf).await;
    let r = rls
        .ask(request("edge", vec![descriptor(&[("path", "/upload")])]))
        .await;
    let names: Vec<&str> = r
        .response_headers_to_add
        .iter()
        .map(|h| h.key.as_str())
        .collect();
    assert!(
        names.contains(&"ratelimit") && names.contains(&"ratelimit-policy"),
        "{names:?}"
    );
    // A refusal by a limit of 0 is what the fields describe (they once
    // described another descriptor, with its whole quota left).
    let refused = vec![
        descriptor(&[("remote_address", "10.4.4.5")]),
        descriptor(&[("zero", "z")]),
    ];
    let mut rls = start_with(EDGE, |o| o.headers = Headers::Legacy).await;
    let r = rls.ask(request("edge", refused)).await;
    let get = |name: &str| {
        r.response_headers_to_add
            .iter()
            .find(|h| h.key == name)
            .map(|h| h.value.clone())
    };
    assert_eq!(get("x-ratelimit-remaining").as_deref(), Some("0"));
    let reset: u64 = get("x-ratelimit-reset").unwrap().parse().unwrap();
    assert!((1..=3600).contains(&reset), "{reset}");
    // None by default.
    let mut rls = start(EDGE).await;
    let r = rls
        .ask(request("edge", vec![descriptor(&[("path", "/upload")])]))
        .await;
    assert!(r.response_headers_to_add.is_empty());
}
