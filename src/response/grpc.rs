//! gRPC rejections: Trailers-Only responses with `google.rpc` details.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, QuotaViolation, StatusExt};

use super::denial::{ceil_millis, Denial, Retry};
use crate::headers::{write_headers_at, HeaderStyle, LimitReport};

const GRPC_CONTENT_TYPE: &str = "application/grpc";
/// gRFC A6 server pushback: when a client's retry policy retries this
/// status, it waits this long; a negative value tells it not to retry.
const RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// Whether a request comes from a gRPC client: its `content-type` is
/// `application/grpc`, possibly with a `+format` suffix (`+proto`, `+json`),
/// a `-web` variant (gRPC-Web) or parameters. Case-insensitive.
///
/// ```
/// use floodgate::response::is_grpc;
/// use http::{header::CONTENT_TYPE, HeaderMap, HeaderValue};
///
/// let mut headers = HeaderMap::new();
/// headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc+proto"));
/// assert!(is_grpc(&headers));
/// headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
/// assert!(!is_grpc(&headers));
/// ```
pub fn is_grpc(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return false;
    };
    let value = value.as_bytes();
    let prefix = GRPC_CONTENT_TYPE.as_bytes();
    let Some(head) = value.get(..prefix.len()) else {
        return false;
    };
    // The boundary check keeps `application/grpcfoo` out.
    head.eq_ignore_ascii_case(prefix)
        && matches!(
            value.get(prefix.len()),
            None | Some(b'+' | b'-' | b';' | b' ')
        )
}

/// A `RESOURCE_EXHAUSTED` (code 8) Trailers-Only response for a request some
/// of `reports` denied: HTTP 200, `content-type: application/grpc`,
/// `grpc-status: 8`, a percent-encoded `grpc-message` saying how long to wait,
/// and `grpc-status-details-bin` holding a `google.rpc.Status` with
///
/// - `RetryInfo { retry_delay }`: the latest retry time of the denying
///   limits; left out when a denying limit can never admit the request;
/// - `QuotaFailure`: one violation per denying limit, with subject
///   `policy:<name>`, `quota_id` the name and `quota_value` its quota.
///
/// It also carries `grpc-retry-pushback-ms` (the same delay in milliseconds
/// rounded up, or `-1` when the request can never be admitted), and the
/// rate-limit fields of `style` as metadata (`HeaderStyle::None` to omit
/// them). The body is empty.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use floodgate::algorithm::Quota;
/// use floodgate::headers::{HeaderStyle, LimitReport};
/// use floodgate::response::grpc_resource_exhausted;
/// use floodgate::Decision;
///
/// let decision = Decision::over_limit(10, 0, Duration::from_secs(1), Duration::from_millis(250));
/// let quota = Quota { units: 10, window: Duration::from_secs(1) };
/// let reports = [LimitReport::new("default", quota, &decision)];
///
/// let response = grpc_resource_exhausted(&reports, HeaderStyle::None, SystemTime::now());
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.headers()["grpc-status"], "8");
/// assert_eq!(response.headers()["grpc-retry-pushback-ms"], "250");
/// assert!(response.body().is_empty());
/// ```
pub fn grpc_resource_exhausted(
    reports: &[LimitReport<'_>],
    style: HeaderStyle,
    now: SystemTime,
) -> Response<Bytes> {
    let denial = Denial::of(reports);
    let mut details = ErrorDetails::new();
    if let Retry::After(d) = denial.retry {
        details.set_retry_info(Some(d));
    }
    let violations: Vec<_> = denial
        .denied
        .iter()
        .map(|r| {
            let name = r.wire_name();
            QuotaViolation {
                subject: format!("policy:{name}"),
                description: format!(
                    "{} requests per {} s exceeded",
                    r.quota.units,
                    crate::headers::ceil_secs(r.quota.window).max(1)
                ),
                quota_id: name.into_owned(),
                quota_value: i64::try_from(r.quota.units).unwrap_or(i64::MAX),
                ..QuotaViolation::default()
            }
        })
        .collect();
    if !violations.is_empty() {
        details.set_quota_failure(violations);
    }
    let status = Status::with_error_details(Code::ResourceExhausted, denial.detail(), details);
    let pushback = match denial.retry {
        Retry::After(d) => Some(HeaderValue::from(ceil_millis(d))),
        Retry::Never => Some(HeaderValue::from_static("-1")),
        Retry::Unknown => None,
    };
    let mut response = trailers_only(&status, pushback);
    write_headers_at(style, reports, now, response.headers_mut());
    response
}

/// An `INVALID_ARGUMENT` Trailers-Only response for a request no rate-limit
/// key could be extracted from; `reason` says why, e.g. `"no client IP"`.
///
/// ```
/// use floodgate::response::grpc_invalid_argument;
///
/// let response = grpc_invalid_argument("no client IP");
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.headers()["grpc-status"], "3");
/// ```
pub fn grpc_invalid_argument(reason: &str) -> Response<Bytes> {
    let message = format!("No rate-limit key could be extracted from the request: {reason}.");
    trailers_only(&Status::invalid_argument(message), None)
}

