//! `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11).
//!
//! Written by hand rather than through a structured-field serializer: the
//! fields are on every admitted response, and their grammar here is small
//! (a String and two Integer parameters per item). The tests check the
//! output against `sfv`'s serializer and parser.

use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;

use super::report::{ceil_secs, most_restrictive, LimitReport};

/// RFC 9651 Integers stop at 15 digits.
const MAX_INTEGER: u64 = 999_999_999_999_999;

/// `"name";q=<quota>;w=<window>` for each non-degraded report, in order.
pub(crate) fn policy_field(reports: &[LimitReport<'_>]) -> Option<HeaderValue> {
    let mut buf = Vec::new();
    for report in reports.iter().filter(|r| !r.decision.is_degraded()) {
        if !buf.is_empty() {
            buf.extend_from_slice(b", ");
        }
        let window = window_secs(report.quota.window);
        push_item(
            &mut buf,
            report.name,
            (b'q', report.quota.units),
            (b'w', window),
        );
    }
    header_value(buf)
}

/// `"name";r=<remaining>;t=<seconds>` for the most restrictive report.
pub(crate) fn limit_field(reports: &[LimitReport<'_>]) -> Option<HeaderValue> {
    let report = most_restrictive(reports)?;
    let (r, t) = (report.decision.remaining(), ceil_secs(report.wait()));
    let name = report.name;
    if name.bytes().all(plain) {
        // The usual name, nothing to escape: written once, into a buffer of
        // its exact length, which the value then takes without a copy (a
        // `Vec` with room to spare would cost `Bytes` a second allocation).
        let mut digits = (itoa::Buffer::new(), itoa::Buffer::new());
        let (r, t) = (
            digits.0.format(r.min(MAX_INTEGER)),
            digits.1.format(t.min(MAX_INTEGER)),
        );
        let mut buf = Vec::with_capacity(name.len() + r.len() + t.len() + 8);
        for part in [
            b"\"",
            name.as_bytes(),
            b"\";r=",
            r.as_bytes(),
            b";t=",
            t.as_bytes(),
        ] {
            buf.extend_from_slice(part);
        }
        return header_value(buf);
    }
    let mut buf = Vec::new();
    push_item(&mut buf, name, (b'r', r), (b't', t));
    header_value(buf)
}

/// Printable ASCII other than `"` and `\`: a name byte written as is.
fn plain(b: u8) -> bool {
    matches!(b, b'\x20'..=b'\x7e') && b != b'"' && b != b'\\'
}

/// One list item: the name as an RFC 9651 String (sanitized as
/// [`LimitReport`] documents, `"` and `\` escaped), then two Integer
/// parameters, saturated at 15 digits.
fn push_item(buf: &mut Vec<u8>, name: &str, a: (u8, u64), b: (u8, u64)) {
    buf.extend_from_slice(b"\"");
    if name.bytes().all(plain) {
        // The usual name: nothing to escape or replace.
        buf.extend_from_slice(name.as_bytes());
    } else {
        for c in name.chars() {
            match c {
                '"' | '\\' => buf.extend_from_slice(&[b'\\', c as u8]),
                '\x20'..='\x7e' => buf.extend_from_slice(&[c as u8]),
                _ => buf.extend_from_slice(b"_"),
            }
        }
    }
    buf.extend_from_slice(b"\"");
    let mut digits = itoa::Buffer::new();
    for (key, value) in [a, b] {
        buf.extend_from_slice(&[b';', key, b'=']);
        buf.extend_from_slice(digits.format(value.min(MAX_INTEGER)).as_bytes());
    }
}

/// `w` must be a non-zero number of whole seconds.
fn window_secs(window: Duration) -> u64 {
    ceil_secs(window).max(1)
}

fn header_value(buf: Vec<u8>) -> Option<HeaderValue> {
    if buf.is_empty() {
        return None;
    }
    // Printable ASCII only, so this does not fail; `Bytes` takes the `Vec`
    // without copying it.
    HeaderValue::from_maybe_shared(Bytes::from(buf)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quota;
    use crate::{Decision, Reason};
    use proptest::prelude::*;

    fn decision(remaining: u64, reset: Duration) -> Decision {
        Decision::new(
            Reason::WithinLimit,
            100,
            remaining,
            reset,
            None,
            Duration::ZERO,
        )
    }

    fn quota(units: u64, window: Duration) -> Quota {
        Quota { units, window }
    }

    #[test]
    fn writes_the_drafts_example() {
        let burst = decision(50, Duration::from_secs(30));
        let daily = decision(900, Duration::from_secs(80_000));
        let reports = [
            LimitReport::new("burst", quota(100, Duration::from_secs(60)), &burst),
            LimitReport::new("daily", quota(1000, Duration::from_secs(86_400)), &daily),
        ];
        assert_eq!(
            policy_field(&reports).unwrap(),
            r#""burst";q=100;w=60, "daily";q=1000;w=86400"#
        );
        assert_eq!(limit_field(&reports).unwrap(), r#""burst";r=50;t=30"#);
    }

    #[test]
    fn window_is_whole_non_zero_seconds() {
        for (ms, secs) in [(0, 1), (1, 1), (1_500, 2), (60_000, 60)] {
            assert_eq!(window_secs(Duration::from_millis(ms)), secs, "{ms} ms");
        }
    }

    #[test]
    fn huge_values_saturate() {
        let d = decision(u64::MAX, Duration::MAX);
        let reports = [LimitReport::new("x", quota(u64::MAX, Duration::MAX), &d)];
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
        let p = quota(1, Duration::from_secs(1));
        let reports = [
            LimitReport::new("a\"b\\c", p, &d),
            LimitReport::new("\u{e9}\r\n", p, &d),
            LimitReport::new("", p, &d),
        ];
        assert_eq!(
            policy_field(&reports).unwrap(),
            r#""a\"b\\c";q=1;w=1, "___";q=1;w=1, "";q=1;w=1"#
        );
    }

    #[test]
    fn long_names_are_written_whole() {
        let d = decision(7, Duration::from_secs(2));
        let p = quota(1, Duration::from_secs(1));
        for len in [53, 54, 60, 200] {
            let name = "\"".repeat(len);
            let reports = [LimitReport::new(&name, p, &d)];
            let expected = format!("\"{}\";r=7;t=2", "\\\"".repeat(len));
            assert_eq!(limit_field(&reports).unwrap(), expected.as_str());
        }
    }

    #[test]
    fn nothing_to_report_writes_nothing() {
        assert!(policy_field(&[]).is_none());
        assert!(limit_field(&[]).is_none());
        let d = decision(1, Duration::ZERO).mark_degraded();
        let reports = [LimitReport::new("a", quota(1, Duration::from_secs(1)), &d)];
        assert!(policy_field(&reports).is_none());
        assert!(limit_field(&reports).is_none());
    }

    /// The fields as `sfv`'s serializer writes them (what floodgate sent
    /// before writing them by hand).
    /// A name and two parameters.
    type Item<'a> = (&'a str, (&'a str, u64), (&'a str, u64));

    fn sfv_field(items: &[Item<'_>]) -> Option<String> {
        use sfv::{Integer, KeyRef, ListSerializer, StringRef};
        let int = |v: u64| Integer::try_from(v).unwrap_or(Integer::MAX);
        let mut list = ListSerializer::new();
        for (name, (k1, v1), (k2, v2)) in items {
            let name = crate::headers::report::sanitize_name(name);
            let _ = list
                .bare_item(StringRef::from_str(&name).unwrap())
                .parameter(KeyRef::from_str(k1).unwrap(), int(*v1))
                .parameter(KeyRef::from_str(k2).unwrap(), int(*v2));
        }
        list.finish()
    }

    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_]{0,12}",
            "[ -~]{0,16}",
            "[ -~]{40,90}",
            any::<String>(),
            Just("\"\\\"".to_owned()),
        ]
    }

    fn number() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..1_000,
            Just(MAX_INTEGER),
            Just(MAX_INTEGER + 1),
            any::<u64>(),
        ]
    }

    proptest! {
        #[test]
        fn matches_sfv(
            items in prop::collection::vec((name(), number(), number(), number(), 0u64..u64::MAX), 1..4),
        ) {
            let decisions: Vec<Decision> = items
                .iter()
                .map(|(_, _, _, remaining, reset)| decision(*remaining, Duration::from_millis(*reset)))
                .collect();
            let reports: Vec<LimitReport<'_>> = items
                .iter()
                .zip(&decisions)
                .map(|((name, units, window, _, _), d)| {
                    LimitReport::new(name, quota(*units, Duration::from_secs(*window)), d)
                })
                .collect();

            let expected: Vec<_> = reports
                .iter()
                .map(|r| (r.name, ("q", r.quota.units), ("w", window_secs(r.quota.window))))
                .collect();
            let ours = policy_field(&reports).unwrap();
            prop_assert_eq!(ours.to_str().unwrap(), sfv_field(&expected).unwrap());

            let r = most_restrictive(&reports).unwrap();
            let expected = [(r.name, ("r", r.decision.remaining()), ("t", ceil_secs(r.wait())))];
            let ours = limit_field(&reports).unwrap();
            prop_assert_eq!(ours.to_str().unwrap(), sfv_field(&expected).unwrap());

            // And sfv reads it back as one item per report.
            let parsed: sfv::List = sfv::Parser::new(ours.as_bytes()).parse().unwrap();
            prop_assert_eq!(parsed.len(), 1);
            let sfv::ListEntry::Item(item) = &parsed[0] else {
                panic!("not an item");
            };
            let wire = crate::headers::report::sanitize_name(r.name);
            prop_assert_eq!(item.bare_item.as_string().map(sfv::StringRef::as_str), Some(&*wire));
            let remaining = item.params.get("r").and_then(sfv::BareItem::as_integer).map(i64::from);
            prop_assert_eq!(remaining, Some(r.decision.remaining().min(MAX_INTEGER).cast_signed()));
        }
    }
}
