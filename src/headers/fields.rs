//! Where the rate-limit fields are written: a response's header map, or
//! the fields of a response not made yet ([`Prepared`]).

use http::{HeaderMap, HeaderValue};

use super::{
    RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING, X_RATELIMIT_RESET,
};

/// What the rate-limit fields of one response are written into, each
/// method called at most once. The IETF fields are lists, so their values
/// are appended to any the response already has (an inner limiter's); the
/// legacy fields are single numbers and replace any present.
pub(crate) trait FieldSink {
    /// `RateLimit-Policy` and `RateLimit`.
    fn ietf(&mut self, policy: Option<HeaderValue>, limit: Option<HeaderValue>);
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    fn legacy(&mut self, fields: [HeaderValue; 3]);
}

impl FieldSink for HeaderMap {
    fn ietf(&mut self, policy: Option<HeaderValue>, limit: Option<HeaderValue>) {
        if let Some(value) = policy {
            self.append(RATELIMIT_POLICY, value);
        }
        if let Some(value) = limit {
            self.append(RATELIMIT, value);
        }
    }

    fn legacy(&mut self, [limit, remaining, reset]: [HeaderValue; 3]) {
        self.insert(X_RATELIMIT_LIMIT, limit);
        self.insert(X_RATELIMIT_REMAINING, remaining);
        self.insert(X_RATELIMIT_RESET, reset);
    }
}

/// The rate-limit fields of a response, written when its request was
/// decided and put on the response once it exists: the layer's response
/// future then carries the fields' values instead of the decision and
/// what it needs to write them.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    policy: Option<HeaderValue>,
    limit: Option<HeaderValue>,
    /// The legacy fields, boxed: most layers send only the IETF ones.
    legacy: Option<Box<[HeaderValue; 3]>>,
}

impl FieldSink for Prepared {
    fn ietf(&mut self, policy: Option<HeaderValue>, limit: Option<HeaderValue>) {
        debug_assert!(self.policy.is_none() && self.limit.is_none());
        (self.policy, self.limit) = (policy, limit);
    }

    fn legacy(&mut self, fields: [HeaderValue; 3]) {
        debug_assert!(self.legacy.is_none());
        self.legacy = Some(Box::new(fields));
    }
}

impl Prepared {
    /// Put the fields on `headers`, as if written there at first (the IETF
    /// fields first, as every style writes them).
    pub(crate) fn write_to(self, headers: &mut HeaderMap) {
        headers.ietf(self.policy, self.limit);
        if let Some(fields) = self.legacy {
            headers.legacy(*fields);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderName;

    #[test]
    fn prepared_fields_land_as_written_there() {
        let v = HeaderValue::from_static;
        let mut start = HeaderMap::new();
        start.append(RATELIMIT, v("inner"));
        start.insert(X_RATELIMIT_RESET, v("9"));
        let (mut direct, mut later) = (start.clone(), start);
        let mut prepared = Prepared::default();
        for sink in [&mut direct as &mut dyn FieldSink, &mut prepared] {
            sink.ietf(Some(v("p")), Some(v("l")));
            sink.legacy([v("1"), v("2"), v("3")]);
        }
        prepared.write_to(&mut later);
        assert_eq!(direct, later);
        let limits: Vec<_> = later.get_all(RATELIMIT).iter().collect();
        assert_eq!(limits, ["inner", "l"]);
        assert_eq!(later[X_RATELIMIT_RESET], "3");
        let order: Vec<_> = later.keys().map(HeaderName::as_str).collect();
        let written: Vec<_> = direct.keys().map(HeaderName::as_str).collect();
        assert_eq!(order, written);
    }
}
