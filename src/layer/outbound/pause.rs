//! How long a partner's answer says to pause: `Retry-After` (seconds or an
//! HTTP date) on a 429 or 503, else a `RateLimit` field with nothing
//! remaining (`r=0`) and its reset (`t`).

use http::{HeaderMap, StatusCode};
use std::time::{Duration, SystemTime};

/// The pause `status` and `headers` ask for, if any (at most a day: a
/// partner's typo must not stop a fleet for a year).
pub(super) fn pause(status: StatusCode, headers: &HeaderMap) -> Option<Duration> {
    if status != StatusCode::TOO_MANY_REQUESTS && status != StatusCode::SERVICE_UNAVAILABLE {
        return None;
    }
    let wait = retry_after(headers).or_else(|| exhausted_for(headers))?;
    Some(wait.min(Duration::from_secs(86_400)))
}

/// `Retry-After`: delta-seconds, or an HTTP date (RFC 9110 §10.2.3).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// The longest reset (`t`) of a `RateLimit` field's items with nothing
/// remaining (`r=0`), as the IETF draft writes them:
/// `"default";r=0;t=30`.
fn exhausted_for(headers: &HeaderMap) -> Option<Duration> {
    let mut longest = None;
    for value in headers.get_all("ratelimit") {
        for item in value.to_str().ok()?.split(',') {
            let (mut r, mut t) = (None, None);
            for param in item.split(';').skip(1) {
                match param.trim().split_once('=') {
                    Some(("r", v)) => r = v.parse::<u64>().ok(),
                    Some(("t", v)) => t = v.parse::<u64>().ok(),
                    _ => {}
                }
            }
            if let (Some(0), Some(t)) = (r, t) {
                longest = longest.max(Some(Duration::from_secs(t)));
            }
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn a_429_or_503_pauses_for_what_it_says() {
        let too_many = StatusCode::TOO_MANY_REQUESTS;
        let h = headers(&[("retry-after", "2")]);
        assert_eq!(pause(too_many, &h), Some(Duration::from_secs(2)));
        assert_eq!(
            pause(StatusCode::SERVICE_UNAVAILABLE, &h),
            Some(Duration::from_secs(2))
        );
        assert_eq!(pause(StatusCode::OK, &h), None, "only a refusal pauses");
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let p = pause(too_many, &headers(&[("retry-after", &later)])).unwrap();
        assert!(
            p > Duration::from_secs(115) && p <= Duration::from_secs(120),
            "{p:?}"
        );
        let h = headers(&[("ratelimit", r#""a";r=5;t=9, "b";r=0;t=30"#)]);
        assert_eq!(pause(too_many, &h), Some(Duration::from_secs(30)));
        assert_eq!(pause(too_many, &headers(&[("retry-after", "soon")])), None);
        let h = headers(&[("retry-after", "99999999")]);
        assert_eq!(pause(too_many, &h), Some(Duration::from_secs(86_400)));
    }
}
