//! The rate-limit header fields floodgate writes on responses.
//!
//! [`write_headers`] renders the decisions of a request's limits in the
//! chosen [`HeaderStyle`]: the IETF `RateLimit-Policy` / `RateLimit` fields
//! (draft-ietf-httpapi-ratelimit-headers-11), the legacy `X-RateLimit-*`
//! fields, both, or none.
//!
//! ```
//! use std::time::Duration;
//! use floodgate::algorithm::Quota;
//! use floodgate::headers::{write_headers, HeaderStyle, LimitReport};
//! use floodgate::Decision;
//!
//! let decision = Decision::within_limit(100, 42, Duration::from_millis(16_200));
//! let quota = Quota { units: 100, window: Duration::from_secs(60) };
//! let reports = [LimitReport::new("api", quota, &decision)];
//!
//! let mut headers = http::HeaderMap::new();
//! write_headers(HeaderStyle::Ietf, &reports, &mut headers);
//! assert_eq!(headers["ratelimit-policy"], r#""api";q=100;w=60"#);
//! assert_eq!(headers["ratelimit"], r#""api";r=42;t=17"#);
//! ```
//!
//! Degraded decisions (made by a failure policy while the store was
//! unreachable) are left out: their numbers are not the shared state.
//! Nothing here panics, whatever the names and numbers.

mod fields;
mod ietf;
mod kept;
mod legacy;
mod report;
mod style;
mod values;

use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName, HeaderValue};

pub use report::LimitReport;
pub use style::{HeaderStyle, ResetUnit};

pub(crate) use fields::{FieldSink, Prepared};
pub(crate) use kept::Kept;
pub(crate) use report::ceil_secs;
pub(crate) use values::LimitValues;