/// An `UNAVAILABLE` Trailers-Only response for a fail-closed limiter whose
/// store is unreachable. A non-zero `retry_after` goes into `RetryInfo` and
/// `grpc-retry-pushback-ms`.
///
/// ```
/// use std::time::Duration;
/// use floodgate::response::grpc_unavailable;
///
/// let response = grpc_unavailable(Some(Duration::from_secs(1)));
/// assert_eq!(response.headers()["grpc-status"], "14");
/// assert_eq!(response.headers()["grpc-retry-pushback-ms"], "1000");
/// ```
pub fn grpc_unavailable(retry_after: Option<Duration>) -> Response<Bytes> {
    let retry_after = retry_after.filter(|d| !d.is_zero());
    let status = match retry_after {
        Some(d) => Status::with_error_details(
            Code::Unavailable,
            super::UNAVAILABLE_DETAIL,
            ErrorDetails::with_retry_info(Some(d)),
        ),
        None => Status::unavailable(super::UNAVAILABLE_DETAIL),
    };
    let pushback = retry_after.map(|d| HeaderValue::from(ceil_millis(d)));
    trailers_only(&status, pushback)
}

/// A `PERMISSION_DENIED` Trailers-Only response for a request whose key is
/// on the deny list of the limiter's [`Exemptions`](crate::Exemptions): no
/// retry would help, so no `RetryInfo`.
///
/// ```
/// use floodgate::response::grpc_permission_denied;
///
/// let response = grpc_permission_denied();
/// assert_eq!(response.status(), 200);
/// assert_eq!(response.headers()["grpc-status"], "7");
/// ```
pub fn grpc_permission_denied() -> Response<Bytes> {
    trailers_only(&Status::permission_denied(super::BLOCKED_DETAIL), None)
}

/// HTTP 200 with the status in the headers and an empty body: what
/// `Status::into_http` builds, without its `unwrap`.
fn trailers_only(status: &Status, pushback: Option<HeaderValue>) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(GRPC_CONTENT_TYPE));
    if status.add_header(headers).is_err() {
        // Unreachable in practice (the message is percent-encoded, the
        // details base64): keep at least the code.
        headers.insert(GRPC_STATUS, HeaderValue::from(status.code() as i32));
    }
    if let Some(pushback) = pushback {
        headers.insert(RETRY_PUSHBACK_MS, pushback);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers_with(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers
    }

    #[test]
    fn recognizes_grpc_content_types() {
        for ct in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc+json",
            "application/grpc-web",
            "application/grpc-web-text+proto",
            "Application/GRPC",
        ] {
            assert!(is_grpc(&headers_with(ct)), "{ct}");
        }
        for ct in [
            "application/json",
            "application/grpcx",
            "application/grp",
            "",
        ] {
            assert!(!is_grpc(&headers_with(ct)), "{ct}");
        }
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn unavailable_without_retry_has_no_pushback() {
        let response = grpc_unavailable(None);
        assert_eq!(response.headers()[GRPC_STATUS], "14");
        assert!(!response.headers().contains_key(RETRY_PUSHBACK_MS));
        assert!(!response.headers().contains_key("grpc-status-details-bin"));
    }
}
