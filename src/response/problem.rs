//! HTTP rejections: RFC 9457 `application/problem+json` responses.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::{json, Value};

use super::denial::{Denial, Retry};
use crate::headers::{retry_after_secs, write_headers_at, HeaderStyle, LimitReport};

/// The `type` of a 429, registered by the rate-limit headers draft.
pub const QUOTA_EXCEEDED_TYPE: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// `application/problem+json` (RFC 9457).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// A `429 Too Many Requests` for a request some of `reports` denied.
///
/// - `Retry-After`: the latest retry time of the denying limits, in whole
///   seconds rounded up. Left out when a denying limit can never admit the
///   request (its cost exceeds the limit), as waiting would not help.
/// - The rate-limit fields of `style` (see
///   [`write_headers_at`](crate::headers::write_headers_at)), with `now` as
///   the time for epoch resets.
/// - `Cache-Control: no-store`: RFC 6585 forbids caching a 429.
/// - An RFC 9457 body of type [`QUOTA_EXCEEDED_TYPE`] whose
///   `violated-policies` names the denying policies and whose `detail` says
///   how long to wait.
///
/// Denials by degraded decisions count for `Retry-After` and the body (they
/// are why the request is rejected) but write no rate-limit fields.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use floodgate::algorithm::Quota;
/// use floodgate::headers::{HeaderStyle, LimitReport};
/// use floodgate::response::too_many_requests;
/// use floodgate::Decision;
///
/// let decision = Decision::over_limit(100, 0, Duration::from_secs(60), Duration::from_millis(4_200));
/// let quota = Quota { units: 100, window: Duration::from_secs(60) };
/// let reports = [LimitReport::new("default", quota, &decision)];
///
/// let response = too_many_requests(&reports, HeaderStyle::Ietf, SystemTime::now());
/// assert_eq!(response.status(), 429);
/// assert_eq!(response.headers()["retry-after"], "5");
/// assert_eq!(response.headers()["ratelimit"], r#""default";r=0;t=60"#);
/// let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
/// assert_eq!(body["violated-policies"][0], "default");
/// ```
pub fn too_many_requests(
    reports: &[LimitReport<'_>],
    style: HeaderStyle,
    now: SystemTime,
) -> Response<Bytes> {
    quota_exceeded(&Denial::of(reports), reports, style, now)
}

/// The 429 of `denial` (of `reports`).
fn quota_exceeded(
    denial: &Denial<'_, '_>,
    reports: &[LimitReport<'_>],
    style: HeaderStyle,
    now: SystemTime,
) -> Response<Bytes> {
    let mut response = problem(
        StatusCode::TOO_MANY_REQUESTS,
        &json!({
            "type": QUOTA_EXCEEDED_TYPE,
            "title": "Too Many Requests",
            "status": 429,
            "detail": denial.detail(),
            "violated-policies": denial.violated(),
        }),
    );
    let headers = response.headers_mut();
    if let Retry::After(d) = denial.retry {
        set_retry_after(headers, d);
    }
    write_headers_at(style, reports, now, headers);
    response
}

/// A `400 Bad Request` for a request no rate-limit key could be extracted
/// from; `reason` says why, e.g. `"no client IP"`.
///
/// ```
/// use floodgate::response::bad_request;
///
/// let response = bad_request("no client IP");
/// assert_eq!(response.status(), 400);
/// let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
/// assert_eq!(
///     body["detail"],
///     "No rate-limit key could be extracted from the request: no client IP."
/// );
/// ```
pub fn bad_request(reason: &str) -> Response<Bytes> {
    let body = json!({
        "type": "about:blank",
        "title": "Bad Request",
        "status": 400,
        "detail": format!("No rate-limit key could be extracted from the request: {reason}."),
    });
    problem(StatusCode::BAD_REQUEST, &body)
}

/// A `503 Service Unavailable` for a fail-closed limiter whose store is
/// unreachable. `Retry-After` is sent when `retry_after` is a non-zero time.
///
/// ```
/// use std::time::Duration;
/// use floodgate::response::service_unavailable;
///
/// let response = service_unavailable(Some(Duration::from_millis(1_500)));
/// assert_eq!(response.status(), 503);
/// assert_eq!(response.headers()["retry-after"], "2");
/// ```
pub fn service_unavailable(retry_after: Option<Duration>) -> Response<Bytes> {
    let body = json!({
        "type": "about:blank",
        "title": "Service Unavailable",
        "status": 503,
        "detail": super::UNAVAILABLE_DETAIL,
    });
    let mut response = problem(StatusCode::SERVICE_UNAVAILABLE, &body);
    if let Some(d) = retry_after.filter(|d| !d.is_zero()) {
        set_retry_after(response.headers_mut(), d);
    }
    response
}

/// A `403 Forbidden` for a request whose key is on the deny list of the
/// limiter's [`Exemptions`](crate::Exemptions): refused whatever the
/// limits, so no `Retry-After` and no rate-limit fields.
///
/// ```
/// use floodgate::response::forbidden;
///
/// let response = forbidden();
/// assert_eq!(response.status(), 403);
/// assert_eq!(response.headers()["content-type"], "application/problem+json");
/// assert!(!response.headers().contains_key("retry-after"));
/// let body: serde_json::Value = serde_json::from_slice(response.body()).unwrap();
/// assert_eq!(body["status"], 403);
/// ```
pub fn forbidden() -> Response<Bytes> {
    let body = json!({
        "type": "about:blank",
        "title": "Forbidden",
        "status": 403,
        "detail": super::BLOCKED_DETAIL,
    });
    problem(StatusCode::FORBIDDEN, &body)
}

/// A problem+json response that no cache keeps: every rejection depends on
/// the moment it was made.
fn problem(status: StatusCode, body: &Value) -> Response<Bytes> {
    // Serializing a `Value` cannot fail; an empty body beats a panic anyway.
    let body = serde_json::to_vec(body).unwrap_or_default();
    let mut response = Response::new(Bytes::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn set_retry_after(headers: &mut HeaderMap, d: Duration) {
    headers.insert(RETRY_AFTER, HeaderValue::from(retry_after_secs(d)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Quota;
    use crate::Decision;

    const QUOTA: Quota = Quota {
        units: 10,
        window: Duration::from_secs(1),
    };

    fn denied(retry: Option<Duration>, degraded: bool) -> Decision {
        let reset = Duration::from_secs(1);
        let d = match retry {
            Some(r) => Decision::over_limit(10, 0, reset, r),
            None => Decision::cost_too_high(10, 0, reset),
        };
        if degraded {
            d.mark_degraded()
        } else {
            d
        }
    }

    fn body(response: &Response<Bytes>) -> Value {
        serde_json::from_slice(response.body()).unwrap()
    }

    #[test]
    fn degraded_denial_has_retry_after_but_no_ratelimit_fields() {
        let d = denied(Some(Duration::from_millis(10)), true);
        let reports = [LimitReport::new("p", QUOTA, &d)];
        let response = too_many_requests(&reports, HeaderStyle::Both, SystemTime::now());
        let headers = response.headers();
        assert_eq!(headers[RETRY_AFTER], "1");
        assert!(!headers.contains_key("ratelimit"));
        assert!(!headers.contains_key("x-ratelimit-limit"));
        assert_eq!(body(&response)["violated-policies"], json!(["p"]));
    }

    #[test]
    fn no_denial_still_gives_a_valid_429() {
        let response = too_many_requests(&[], HeaderStyle::Ietf, SystemTime::now());
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(!response.headers().contains_key(RETRY_AFTER));
        assert_eq!(body(&response)["violated-policies"], json!([]));
    }

    #[test]
    fn reason_is_json_escaped() {
        let response = bad_request("header \"x-user\"\nmissing \u{e9}");
        assert_eq!(
            body(&response)["detail"],
            "No rate-limit key could be extracted from the request: header \"x-user\"\nmissing \u{e9}."
        );
    }

    #[test]
    fn zero_or_no_retry_means_no_retry_after() {
        assert!(!service_unavailable(None)
            .headers()
            .contains_key(RETRY_AFTER));
        assert!(!service_unavailable(Some(Duration::ZERO))
            .headers()
            .contains_key(RETRY_AFTER));
    }
}
