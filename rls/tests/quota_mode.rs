//! Quota mode over real gRPC (`quota_mode: true` on a descriptor, or
//! `--quota-mode` for all; envoyproxy/ratelimit's): a request is over only
//! when every descriptor in quota mode is, and a refused request keeps no
//! charge.

mod common;

use common::{descriptor, request, start, start_with, OK, OVER_LIMIT};

const QUOTAS: &str = r#"
domain: quota
descriptors:
  - key: service
    value: one
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: service
    value: two
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: service
    value: three
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: credit
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 10 }
"#;

fn services_and(
    user: &str,
) -> Vec<envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor> {
    vec![
        descriptor(&[("service", "one")]),
        descriptor(&[("service", "two")]),
        descriptor(&[("user", user)]),
    ]
}

#[tokio::test]
async fn a_request_is_over_only_when_every_quota_is_and_then_keeps_no_charge() {
    let mut rls = start(QUOTAS).await;
    let codes = |r: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse| {
        r.statuses.iter().map(|s| s.code).collect::<Vec<_>>()
    };
    let remaining = |r: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse| {
        r.statuses
            .iter()
            .map(|s| s.limit_remaining)
            .collect::<Vec<_>>()
    };

    // Both quotas have room: each is charged, and the user's limit.
    let r = rls.ask(request("quota", services_and("ana"))).await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![OK, OK, OK]));
    assert_eq!(remaining(&r), [0, 1, 9]);

    // `one` is spent: its status says so, but `two` admits the request.
    let r = rls.ask(request("quota", services_and("ana"))).await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![OVER_LIMIT, OK, OK]));
    assert_eq!(remaining(&r), [0, 0, 8]);

    // Both spent: over, and the user's limit keeps what it had.
    let r = rls.ask(request("quota", services_and("ana"))).await;
    assert_eq!(
        (r.overall_code, codes(&r)),
        (OVER_LIMIT, vec![OVER_LIMIT, OVER_LIMIT, OK])
    );
    assert_eq!(
        remaining(&r),
        [0, 0, 8],
        "a refused request keeps no charge"
    );
    let r = rls
        .ask(request("quota", vec![descriptor(&[("user", "ana")])]))
        .await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 7));

    // A descriptor not in quota mode still refuses by itself, a quota
    // with room beside it: which keeps no charge.
    for _ in 0..10 {
        rls.ask(request("quota", vec![descriptor(&[("user", "bo")])]))
            .await;
    }
    let r = rls
        .ask(request(
            "quota",
            vec![
                descriptor(&[("service", "three")]),
                descriptor(&[("user", "bo")]),
            ],
        ))
        .await;
    assert_eq!(
        (r.overall_code, codes(&r)),
        (OVER_LIMIT, vec![OK, OVER_LIMIT])
    );
    let r = rls
        .ask(request("quota", vec![descriptor(&[("service", "three")])]))
        .await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 4));
}

#[tokio::test]
async fn hits_given_back_are_no_quota_that_admits() {
    let mut rls = start(QUOTAS).await;
    let mut credit = descriptor(&[("credit", "c")]);
    credit.is_negative_hits = true;
    let ask = || {
        request(
            "quota",
            vec![
                descriptor(&[("service", "one")]),
                descriptor(&[("user", "cy")]),
                credit.clone(),
            ],
        )
    };
    assert_eq!(rls.ask(ask()).await.overall_code, OK);
    // `one` is spent; `credit` only gives hits back: the request is over,
    // and the user's limit keeps what it had.
    let r = rls.ask(ask()).await;
    assert_eq!(r.overall_code, OVER_LIMIT, "{r:?}");
    let r = rls
        .ask(request("quota", vec![descriptor(&[("user", "cy")])]))
        .await;
    assert_eq!(r.statuses[0].limit_remaining, 8);
}

#[tokio::test]
async fn a_descriptor_in_shadow_mode_admits_in_quota_mode() {
    let yaml = "domain: s\ndescriptors:\n  - key: tenant\n    shadow_mode: true\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n";
    let mut rls = start_with(yaml, |o| o.quota_mode = true).await;
    let both = || {
        request(
            "s",
            vec![descriptor(&[("tenant", "t")]), descriptor(&[("user", "u")])],
        )
    };
    assert_eq!(rls.ask(both()).await.overall_code, OK);
    // Both over their limits: the shadow one is reported OK, so admits, as
    // in envoyproxy/ratelimit.
    let r = rls.ask(both()).await;
    let codes: Vec<i32> = r.statuses.iter().map(|s| s.code).collect();
    assert_eq!((r.overall_code, codes), (OK, vec![OK, OVER_LIMIT]));
}

#[tokio::test]
async fn global_quota_mode_puts_every_descriptor_in_quota_mode() {
    let yaml = "domain: g\ndescriptors:\n  - key: a\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n  - key: b\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n";
    let mut rls = start_with(yaml, |o| o.quota_mode = true).await;
    let both = || {
        request(
            "g",
            vec![descriptor(&[("a", "x")]), descriptor(&[("b", "x")])],
        )
    };
    assert_eq!(rls.ask(both()).await.overall_code, OK);
    // Both spent: over.
    let r = rls.ask(both()).await;
    assert_eq!(r.overall_code, OVER_LIMIT);
    // A descriptor with no rule counts as one that admits.
    let mut with_unknown = both();
    with_unknown
        .descriptors
        .push(descriptor(&[("unknown", "x")]));
    assert_eq!(rls.ask(with_unknown).await.overall_code, OK);
    // Without the option the same requests are refused as soon as one is over.
    let mut rls = start(yaml).await;
    let one_spent = request("g", vec![descriptor(&[("a", "y")])]);
    assert_eq!(rls.ask(one_spent).await.overall_code, OK);
    let r = rls
        .ask(request(
            "g",
            vec![descriptor(&[("a", "y")]), descriptor(&[("b", "y")])],
        ))
        .await;
    assert_eq!(r.overall_code, OVER_LIMIT);
}

#[tokio::test]
async fn a_quota_at_zero_or_with_hot_keys_is_one_among_the_others() {
    let yaml = r#"
domain: more
descriptors:
  - key: zero
    quota_mode: true
    rate_limit: { unit: minute, requests_per_unit: 0 }
  - key: hot
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 40, hot_keys: { servers: 2 } }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 100 }
"#;
    let mut rls = start(yaml).await;
    let user_left = |r: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse| {
        r.statuses.last().map(|s| s.limit_remaining)
    };
    // A quota at 0 is over, alone it refuses, and the user keeps no charge.
    let r = rls
        .ask(request(
            "more",
            vec![descriptor(&[("zero", "z")]), descriptor(&[("user", "u")])],
        ))
        .await;
    assert_eq!(r.overall_code, OVER_LIMIT, "{r:?}");
    assert_eq!(user_left(&r), Some(100));
    // With a hot quota that has room beside it: admitted, the user charged.
    let both = || {
        request(
            "more",
            vec![
                descriptor(&[("zero", "z")]),
                descriptor(&[("hot", "h")]),
                descriptor(&[("user", "u")]),
            ],
        )
    };
    let mut admitted = 0;
    for _ in 0..50 {
        if rls.ask(both()).await.overall_code == OK {
            admitted += 1;
        }
    }
    // Hot keys never admit more than the limit, and at least 0.9 of it.
    assert!((36..=40).contains(&admitted), "{admitted} admitted of 40");
    // Every refused request gave the user's charge back.
    let r = rls
        .ask(request("more", vec![descriptor(&[("user", "u")])]))
        .await;
    assert_eq!(r.statuses[0].limit_remaining, 100 - admitted - 1);
}
