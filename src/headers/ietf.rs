//! `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11).

use std::time::Duration;

use http::HeaderValue;
use sfv::{key_ref, Integer, KeyRef, ListSerializer, StringRef};

use super::report::{ceil_secs, most_restrictive, PolicyReport};

const Q: &KeyRef = key_ref("q");
const W: &KeyRef = key_ref("w");
const R: &KeyRef = key_ref("r");
const T: &KeyRef = key_ref("t");

/// `"name";q=<quota>;w=<window>` for each non-degraded report, in order.
pub(crate) fn policy_field(reports: &[PolicyReport<'_>]) -> Option<HeaderValue> {
    let mut list = ListSerializer::new();
    for report in reports.iter().filter(|r| !r.decision.degraded) {
        let name = report.wire_name();
        let Ok(name) = StringRef::from_str(&name) else {
            continue;
        };
        let _ = list
            .bare_item(name)
            .parameter(Q, integer(report.policy.quota))
            .parameter(W, integer(window_secs(report.policy.window)));
    }
    header_value(list.finish()?)
}

/// `"name";r=<remaining>;t=<seconds>` for the most restrictive report.
pub(crate) fn limit_field(reports: &[PolicyReport<'_>]) -> Option<HeaderValue> {
    let report = most_restrictive(reports)?;
    let name = report.wire_name();
    let name = StringRef::from_str(&name).ok()?;
    let mut list = ListSerializer::new();
    let _ = list
        .bare_item(name)
        .parameter(R, integer(report.decision.remaining))
        .parameter(T, integer(ceil_secs(report.wait())));
    header_value(list.finish()?)
}

/// `w` must be a non-zero number of whole seconds.
fn window_secs(window: Duration) -> u64 {
    ceil_secs(window).max(1)
}

/// RFC 9651 integers stop at 15 digits; larger values saturate rather than
/// make the whole field invalid.
fn integer(v: u64) -> Integer {
    Integer::try_from(v).unwrap_or(Integer::MAX)
}

fn header_value(s: String) -> Option<HeaderValue> {
    // sfv writes printable ASCII only, so this does not fail.
    HeaderValue::try_from(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Policy;
    use crate::Decision;

    fn decision(remaining: u64, reset: Duration) -> Decision {
        Decision {
            allowed: true,
            limit: 100,
            remaining,
            reset_after: reset,
            retry_after: None,
            delay: Duration::ZERO,
            degraded: false,
        }
    }

    fn policy(quota: u64, window: Duration) -> Policy {
        Policy { quota, window }
    }

    #[test]
    fn writes_the_drafts_example() {
        let burst = decision(50, Duration::from_secs(30));
        let daily = decision(900, Duration::from_secs(80_000));
        let reports = [
            PolicyReport::new("burst", policy(100, Duration::from_secs(60)), &burst),
            PolicyReport::new("daily", policy(1000, Duration::from_secs(86_400)), &daily),
        ];
        assert_eq!(
            policy_field(&reports).unwrap(),
            r#""burst";q=100;w=60, "daily";q=1000;w=86400"#
        );
        assert_eq!(limit_field(&reports).unwrap(), r#""burst";r=50;t=30"#);
    }

    #[test]
    fn window_is_whole_non_zero_seconds() {
        assert_eq!(window_secs(Duration::ZERO), 1);
        assert_eq!(window_secs(Duration::from_millis(1)), 1);
        assert_eq!(window_secs(Duration::from_millis(1_500)), 2);
        assert_eq!(window_secs(Duration::from_secs(60)), 60);
    }

    #[test]
    fn huge_values_saturate() {
        let d = decision(u64::MAX, Duration::MAX);
        let reports = [PolicyReport::new("x", policy(u64::MAX, Duration::MAX), &d)];
        assert_eq!(
            policy_field(&reports).unwrap(),
            r#""x";q=999999999999999;w=999999999999999"#
        );
        assert_eq!(
            limit_field(&reports).unwrap(),
            r#""x";r=999999999999999;t=999999999999999"#
        );
    }

    #[test]
    fn escapes_and_sanitizes_names() {
        let d = decision(1, Duration::ZERO);
        let p = policy(1, Duration::from_secs(1));
        let reports = [
            PolicyReport::new("a\"b\\c", p, &d),
            PolicyReport::new("\u{e9}\r\n", p, &d),
            PolicyReport::new("", p, &d),
        ];
        assert_eq!(
            policy_field(&reports).unwrap(),
            r#""a\"b\\c";q=1;w=1, "___";q=1;w=1, "";q=1;w=1"#
        );
    }

    #[test]
    fn nothing_to_report_writes_nothing() {
        assert!(policy_field(&[]).is_none());
        assert!(limit_field(&[]).is_none());
        let mut d = decision(1, Duration::ZERO);
        d.degraded = true;
        let reports = [PolicyReport::new(
            "a",
            policy(1, Duration::from_secs(1)),
            &d,
        )];
        assert!(policy_field(&reports).is_none());
        assert!(limit_field(&reports).is_none());
    }
}
