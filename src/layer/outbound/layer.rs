use super::service::OutboundLimit;
use crate::algorithm::Algorithm;
use crate::key::RequestView;
use crate::layer::cost::{ActualCost, Pricing};
use crate::limiter::Plan;
use crate::Limiter;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// Limits the calls a fleet makes to someone else's API. It wraps a
/// client (any tower `Service` of HTTP requests: a hyper-util client, a
/// tonic `Channel`, reqwest behind a tower adapter) so that every worker
/// sharing the store shares one partner's quota: each request is charged
/// to its key (the partner, or a function of the request) and waits for
/// its booked time ([`Limiter::until_ready`]) instead of failing, at most
/// [`max_wait`](Self::max_wait), after which the call returns an
/// [`OutboundError::Limited`](crate::layer::OutboundError::Limited) the
/// caller can match, and nothing is sent or charged. A request dropped
/// while it waits gives its reservation back.
///
/// When the partner answers 429 or 503 with `Retry-After` (or a
/// `RateLimit` field with nothing remaining), the key is paused for every
/// worker until then, in the shared store, not in one process: the key's
/// schedule is pushed ([`Limiter::block`]), so new requests book after
/// the pause, and a pause marker is written beside it, which a request
/// booked earlier reads when its time comes: paused, it gives its booking
/// back and books again after the pause (or, past its `max_wait`, returns
/// `Limited`). Only a request already on its way when the pause is
/// written still goes.
///
/// The limiter's algorithm must be able to book ahead (GCRA or a bucket)
/// for requests to wait; a window's limiter sends a request only if it
/// fits now, and reads the pause marker before each request (one more
/// store call a request), waiting for a pause that ends within
/// `max_wait`.
///
/// Two quotas with different costs (100 requests a second and 1 000 000
/// tokens a minute) are two layers, one costing 1 a request, one the
/// tokens a request will use ([`cost_fn`](Self::cost_fn)), settled with
/// what the response says ([`actual_cost`](Self::actual_cost)).
///
/// ```
/// use floodgate::{algorithm::Gcra, layer::OutboundLimitLayer, store::MemoryStore, Limiter};
/// use std::time::Duration;
///
/// let partner = Limiter::new(MemoryStore::new(), Gcra::new(100, Duration::from_secs(1)));
/// let layer = OutboundLimitLayer::new(partner, "api.partner.example")
///     .max_wait(Duration::from_secs(5));
/// // tower::ServiceBuilder::new().layer(layer).service(client)
/// ```
#[must_use = "a layer does nothing until it is used"]
pub struct OutboundLimitLayer<A> {
    config: Arc<OutboundConfig<A>>,
}

/// A request's key: one for all, or a function of the request.
#[derive(Clone)]
pub(crate) enum OutboundKey {
    Fixed(Arc<str>),
    Fn(Arc<dyn Fn(RequestView<'_>) -> String + Send + Sync>),
}

/// What an [`OutboundLimitLayer`] shares with its services.
pub(crate) struct OutboundConfig<A> {
    pub(crate) limiter: Limiter<A>,
    pub(crate) key: OutboundKey,
    pub(crate) pricing: Pricing,
    pub(crate) max_wait: Duration,
    pub(crate) obey: bool,
    pub(crate) actual_cost: Option<ActualCost>,
    /// Where the keys' pauses are marked (`Limiter::pause`).
    pub(crate) pauses: Arc<Plan>,
}

impl<A> Clone for OutboundConfig<A> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            key: self.key.clone(),
            pricing: self.pricing.clone(),
            max_wait: self.max_wait,
            obey: self.obey,
            actual_cost: self.actual_cost.clone(),
            pauses: self.pauses.clone(),
        }
    }
}

impl<A> Clone for OutboundLimitLayer<A> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
        }
    }
}

impl<A: Algorithm> OutboundLimitLayer<A> {
    /// Charge every request to `key` (the partner's name or host) with
    /// `limiter`: cost 1, a longest wait of 10 s, obeying the partner's
    /// 429 and 503.
    pub fn new(limiter: Limiter<A>, key: impl Into<String>) -> Self {
        Self {
            config: Arc::new(OutboundConfig {
                pauses: Arc::new(limiter.pause_plan()),
                limiter,
                key: OutboundKey::Fixed(key.into().into()),
                pricing: Pricing::Fixed(1),
                max_wait: Duration::from_secs(10),
                obey: true,
                actual_cost: None,
            }),
        }
    }

    fn map(self, f: impl FnOnce(&mut OutboundConfig<A>)) -> Self {
        let mut config = Arc::unwrap_or_clone(self.config);
        f(&mut config);
        Self {
            config: Arc::new(config),
        }
    }

    /// Each request's key from `f` (e.g. its host, or the tenant it is
    /// sent for) instead of one for all.
    pub fn key_fn<F>(self, f: F) -> Self
    where
        F: Fn(RequestView<'_>) -> String + Send + Sync + 'static,
    {
        self.map(|c| c.key = OutboundKey::Fn(Arc::new(f)))
    }

    /// Every request costs `cost` (default 1). A request carrying a
    /// [`Cost`](crate::layer::Cost) extension costs that instead.
    pub fn cost(self, cost: u64) -> Self {
        self.map(|c| c.pricing = Pricing::Fixed(cost))
    }

    /// Price each request with `f` (e.g. the tokens it will use). A
    /// request carrying a [`Cost`](crate::layer::Cost) extension costs
    /// that instead.
    pub fn cost_fn<F>(self, f: F) -> Self
    where
        F: Fn(RequestView<'_>) -> u64 + Send + Sync + 'static,
    {
        self.map(|c| c.pricing = Pricing::Fn(Arc::new(f)))
    }

    /// How long a request may wait for its booked time (default 10 s):
    /// one that would wait longer is not sent, and the call returns
    /// [`OutboundError::Limited`](super::OutboundError::Limited) at once,
    /// charging nothing.
    pub fn max_wait(self, max_wait: Duration) -> Self {
        self.map(|c| c.max_wait = max_wait)
    }

    /// Whether a 429 or 503 from the partner pauses the key for every
    /// worker, for its `Retry-After` (or the reset of a `RateLimit` field
    /// with nothing remaining), at most a day (default on).
    pub fn obey_retry_after(self, obey: bool) -> Self {
        self.map(|c| c.obey = obey)
    }

    /// Settle the cost the response says a request used (see
    /// [`RateLimitLayer::actual_cost`](crate::layer::RateLimitLayer::actual_cost)):
    /// the request waits for its estimate, then the difference is given
    /// back or charged (into debt when the key is full).
    pub fn actual_cost(self, source: ActualCost) -> Self {
        self.map(|c| c.actual_cost = Some(source))
    }

    /// The limiter.
    pub fn limiter(&self) -> &Limiter<A> {
        &self.config.limiter
    }
}

impl<S, A> Layer<S> for OutboundLimitLayer<A> {
    type Service = OutboundLimit<S, A>;

    fn layer(&self, inner: S) -> Self::Service {
        OutboundLimit::new(inner, self.config.clone())
    }
}

impl<A: fmt::Debug> fmt::Debug for OutboundLimitLayer<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundLimitLayer")
            .field("limiter", &self.config.limiter)
            .field("max_wait", &self.config.max_wait)
            .field("obey_retry_after", &self.config.obey)
            .finish_non_exhaustive()
    }
}
