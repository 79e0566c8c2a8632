//! A borrowed view of a request without its body.

use http::{Extensions, HeaderMap, Method, Request, Uri, Version};

/// A request's head, borrowed: what [`from_fn`](super::from_fn) closures
/// see. It exists because [`KeyExtractor::extract`](super::KeyExtractor) is
/// generic over the body type, which a closure cannot be.
///
/// ```
/// use floodgate::key::RequestView;
///
/// let req = http::Request::post("/upload").body(()).unwrap();
/// let view = RequestView::new(&req);
/// assert_eq!(view.method(), http::Method::POST);
/// assert_eq!(view.uri().path(), "/upload");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    method: &'a Method,
    uri: &'a Uri,
    version: Version,
    headers: &'a HeaderMap,
    extensions: &'a Extensions,
}

impl<'a> RequestView<'a> {
    /// The view of `req`.
    pub fn new<B>(req: &'a Request<B>) -> Self {
        Self {
            method: req.method(),
            uri: req.uri(),
            version: req.version(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }

    /// The request method.
    pub fn method(&self) -> &'a Method {
        self.method
    }

    /// The request URI.
    pub fn uri(&self) -> &'a Uri {
        self.uri
    }

    /// The HTTP version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The request headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The request extensions (peer address, auth results, ...).
    pub fn extensions(&self) -> &'a Extensions {
        self.extensions
    }
}

impl<'a, B> From<&'a Request<B>> for RequestView<'a> {
    fn from(req: &'a Request<B>) -> Self {
        Self::new(req)
    }
}
