//! A closure as the key extractor.

use std::borrow::Cow;
use std::fmt;

use super::{KeyExtractor, KeyRejection, RequestView};

/// A [`KeyExtractor`] made from a closure; see [`from_fn`].
#[derive(Clone)]
pub struct FnKey<F> {
    f: F,
}

/// Makes a key extractor from a closure over the request head.
///
/// The closure gets a [`RequestView`] (method, URI, headers, extensions)
/// because a closure cannot be generic over the body type.
///
/// ```
/// use floodgate::key::{from_fn, KeyExtractor, KeyRejection, RequestView};
///
/// // One bucket per tenant subdomain.
/// let key = from_fn(|req: RequestView<'_>| {
///     req.headers()
///         .get(http::header::HOST)
///         .and_then(|h| h.to_str().ok())
///         .and_then(|h| h.split('.').next())
///         .map(|t| format!("tenant:{t}"))
///         .ok_or_else(|| KeyRejection::new("no Host header"))
/// });
///
/// let req = http::Request::builder().header("host", "acme.example.com").body(()).unwrap();
/// assert_eq!(key.extract(&req).unwrap(), "tenant:acme");
/// ```
pub fn from_fn<F>(f: F) -> FnKey<F>
where
    F: Fn(RequestView<'_>) -> Result<String, KeyRejection> + Clone + Send + Sync + 'static,
{
    FnKey { f }
}

impl<F> fmt::Debug for FnKey<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnKey")
    }
}

impl<F> KeyExtractor for FnKey<F>
where
    F: Fn(RequestView<'_>) -> Result<String, KeyRejection> + Clone + Send + Sync + 'static,
{
    fn extract<'r, B>(&self, req: &'r http::Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        (self.f)(RequestView::new(req)).map(Cow::Owned)
    }
}
