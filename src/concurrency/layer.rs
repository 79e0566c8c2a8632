use super::limiter::ConcurrencyLimiter;
use super::service::ConcurrencyLimit;
use crate::key::KeyExtractor;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// Holds each request's slot from the moment it is admitted until its
/// response body ends or is dropped; answers 429 (gRPC:
/// `RESOURCE_EXHAUSTED`) at once when the key has `max` requests in flight.
///
/// ```
/// use axum::{routing::post, Router};
/// use floodgate::concurrency::{ConcurrencyLimitLayer, ConcurrencyLimiter};
/// use floodgate::{key::Header, store::MemoryStore};
///
/// let uploads = ConcurrencyLimiter::builder(MemoryStore::new(), 2).name("uploads").build().unwrap();
/// let app: Router = Router::new()
///     .route("/upload", post(|| async { "stored" }))
///     .layer(ConcurrencyLimitLayer::new(uploads, Header::try_new("x-api-key").unwrap()));
/// ```
#[derive(Clone)]
pub struct ConcurrencyLimitLayer<K> {
    pub(crate) config: Arc<Config<K>>,
}

#[derive(Clone)]
pub(crate) struct Config<K> {
    pub(crate) limiter: ConcurrencyLimiter,
    pub(crate) extractor: K,
    pub(crate) retry_after: Duration,
}

impl<K: KeyExtractor> ConcurrencyLimitLayer<K> {
    /// Limit requests in flight per key that `extractor` takes from them.
    pub fn new(limiter: ConcurrencyLimiter, extractor: K) -> Self {
        Self {
            config: Arc::new(Config {
                limiter,
                extractor,
                retry_after: Duration::from_secs(1),
            }),
        }
    }

    /// The `Retry-After` sent with a rejection (default 1 s): a slot frees
    /// when any request of the key ends, which the layer cannot foresee.
    pub fn retry_after(self, retry_after: Duration) -> Self {
        let mut config = Arc::unwrap_or_clone(self.config);
        config.retry_after = retry_after;
        Self {
            config: Arc::new(config),
        }
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
        f.debug_struct("ConcurrencyLimitLayer")
            .field("limiter", &self.config.limiter)
            .field("extractor", &self.config.extractor)
            .finish()
    }
}
