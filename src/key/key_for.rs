//! One extractor that yields several keys: the request's, and one of its
//! own for a named limit.

use std::borrow::Cow;
use std::sync::Arc;

use super::{KeyExtractor, KeyRejection};

/// The keys of a request for a [`Limits`](crate::algorithm::Limits) whose
/// limits are charged to different keys: `key`'s for every limit, except
/// the limit named `limit`, charged to `own`'s. Nested, one per limit with
/// a key of its own (`KeyFor<KeyFor<Header, Global>, Header>`); made by
/// [`RateLimitLayer::key_for`](crate::layer::RateLimitLayer::key_for), which
/// checks that the limiter has such a limit.
///
/// A request lacking any of its keys is rejected (400, gRPC
/// `INVALID_ARGUMENT`), whichever extractor lacks it.
///
/// ```
/// use floodgate::key::{Global, Header, KeyExtractor, KeyFor};
///
/// let keys = KeyFor::new(Header::try_new("x-user").unwrap(), "global", Global::named("all"));
/// let req = http::Request::get("/").header("x-user", "ana").body(()).unwrap();
/// assert_eq!(keys.extract(&req).unwrap(), "ana");
/// assert_eq!(keys.extract_for("global", &req).unwrap().unwrap(), "all");
/// assert!(keys.extract_for("user", &req).is_none()); // the request's key
/// ```
#[derive(Debug, Clone)]
pub struct KeyFor<K, E> {
    key: K,
    limit: Arc<str>,
    own: E,
}

impl<K: KeyExtractor, E: KeyExtractor> KeyFor<K, E> {
    /// `key`'s keys, with `own`'s for the limit named `limit`.
    pub fn new(key: K, limit: &str, own: E) -> Self {
        Self {
            key,
            limit: limit.into(),
            own,
        }
    }
}

impl<K: KeyExtractor, E: KeyExtractor> KeyExtractor for KeyFor<K, E> {
    /// The request's key (`key`'s), once every limit's own key is found:
    /// a request lacking one is rejected before anything is charged.
    fn extract<'r, B>(&self, req: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        self.own.extract(req)?;
        self.key.extract(req)
    }

    fn extract_for<'r, B>(
        &self,
        limit: &str,
        req: &'r http::Request<B>,
    ) -> Option<Result<Cow<'r, str>, KeyRejection>> {
        if limit == &*self.limit {
            Some(self.own.extract(req))
        } else {
            self.key.extract_for(limit, req)
        }
    }
}