/// `RateLimit-Policy`: the quota and window of every policy.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`: what is left of the most restrictive limit.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `X-RateLimit-Limit`.
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`.
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset`, in the unit of [`ResetUnit`].
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Writes the rate-limit fields of `reports` in `style`, reading the clock
/// only for [`ResetUnit::EpochSeconds`].
///
/// See [`write_headers_at`].
pub fn write_headers(style: HeaderStyle, reports: &[LimitReport<'_>], headers: &mut HeaderMap) {
    write_headers_at(style, reports, SystemTime::now(), headers);
}

/// Writes the rate-limit fields of `reports` in `style`, with `now` as the
/// current time for epoch resets.
///
/// - `RateLimit-Policy` lists every report, in order.
/// - `RateLimit` and `X-RateLimit-*` describe the most restrictive report: a
///   denial before an admission, then the fewest remaining, then the longest
///   wait. Their reset (`t`) is the time until the quota is back in full or,
///   for a denial, until the retry if that is later; in seconds, rounded up.
/// - Degraded reports are skipped; when none is left nothing is written.
///
/// The IETF fields are lists, so they are *appended*: a response that already
/// carries them (from an inner limiter) keeps its items, and the field lines
/// combine into one list. The legacy fields are single numbers and are
/// replaced.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use floodgate::algorithm::Quota;
/// use floodgate::headers::{write_headers_at, HeaderStyle, LimitReport, ResetUnit};
/// use floodgate::Decision;
///
/// let decision = Decision::over_limit(100, 0, Duration::from_secs(30), Duration::from_millis(500));
/// let quota = Quota { units: 100, window: Duration::from_secs(60) };
/// let reports = [LimitReport::new("api", quota, &decision)];
/// let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
///
/// let mut headers = http::HeaderMap::new();
/// let style = HeaderStyle::Legacy { reset: ResetUnit::EpochSeconds };
/// write_headers_at(style, &reports, now, &mut headers);
/// assert_eq!(headers["x-ratelimit-limit"], "100");
/// assert_eq!(headers["x-ratelimit-remaining"], "0");
/// assert_eq!(headers["x-ratelimit-reset"], "1700000030");
/// ```
pub fn write_headers_at(
    style: HeaderStyle,
    reports: &[LimitReport<'_>],
    now: SystemTime,
    headers: &mut HeaderMap,
) {
    write_with_policy(style, reports, now, headers, None, None);
}

/// [`write_headers_at`] into `headers` (a response's, or the fields
/// prepared for one), with `RateLimit-Policy` already built for `reports`
/// when none is degraded (it only changes with the quota, so the layer
/// builds it once), and the `RateLimit` values of the layer's own limit
/// kept in `values`.
pub(crate) fn write_with_policy(
    style: HeaderStyle,
    reports: &[LimitReport<'_>],
    now: SystemTime,
    headers: &mut impl FieldSink,
    policy: Option<&Kept>,
    values: Option<&LimitValues>,
) {
    match style {
        HeaderStyle::Ietf => write_ietf(reports, headers, policy, values),
        HeaderStyle::Legacy { reset } => legacy::write(reset, reports, now, headers),
        HeaderStyle::Both => {
            write_ietf(reports, headers, policy, values);
            legacy::write(ResetUnit::DeltaSeconds, reports, now, headers);
        }
        HeaderStyle::None => {}
    }
}

/// The `RateLimit-Policy` value of `reports`, if any is not degraded.
pub(crate) fn policy_field(reports: &[LimitReport<'_>]) -> Option<HeaderValue> {
    ietf::policy_field(reports)
}

fn write_ietf(
    reports: &[LimitReport<'_>],
    headers: &mut impl FieldSink,
    policy: Option<&Kept>,
    values: Option<&LimitValues>,
) {
    let policy = match policy {
        Some(v) if !reports.is_empty() && reports.iter().all(|r| !r.decision.is_degraded()) => {
            Some(v.get())
        }
        _ => ietf::policy_field(reports),
    };
    let limit = values.and_then(|v| v.get(reports));
    headers.ietf(policy, limit.or_else(|| ietf::limit_field(reports)));
}

/// Whole seconds for `Retry-After`, rounded **up**: never `0` while `d > 0`,
/// so a client that waits the advertised time is never early.
///
/// ```
/// use std::time::Duration;
/// use floodgate::headers::retry_after_secs;
///
/// assert_eq!(retry_after_secs(Duration::ZERO), 0);
/// assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
/// assert_eq!(retry_after_secs(Duration::from_millis(1_000)), 1);
/// assert_eq!(retry_after_secs(Duration::from_millis(1_001)), 2);
/// ```
pub fn retry_after_secs(d: Duration) -> u64 {
    ceil_secs(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Decision;
    use crate::Quota;

    fn decision(degraded: bool) -> Decision {
        let d = Decision::within_limit(10, 4, Duration::from_millis(2_500));
        if degraded {
            d.mark_degraded()
        } else {
            d
        }
    }

    const QUOTA: Quota = Quota {
        units: 10,
        window: Duration::from_secs(10),
    };

    fn written(style: HeaderStyle, reports: &[LimitReport<'_>]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        write_headers_at(style, reports, SystemTime::UNIX_EPOCH, &mut headers);
        headers
    }

    #[test]
    fn both_writes_ietf_and_delta_legacy() {
        let d = decision(false);
        let h = written(HeaderStyle::Both, &[LimitReport::new("p", QUOTA, &d)]);
        assert_eq!(h[RATELIMIT], r#""p";r=4;t=3"#);
        assert_eq!(h[RATELIMIT_POLICY], r#""p";q=10;w=10"#);
        assert_eq!(h[X_RATELIMIT_LIMIT], "10");
        assert_eq!(h[X_RATELIMIT_REMAINING], "4");
        assert_eq!(h[X_RATELIMIT_RESET], "3");
        assert_eq!(h.len(), 5);
    }

    #[test]
    fn none_and_degraded_write_nothing() {
        let ok = decision(false);
        let bad = decision(true);
        assert!(written(HeaderStyle::None, &[LimitReport::new("p", QUOTA, &ok)]).is_empty());
        assert!(written(HeaderStyle::Both, &[LimitReport::new("p", QUOTA, &bad)]).is_empty());
        assert!(written(HeaderStyle::Both, &[]).is_empty());
    }

    #[test]
    fn ietf_fields_append_to_an_inner_limiters() {
        let d = decision(false);
        let mut h = written(HeaderStyle::Ietf, &[LimitReport::new("inner", QUOTA, &d)]);
        write_headers_at(
            HeaderStyle::Ietf,
            &[LimitReport::new("outer", QUOTA, &d)],
            SystemTime::UNIX_EPOCH,
            &mut h,
        );
        assert_eq!(h.get_all(RATELIMIT).iter().count(), 2);
        assert_eq!(h.get_all(RATELIMIT_POLICY).iter().count(), 2);
    }
}
