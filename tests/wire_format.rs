//! What floodgate puts on the wire: rate-limit header fields, 429/400/503
//! problem+json responses and gRPC Trailers-Only rejections.
//!
//! The structured fields are read back with the small strict parser in `sf`
//! below, not with `sfv` (which wrote them), so a serializer bug cannot hide
//! behind the same bug in its own parser.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use floodgate::algorithm::Quota;
use floodgate::headers::{
    retry_after_secs, write_headers_at, HeaderStyle, LimitReport, ResetUnit, RATELIMIT,
    RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
};
use floodgate::response::{bad_request, service_unavailable, too_many_requests};
use floodgate::Decision;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, StatusCode};
use serde_json::Value;

mod common;

use common::sf;

// ---- fixtures ----------------------------------------------------------

fn decision(allowed: bool, remaining: u64, reset_ms: u64, retry_ms: Option<u64>) -> Decision {
    let reset = Duration::from_millis(reset_ms);
    match (allowed, retry_ms) {
        (true, _) => Decision::within_limit(100, remaining, reset),
        (false, Some(r)) => Decision::over_limit(100, remaining, reset, Duration::from_millis(r)),
        (false, None) => Decision::cost_too_high(100, remaining, reset),
    }
}

fn allowed(remaining: u64, reset_ms: u64) -> Decision {
    decision(true, remaining, reset_ms, None)
}

fn denied(retry_ms: Option<u64>) -> Decision {
    decision(false, 0, 60_000, retry_ms)
}

fn quota(units: u64, window_ms: u64) -> Quota {
    Quota {
        units,
        window: Duration::from_millis(window_ms),
    }
}

const MINUTE: u64 = 60_000;

/// Fixed clock: 2023-11-14T22:13:20.250Z.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(1_700_000_000_250)
}

