use super::service::ConcurrencyLimit;
use crate::concurrency::ConcurrencyLimiter;
use crate::key::KeyExtractor;
use crate::layer::next::LeaseResponder;
use crate::layer::responder::{Rejection, Responder};
use bytes::Bytes;
use http::Response;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// Holds each request's slot from the moment it is admitted until its
/// response body ends or is dropped; answers 429 (gRPC:
/// `RESOURCE_EXHAUSTED`) at once when the key has `max` requests in flight,
/// and 503 (gRPC: `UNAVAILABLE`) when the store is down and the limiter
/// fails closed. The same answers, body and future as
/// [`RateLimitLayer`](crate::layer::RateLimitLayer).
///
/// ```
/// use axum::{routing::post, Router};
/// use floodgate::concurrency::ConcurrencyLimiter;
/// use floodgate::{key::Header, layer::ConcurrencyLimitLayer, store::MemoryStore};
///
/// let uploads = ConcurrencyLimiter::builder(MemoryStore::new(), 2).name("uploads").build().unwrap();
/// let app: Router = Router::new()
///     .route("/upload", post(|| async { "stored" }))
///     .layer(ConcurrencyLimitLayer::new(uploads, Header::try_new("x-api-key").unwrap()));
/// ```
#[must_use = "a layer or extractor does nothing until it is used"]
pub struct ConcurrencyLimitLayer<K> {
    pub(crate) config: Arc<ConcurrencyLimitConfig<K>>,
}

/// The configuration a [`ConcurrencyLimitLayer`] shares with its services.
pub(crate) struct ConcurrencyLimitConfig<K> {
    pub(crate) limiter: ConcurrencyLimiter,
    pub(crate) extractor: K,
    pub(crate) responder: Arc<LeaseResponder>,
}

impl<K: Clone> Clone for ConcurrencyLimitConfig<K> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            extractor: self.extractor.clone(),
            responder: self.responder.clone(),
        }
    }
}

impl<K> Clone for ConcurrencyLimitLayer<K> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
        }
    }
}

impl<K: KeyExtractor> ConcurrencyLimitLayer<K> {
    /// Limit requests in flight per key that `extractor` takes from them.
    pub fn new(limiter: ConcurrencyLimiter, extractor: K) -> Self {
        let responder = Arc::new(LeaseResponder {
            responder: Responder::new(limiter.name()),
            retry_after: Duration::from_secs(1),
        });
        Self {
            config: Arc::new(ConcurrencyLimitConfig {
                limiter,
                extractor,
                responder,
            }),
        }
    }

    fn map(self, f: impl FnOnce(&mut LeaseResponder)) -> Self {
        let mut config = Arc::unwrap_or_clone(self.config);
        f(Arc::make_mut(&mut config.responder));
        Self {
            config: Arc::new(config),
        }
    }

    /// The `Retry-After` sent with a rejection (default 1 s): a slot frees
    /// when any request of the key ends, which the layer cannot foresee.
    pub fn retry_after(self, retry_after: Duration) -> Self {
        self.map(|a| a.retry_after = retry_after)
    }

    /// Replace the answers the layer gives by itself (429, 400, 503 and their
    /// gRPC forms), as [`RateLimitLayer::on_rejection`](crate::layer::RateLimitLayer::on_rejection).
    pub fn on_rejection<F>(self, f: F) -> Self
    where
        F: Fn(&Rejection<'_>) -> Response<Bytes> + Send + Sync + 'static,
    {
        self.map(|a| a.responder.on_rejection = Some(Arc::new(f)))
    }

    /// Shadow mode: decide as usual, but never block: a request over the
    /// limit is served anyway, without a slot (and logged at `info`).
    pub fn shadow(self, shadow: bool) -> Self {
        self.map(|a| a.responder.shadow = shadow)
    }

    /// The limiter.
    pub fn limiter(&self) -> &ConcurrencyLimiter {
        &self.config.limiter
    }
}

impl<S, K> Layer<S> for ConcurrencyLimitLayer<K> {
    type Service = ConcurrencyLimit<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        ConcurrencyLimit::new(inner, self.config.clone())
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for ConcurrencyLimitLayer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ConcurrencyLimitLayer")
            .field(&self.config)
            .finish()
    }
}

impl<K: std::fmt::Debug> std::fmt::Debug for ConcurrencyLimitConfig<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConcurrencyLimitConfig")
            .field("limiter", &self.limiter)
            .field("extractor", &self.extractor)
            .field("retry_after", &self.responder.retry_after)
            .finish()
    }
}