fn written(style: HeaderStyle, reports: &[LimitReport<'_>]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    write_headers_at(style, reports, now(), &mut headers);
    headers
}

/// All field lines of `name` combined as RFC 9651 §4.2 says, then parsed.
fn field(headers: &HeaderMap, name: &http::HeaderName) -> Vec<sf::Item> {
    let lines: Vec<&str> = headers
        .get_all(name)
        .iter()
        .map(|v| v.to_str().expect("field is not ASCII"))
        .collect();
    assert!(!lines.is_empty(), "no {name} field");
    sf::parse_list(&lines.join(", ")).unwrap_or_else(|e| panic!("{name}: {e}: {lines:?}"))
}

fn the_one(items: Vec<sf::Item>) -> sf::Item {
    assert_eq!(items.len(), 1, "{items:?}");
    items.into_iter().next().unwrap()
}

fn text(headers: &HeaderMap, name: impl http::header::AsHeaderName) -> &str {
    headers.get(name).expect("missing header").to_str().unwrap()
}

fn json_body(response: &http::Response<bytes::Bytes>) -> Value {
    serde_json::from_slice(response.body()).expect("body is not JSON")
}

fn no_rate_limit_fields(headers: &HeaderMap) -> bool {
    [
        &RATELIMIT,
        &RATELIMIT_POLICY,
        &X_RATELIMIT_LIMIT,
        &X_RATELIMIT_REMAINING,
        &X_RATELIMIT_RESET,
    ]
    .iter()
    .all(|name| !headers.contains_key(*name))
}

// ---- the independent parser itself ---------------------------------------

#[test]
fn parser_reads_the_drafts_examples() {
    let items = sf::parse_list(r#""burst";q=100;w=60,"daily";q=1000;w=86400"#).unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!((items[1].name(), items[1].int("w")), ("daily", 86_400));
    let item = the_one(sf::parse_list(r#""default";r=50;t=30"#).unwrap());
    assert_eq!((item.int("r"), item.int("t")), (50, 30));
}

#[test]
fn parser_is_strict() {
    for bad in [
        r#""a";q=1,"#,
        r#""a;q=1"#,
        r#""a\x";q=1"#,
        r#""a";q=1234567890123456"#,
        r#""a";q=1.5"#,
        r#""a";Q=1"#,
        r#""a" "b""#,
        "a;q=1",
        "(\"a\")",
        "\"\u{e9}\"",
    ] {
        assert!(sf::parse_list(bad).is_err(), "accepted {bad:?}");
    }
}

// ---- IETF fields -----------------------------------------------------------

#[test]
fn ietf_single_policy() {
    let d = allowed(42, 16_200);
    let reports = [LimitReport::new("default", quota(100, MINUTE), &d)];
    let headers = written(HeaderStyle::Ietf, &reports);

    let p = the_one(field(&headers, &RATELIMIT_POLICY));
    assert_eq!(p.name(), "default");
    assert_eq!(p.keys(), ["q", "w"]);
    assert_eq!((p.int("q"), p.int("w")), (100, 60));

    let r = the_one(field(&headers, &RATELIMIT));
    assert_eq!(r.name(), "default");
    assert_eq!(r.keys(), ["r", "t"]);
    assert_eq!((r.int("r"), r.int("t")), (42, 17));

    assert_eq!(headers.len(), 2, "IETF style writes no legacy fields");
}

#[test]
fn ietf_lists_every_policy_and_reports_the_most_restrictive() {
    let burst = allowed(3, 900);
    let hourly = allowed(1, 3_000_000);
    let daily = allowed(500, 80_000_000);
    let reports = [
        LimitReport::new("burst", quota(10, 1_000), &burst),
        LimitReport::new("hourly", quota(1_000, 3_600_000), &hourly),
        LimitReport::new("daily", quota(10_000, 86_400_000), &daily),
    ];
    let headers = written(HeaderStyle::Ietf, &reports);

    let policies = field(&headers, &RATELIMIT_POLICY);
    let listed: Vec<_> = policies
        .iter()
        .map(|p| (p.name(), p.int("q"), p.int("w")))
        .collect();
    assert_eq!(
        listed,
        [
            ("burst", 10, 1),
            ("hourly", 1_000, 3_600),
            ("daily", 10_000, 86_400)
        ]
    );

    let r = the_one(field(&headers, &RATELIMIT));
    assert_eq!((r.name(), r.int("r"), r.int("t")), ("hourly", 1, 3_000));
}

#[test]
fn ietf_tie_on_remaining_reports_the_longest_wait() {
    let short = allowed(0, 1_000);
    let long = allowed(0, 30_000);
    let reports = [
        LimitReport::new("short", quota(5, 1_000), &short),
        LimitReport::new("long", quota(100, MINUTE), &long),
    ];
    let r = the_one(field(&written(HeaderStyle::Ietf, &reports), &RATELIMIT));
    assert_eq!((r.name(), r.int("r"), r.int("t")), ("long", 0, 30));
}

#[test]
fn ietf_denial_reports_the_retry_time_when_it_is_longer() {
    let a = decision(false, 0, 2_000, Some(5_500));
    let r = the_one(field(
        &written(
            HeaderStyle::Ietf,
            &[LimitReport::new("a", quota(1, 1_000), &a)],
        ),
        &RATELIMIT,
    ));
    assert_eq!(r.int("t"), 6);

    let b = decision(false, 0, 10_000, Some(1_000));
    let r = the_one(field(
        &written(
            HeaderStyle::Ietf,
            &[LimitReport::new("b", quota(1, 1_000), &b)],
        ),
        &RATELIMIT,
    ));
    assert_eq!(r.int("t"), 10);
}

#[test]
fn ietf_a_denial_outranks_an_admission_with_fewer_remaining() {
    // A costly request denied with 3 left; another policy admitted with 1.
    let costly = decision(false, 3, 5_000, Some(4_000));
    let other = allowed(1, 9_000);
    let reports = [
        LimitReport::new("other", quota(10, MINUTE), &other),
        LimitReport::new("costly", quota(10, MINUTE), &costly),
    ];
    let r = the_one(field(&written(HeaderStyle::Ietf, &reports), &RATELIMIT));
    assert_eq!(r.name(), "costly");
}

#[test]
fn ietf_window_is_whole_non_zero_seconds_rounded_up() {
    let d = allowed(1, 0);
    for (window_ms, w) in [
        (0, 1),
        (1, 1),
        (999, 1),
        (1_000, 1),
        (1_500, 2),
        (MINUTE, 60),
    ] {
        let reports = [LimitReport::new("p", quota(1, window_ms), &d)];
        let p = the_one(field(
            &written(HeaderStyle::Ietf, &reports),
            &RATELIMIT_POLICY,
        ));
        assert_eq!(p.int("w"), w, "window {window_ms} ms");
    }
}

#[test]
fn ietf_names_are_escaped_or_sanitized() {
    let d = allowed(1, 0);
    let cases = [
        ("a\"b\\c", "a\"b\\c"),
        ("caf\u{e9}", "caf_"),
        ("\u{1f980} crab", "_ crab"),
        ("tab\there\r\n", "tab_here__"),
        ("nul\0", "nul_"),
        ("", ""),
        (" spaced ", " spaced "),
    ];
    let reports: Vec<_> = cases
        .iter()
        .map(|(name, _)| LimitReport::new(name, quota(1, 1_000), &d))
        .collect();
    let names: Vec<String> = field(&written(HeaderStyle::Ietf, &reports), &RATELIMIT_POLICY)
        .iter()
        .map(|p| p.name().to_owned())
        .collect();
    let expected: Vec<_> = cases.iter().map(|(_, wire)| *wire).collect();
    assert_eq!(names, expected);
}

#[test]
fn ietf_huge_numbers_stay_valid_structured_fields() {
    let d = Decision::over_limit(u64::MAX, u64::MAX, Duration::MAX, Duration::MAX);
    let p = Quota {
        units: u64::MAX,
        window: Duration::MAX,
    };
    let headers = written(HeaderStyle::Ietf, &[LimitReport::new("x", p, &d)]);
    let max = 999_999_999_999_999;
    let policy_item = the_one(field(&headers, &RATELIMIT_POLICY));
    assert_eq!((policy_item.int("q"), policy_item.int("w")), (max, max));
    let limit_item = the_one(field(&headers, &RATELIMIT));
    assert_eq!((limit_item.int("r"), limit_item.int("t")), (max, max));
}

// ---- degraded decisions ------------------------------------------------------

#[test]
fn degraded_decisions_write_no_rate_limit_fields() {
    let d = denied(Some(1_000)).mark_degraded();
    let reports = [LimitReport::new("p", quota(10, MINUTE), &d)];
    for style in [
        HeaderStyle::Ietf,
        HeaderStyle::Both,
        HeaderStyle::Legacy {
            reset: ResetUnit::EpochSeconds,
        },
    ] {
        assert!(written(style, &reports).is_empty(), "{style:?}");
        let response = too_many_requests(&reports, style, now());
        assert!(no_rate_limit_fields(response.headers()), "{style:?}");
        // The rejection itself is still explained.
        assert_eq!(text(response.headers(), RETRY_AFTER), "1");
    }
}

#[test]
fn degraded_decisions_are_left_out_of_a_mix() {
    let fallback = allowed(0, 1_000).mark_degraded();
    let shared = allowed(7, 2_000);
    let reports = [
        LimitReport::new("fallback", quota(1, 1_000), &fallback),
        LimitReport::new("shared", quota(10, MINUTE), &shared),
    ];
    let headers = written(HeaderStyle::Ietf, &reports);
    let p = the_one(field(&headers, &RATELIMIT_POLICY));
    assert_eq!(p.name(), "shared");
    let r = the_one(field(&headers, &RATELIMIT));
    assert_eq!((r.name(), r.int("r")), ("shared", 7));
}

// ---- legacy fields -------------------------------------------------------------

#[test]
fn legacy_delta_seconds() {
    let d = allowed(42, 16_200);
    let reports = [LimitReport::new("p", quota(100, MINUTE), &d)];
    let headers = written(
        HeaderStyle::Legacy {
            reset: ResetUnit::DeltaSeconds,
        },
        &reports,
    );
    assert_eq!(text(&headers, X_RATELIMIT_LIMIT), "100");
    assert_eq!(text(&headers, X_RATELIMIT_REMAINING), "42");
    assert_eq!(text(&headers, X_RATELIMIT_RESET), "17");
    assert!(!headers.contains_key(RATELIMIT));
    assert_eq!(headers.len(), 3);
}

#[test]
fn legacy_epoch_seconds() {
    // now is …000.250 s; + 16.2 s = …016.450 s, rounded up.
    let d = allowed(42, 16_200);
    let reports = [LimitReport::new("p", quota(100, MINUTE), &d)];
    let headers = written(
        HeaderStyle::Legacy {
            reset: ResetUnit::EpochSeconds,
        },
        &reports,
    );
    assert_eq!(text(&headers, X_RATELIMIT_RESET), "1700000017");
    assert_eq!(text(&headers, X_RATELIMIT_REMAINING), "42");

    // Nothing used: the quota is already full, reset is "now" (rounded up).
    let fresh = allowed(100, 0);
    let reports = [LimitReport::new("p", quota(100, MINUTE), &fresh)];
    let headers = written(
        HeaderStyle::Legacy {
            reset: ResetUnit::EpochSeconds,
        },
        &reports,
    );
    assert_eq!(text(&headers, X_RATELIMIT_RESET), "1700000001");
}

#[test]
fn legacy_reports_the_most_restrictive_policy() {
    let a = allowed(9, 1_000);
    let b = Decision::within_limit(5, 2, Duration::from_secs(4));
    let reports = [
        LimitReport::new("a", quota(10, MINUTE), &a),
        LimitReport::new("b", quota(5, MINUTE), &b),
    ];
    let headers = written(
        HeaderStyle::Legacy {
            reset: ResetUnit::DeltaSeconds,
        },
        &reports,
    );
    assert_eq!(text(&headers, X_RATELIMIT_LIMIT), "5");
    assert_eq!(text(&headers, X_RATELIMIT_REMAINING), "2");
    assert_eq!(text(&headers, X_RATELIMIT_RESET), "4");
}

#[test]
fn both_styles_agree_and_none_writes_nothing() {
    let d = decision(false, 0, 3_000, Some(7_100));
    let reports = [LimitReport::new("p", quota(100, MINUTE), &d)];
    let headers = written(HeaderStyle::Both, &reports);
    let r = the_one(field(&headers, &RATELIMIT));
    assert_eq!(text(&headers, X_RATELIMIT_RESET), r.int("t").to_string());
    assert_eq!(
        text(&headers, X_RATELIMIT_REMAINING),
        r.int("r").to_string()
    );
    assert_eq!(r.int("t"), 8);

    assert!(written(HeaderStyle::None, &reports).is_empty());
    assert_eq!(HeaderStyle::default(), HeaderStyle::Ietf);
}

// ---- Retry-After ------------------------------------------------------------------

#[test]
fn retry_after_rounds_up() {
    for (d, secs) in [
        (Duration::ZERO, 0),
        (Duration::from_nanos(1), 1),
        (Duration::from_millis(1), 1),
        (Duration::from_millis(999), 1),
        (Duration::from_secs(1), 1),
        (Duration::from_millis(1_001), 2),
        (Duration::from_secs(3_600), 3_600),
        (Duration::MAX, u64::MAX),
    ] {
        assert_eq!(retry_after_secs(d), secs, "{d:?}");
    }
}

// ---- 429 -------------------------------------------------------------------------------

#[test]
fn too_many_requests_on_the_wire() {
    let d = decision(false, 0, 60_000, Some(1));
    let reports = [LimitReport::new("default", quota(100, MINUTE), &d)];
    let response = too_many_requests(&reports, HeaderStyle::Ietf, now());
    let headers = response.headers();

    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    // A 1 ms wait is "1", never "0" (tower-governor#65).
    assert_eq!(text(headers, RETRY_AFTER), "1");
    assert_eq!(text(headers, CONTENT_TYPE), "application/problem+json");
    assert_eq!(text(headers, CACHE_CONTROL), "no-store");

    let r = the_one(field(headers, &RATELIMIT));
    assert_eq!((r.name(), r.int("r"), r.int("t")), ("default", 0, 60));
    let p = the_one(field(headers, &RATELIMIT_POLICY));
    assert_eq!((p.int("q"), p.int("w")), (100, 60));

    let body = json_body(&response);
    assert_eq!(
        body["type"],
        "https://iana.org/assignments/http-problem-types#quota-exceeded"
    );
    assert_eq!(body["title"], "Too Many Requests");
    assert_eq!(body["status"], 429);
    assert_eq!(body["violated-policies"], serde_json::json!(["default"]));
    let detail = body["detail"].as_str().unwrap();
    assert!(detail.contains("\"default\""), "{detail}");
    assert!(detail.contains("Retry in 1 second."), "{detail}");
}

#[test]
fn too_many_requests_waits_for_every_denying_policy() {
    let burst = denied(Some(1_001));
    let ok = allowed(10, 1_000);
    let hourly = denied(Some(300));
    let reports = [
        LimitReport::new("burst", quota(10, 1_000), &burst),
        LimitReport::new("ok", quota(10, 1_000), &ok),
        LimitReport::new("hourly", quota(1_000, 3_600_000), &hourly),
    ];
    let response = too_many_requests(&reports, HeaderStyle::Ietf, now());
    assert_eq!(text(response.headers(), RETRY_AFTER), "2");
    let body = json_body(&response);
    assert_eq!(
        body["violated-policies"],
        serde_json::json!(["burst", "hourly"])
    );
    assert!(body["detail"]
        .as_str()
        .unwrap()
        .contains("Retry in 2 seconds."));
    assert_eq!(field(response.headers(), &RATELIMIT_POLICY).len(), 3);
}

#[test]
fn too_many_requests_for_a_cost_that_never_fits_has_no_retry_after() {
    let d = Decision::cost_too_high(10, 0, Duration::ZERO);
    let reports = [LimitReport::new("uploads", quota(10, MINUTE), &d)];
    let response = too_many_requests(&reports, HeaderStyle::Ietf, now());
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(!response.headers().contains_key(RETRY_AFTER));
    let detail = json_body(&response)["detail"].as_str().unwrap().to_owned();
    assert!(detail.contains("\"uploads\" (limit 10)"), "{detail}");
    assert!(detail.contains("never"), "{detail}");
}

#[test]
fn too_many_requests_with_legacy_epoch_headers() {
    let d = decision(false, 0, 59_000, Some(2_500));
    let reports = [LimitReport::new("p", quota(100, MINUTE), &d)];
    let response = too_many_requests(
        &reports,
        HeaderStyle::Legacy {
            reset: ResetUnit::EpochSeconds,
        },
        now(),
    );
    let headers = response.headers();
    assert_eq!(text(headers, RETRY_AFTER), "3");
    assert_eq!(text(headers, X_RATELIMIT_RESET), "1700000060");
    assert!(!headers.contains_key(RATELIMIT));
}

// ---- 400 and 503 -------------------------------------------------------------------------

#[test]
fn bad_request_names_the_missing_key() {
    let response = bad_request("no client IP");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        text(response.headers(), CONTENT_TYPE),
        "application/problem+json"
    );
    assert!(no_rate_limit_fields(response.headers()));
    let body = json_body(&response);
    assert_eq!(body["status"], 400);
    assert_eq!(body["title"], "Bad Request");
    assert!(body["detail"].as_str().unwrap().contains("no client IP"));
}

#[test]
fn service_unavailable_says_when_to_come_back() {
    let response = service_unavailable(Some(Duration::from_millis(2_001)));
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(text(response.headers(), RETRY_AFTER), "3");
    assert_eq!(text(response.headers(), CACHE_CONTROL), "no-store");
    let body = json_body(&response);
    assert_eq!(body["status"], 503);
    assert_eq!(body["title"], "Service Unavailable");
    assert!(!service_unavailable(None)
        .headers()
        .contains_key(RETRY_AFTER));
}

// ---- no panics, and always valid structured fields -----------------------------------------

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_input_gives_parseable_fields(
            name in any::<String>(),
            quota in any::<u64>(),
            window_ns in any::<u64>(),
            remaining in any::<u64>(),
            limit in any::<u64>(),
            reset_ns in any::<u64>(),
            retry_ns in proptest::option::of(any::<u64>()),
            allowed in any::<bool>(),
            degraded in any::<bool>(),
        ) {
            let reset = Duration::from_nanos(reset_ns);
            let d = match (allowed, retry_ns) {
                (true, _) => Decision::within_limit(limit, remaining, reset),
                (false, Some(r)) => Decision::over_limit(limit, remaining, reset, Duration::from_nanos(r)),
                (false, None) => Decision::cost_too_high(limit, remaining, reset),
            };
            let d = if degraded { d.mark_degraded() } else { d };
            let p = Quota { units: quota, window: Duration::from_nanos(window_ns) };
            let reports = [LimitReport::new(&name, p, &d)];
            let response = too_many_requests(&reports, HeaderStyle::Both, now());
            let headers = response.headers();
            prop_assert_eq!(headers.contains_key(RATELIMIT), !degraded);
            if !degraded {
                let r = the_one(field(headers, &RATELIMIT));
                prop_assert!(r.int("t") >= 0 && r.int("r") >= 0);
                let p = the_one(field(headers, &RATELIMIT_POLICY));
                prop_assert!(p.int("w") >= 1);
                prop_assert_eq!(p.name(), r.name());
            }
            let body = json_body(&response);
            prop_assert_eq!(body["status"].as_u64(), Some(429));
            #[cfg(feature = "grpc")]
            {
                let grpc = floodgate::response::grpc_resource_exhausted(&reports, HeaderStyle::Both, now());
                prop_assert_eq!(grpc.status(), StatusCode::OK);
                prop_assert!(tonic::Status::from_header_map(grpc.headers()).is_some());
            }
        }
    }
}

// ---- gRPC ---------------------------------------------------------------------------------------

#[cfg(feature = "grpc")]
mod grpc {
    use super::*;
    use floodgate::response::{
        grpc_invalid_argument, grpc_resource_exhausted, grpc_unavailable, is_grpc,
    };
    use http::HeaderValue;
    use tonic::Code;
    use tonic_types::StatusExt;

    fn status_of(response: &http::Response<bytes::Bytes>) -> tonic::Status {
        tonic::Status::from_header_map(response.headers()).expect("no grpc-status")
    }

    fn assert_trailers_only(response: &http::Response<bytes::Bytes>) {
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "never an HTTP error code"
        );
        assert_eq!(text(response.headers(), CONTENT_TYPE), "application/grpc");
        assert!(response.body().is_empty());
        assert!(!response.headers().contains_key(RETRY_AFTER));
    }

    #[test]
    fn detects_grpc_requests() {
        let mut headers = HeaderMap::new();
        assert!(!is_grpc(&headers));
        for (ct, grpc) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("application/grpc-web+proto", true),
            ("application/json", false),
            ("text/plain", false),
        ] {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
            assert_eq!(is_grpc(&headers), grpc, "{ct}");
        }
    }

    #[test]
    fn resource_exhausted_carries_retry_info_and_quota_failure() {
        let burst = denied(Some(1_200));
        let hourly = denied(Some(400));
        let reports = [
            LimitReport::new("burst", quota(10, 1_000), &burst),
            LimitReport::new("hourly", quota(1_000, 3_600_000), &hourly),
        ];
        let response = grpc_resource_exhausted(&reports, HeaderStyle::None, now());
        assert_trailers_only(&response);
        assert_eq!(text(response.headers(), "grpc-status"), "8");
        assert_eq!(text(response.headers(), "grpc-retry-pushback-ms"), "1200");
        assert!(no_rate_limit_fields(response.headers()));

        let status = status_of(&response);
        assert_eq!(status.code(), Code::ResourceExhausted);
        let details = status.check_error_details().expect("details decode");
        assert_eq!(
            details.retry_info().and_then(|r| r.retry_delay),
            Some(Duration::from_millis(1_200))
        );
        let violations = &details.quota_failure().expect("QuotaFailure").violations;
        let got: Vec<_> = violations
            .iter()
            .map(|v| (v.subject.as_str(), v.quota_id.as_str(), v.quota_value))
            .collect();
        assert_eq!(
            got,
            [
                ("policy:burst", "burst", 10),
                ("policy:hourly", "hourly", 1_000)
            ]
        );
        assert!(violations.iter().all(|v| !v.description.is_empty()));
    }

    #[test]
    fn grpc_message_is_percent_encoded() {
        let d = denied(Some(2_000));
        let reports = [LimitReport::new("default", quota(100, MINUTE), &d)];
        let response = grpc_resource_exhausted(&reports, HeaderStyle::None, now());
        let raw = text(response.headers(), "grpc-message");
        assert!(!raw.contains(' ') && !raw.contains('"'), "{raw}");
        assert!(raw.contains("%20") && raw.contains("%22"), "{raw}");
        assert_eq!(
            status_of(&response).message(),
            r#"Rate limit exceeded for policy "default" (limit 100). Retry in 2 seconds."#
        );

        let response = grpc_invalid_argument("no client IP \u{e9}");
        assert_trailers_only(&response);
        let raw = text(response.headers(), "grpc-message");
        assert!(raw.contains("%C3%A9"), "{raw}");
        let status = status_of(&response);
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().ends_with("no client IP \u{e9}."));
    }

    #[test]
    fn never_fitting_cost_has_no_retry_info_and_asks_not_to_retry() {
        let d = denied(None);
        let reports = [LimitReport::new("uploads", quota(10, MINUTE), &d)];
        let response = grpc_resource_exhausted(&reports, HeaderStyle::None, now());
        assert_trailers_only(&response);
        assert_eq!(text(response.headers(), "grpc-retry-pushback-ms"), "-1");
        let details = status_of(&response).check_error_details().unwrap();
        assert!(details.retry_info().is_none());
        assert_eq!(details.quota_failure().unwrap().violations.len(), 1);
        assert!(status_of(&response).message().contains("never"));
    }

    #[test]
    fn rate_limit_fields_ride_along_as_metadata() {
        let d = decision(false, 0, 30_000, Some(5_000));
        let reports = [LimitReport::new("default", quota(100, MINUTE), &d)];
        let response = grpc_resource_exhausted(&reports, HeaderStyle::Ietf, now());
        assert_trailers_only(&response);
        let r = the_one(field(response.headers(), &RATELIMIT));
        assert_eq!((r.int("r"), r.int("t")), (0, 30));
        let status = status_of(&response);
        assert!(status.metadata().get("ratelimit").is_some());
    }

    #[test]
    fn unavailable_and_invalid_argument() {
        let response = grpc_unavailable(Some(Duration::from_micros(1_500)));
        assert_trailers_only(&response);
        assert_eq!(text(response.headers(), "grpc-retry-pushback-ms"), "2");
        let status = status_of(&response);
        assert_eq!(status.code(), Code::Unavailable);
        assert_eq!(
            status
                .get_error_details()
                .retry_info()
                .and_then(|r| r.retry_delay),
            Some(Duration::from_micros(1_500))
        );

        let response = grpc_invalid_argument("no client IP");
        assert_eq!(text(response.headers(), "grpc-status"), "3");
        assert!(!response.headers().contains_key("grpc-status-details-bin"));
    }
}
