use super::service::RateLimit;
use crate::algorithm::Algorithm;
use crate::headers::HeaderStyle;
use crate::key::{KeyExtractor, RequestView};
use crate::layer::cost::{ActualCost, Pricing};
use crate::layer::next::RateResponder;
use crate::layer::predicate::charging::{CountOnlyWhen, RefundWhen, Upfront};
use crate::layer::predicate::StatusPredicate;
use crate::layer::responder::{Rejection, Responder};
use crate::layer::settle::Counting;
use crate::layer::waiting::{WaitingRoom, DEFAULT_PER_KEY, DEFAULT_TOTAL};
use crate::Limiter;
use bytes::Bytes;
use http::Response;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use tower_layer::Layer;

/// Rate-limits the requests of any tower service: takes a key from each
/// request with `K`, charges the request's cost through a [`Limiter<A>`],
/// and either calls the service (adding rate-limit headers to its response)
/// or answers at once (429, or `RESOURCE_EXHAUSTED` for gRPC).
///
/// Small and cheap to clone: the configuration is shared.
///
/// Not tower's own `tower::limit::RateLimitLayer`: that one counts requests
/// per service instance (one counter for all clients, in one process) and
/// pushes back through `poll_ready`, so callers wait. This one counts per
/// key (client IP, API key, user), shared by every app server through
/// Redis, and answers a request over its limit at once (429), unless told
/// to hold it until its booked time ([`wait_up_to`](Self::wait_up_to)).
///
/// Its services run on Tokio, as axum's and tonic's do: a wait (the leaky
/// bucket's delay, [`wait_up_to`](Self::wait_up_to)) is a Tokio timer, so a runtime with its time driver is required
/// (polling a response future outside one panics, as any Tokio timer does).
///
/// Its third type parameter says how requests are charged
/// ([`charging`](crate::layer::predicate::charging)): set by
/// [`refund_when`](Self::refund_when) or
/// [`count_only_when`](Self::count_only_when), at most one of them.
///
/// ```
/// use axum::{routing::get, Router};
/// use floodgate::{algorithm::Gcra, key::PeerIp, layer::RateLimitLayer, store::MemoryStore, Limiter};
/// use std::time::Duration;
///
/// let limiter = Limiter::new(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)));
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(RateLimitLayer::new(limiter, PeerIp::new()));
/// ```
#[must_use = "a layer or extractor does nothing until it is used"]
pub struct RateLimitLayer<K, A, C = Upfront> {
    pub(crate) config: Arc<RateLimitConfig<K, A>>,
    /// How requests are charged: see [`charging`](crate::layer::predicate::charging).
    pub(super) charging: PhantomData<fn() -> C>,
}

pub(crate) type LimitsFn<A> = Arc<dyn Fn(RequestView<'_>) -> Option<A> + Send + Sync>;

/// The configuration a [`RateLimitLayer`] shares with its services.
pub(crate) struct RateLimitConfig<K, A> {
    pub(crate) limiter: Limiter<A>,
    pub(crate) extractor: K,
    pub(crate) pricing: Pricing,
    pub(crate) limits_for: Option<LimitsFn<A>>,
    /// The limits charged to a key of their own
    /// ([`RateLimitLayer::key_for`]): the extractor gives their keys.
    pub(crate) limit_keys: Vec<Arc<str>>,
    pub(crate) counting: Counting,
    pub(crate) refund_inner: bool,
    /// Where a response says what its request cost, if it does.
    pub(crate) actual_cost: Option<ActualCost>,
    /// Where requests wait for their booked time, with
    /// [`wait_up_to`](RateLimitLayer::wait_up_to).
    pub(crate) waiting: Option<Arc<WaitingRoom>>,
    /// The bounds of the waiting room: per key, in all.
    pub(crate) seats: (u32, usize),
    /// What the response future needs, without the layer's type parameters.
    pub(crate) responder: Arc<RateResponder>,
}

impl<K: Clone, A> Clone for RateLimitConfig<K, A> {
    fn clone(&self) -> Self {
        Self {
            limiter: self.limiter.clone(),
            extractor: self.extractor.clone(),
            pricing: self.pricing.clone(),
            limits_for: self.limits_for.clone(),
            limit_keys: self.limit_keys.clone(),
            counting: self.counting.clone(),
            refund_inner: self.refund_inner,
            actual_cost: self.actual_cost.clone(),
            waiting: self.waiting.clone(),
            seats: self.seats,
            responder: self.responder.clone(),
        }
    }
}

impl<K, A, C> Clone for RateLimitLayer<K, A, C> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
            charging: PhantomData,
        }
    }
}

impl<K: KeyExtractor, A: Algorithm> RateLimitLayer<K, A> {
    /// Limit requests by the key `extractor` takes from them, with `limiter`.
    /// Each request costs 1, headers are the IETF `RateLimit` fields.
    pub fn new(limiter: Limiter<A>, extractor: K) -> Self {
        let responder = Arc::new(RateResponder {
            responder: Responder::new(limiter.name()),
        });
        Self {
            config: Arc::new(RateLimitConfig {
                limiter,
                extractor,
                pricing: Pricing::Fixed(1),
                limits_for: None,
                limit_keys: Vec::new(),
                counting: Counting::Always,
                refund_inner: true,
                actual_cost: None,
                waiting: None,
                seats: (DEFAULT_PER_KEY, DEFAULT_TOTAL),
                responder,
            }),
            charging: PhantomData,
        }
    }

    /// Give the charge back when the response's status matches (e.g.
    /// server errors: [`ServerErrors`](crate::layer::predicate::ServerErrors)
    /// or `|s| s.is_server_error()`), once the response is known. The
    /// request was admitted at full cost: a burst never exceeds the limit;
    /// the refund only makes room again afterwards. Predicates compose
    /// ([`predicate`](crate::layer::predicate)); a layer that refunds cannot
    /// also [`count_only_when`](Self::count_only_when).
    pub fn refund_when<P: StatusPredicate>(self, p: P) -> RateLimitLayer<K, A, RefundWhen> {
        self.map(|c| c.counting = Counting::RefundWhen(Arc::new(p)))
            .charging()
    }

    /// Charge only requests whose response status matches (e.g. failed
    /// logins: `Status(UNAUTHORIZED).or(Status(FORBIDDEN))`). Until then
    /// the request is only tried: it is let through while the quota is not
    /// used up (a denial here is counted in the metrics like any other),
    /// and charged when its response matches. The rate-limit fields of a
    /// response that is not charged say what remains without it. A layer
    /// that counts only some responses cannot also
    /// [`refund_when`](Self::refund_when).
    ///
    /// The race this opens: requests of one key that are in flight at the
    /// same time all pass the trial before any is charged, so the limit can
    /// be exceeded by at most the number of that key's requests in flight
    /// at once (bound it with a concurrency limit if that matters).
    pub fn count_only_when<P: StatusPredicate>(self, p: P) -> RateLimitLayer<K, A, CountOnlyWhen> {
        self.map(|c| c.counting = Counting::OnlyWhen(Arc::new(p)))
            .charging()
    }
}

impl<K: KeyExtractor, A: Algorithm, C> RateLimitLayer<K, A, C> {
    /// The same layer, charging as `D` says.
    fn charging<D>(self) -> RateLimitLayer<K, A, D> {
        RateLimitLayer {
            config: self.config,
            charging: PhantomData,
        }
    }

    pub(crate) fn map(self, f: impl FnOnce(&mut RateLimitConfig<K, A>)) -> Self {
        let mut config = Arc::unwrap_or_clone(self.config);
        f(&mut config);
        Self {
            config: Arc::new(config),
            charging: PhantomData,
        }
    }

    /// Every request costs `cost` (default 1). A request carrying a
    /// [`Cost`](crate::layer::Cost) extension costs that instead.
    pub fn cost(self, cost: u64) -> Self {
        self.map(|c| c.pricing = Pricing::Fixed(cost))
    }

    /// Price each request with `f` (e.g. by method or body size). A request
    /// carrying a [`Cost`](crate::layer::Cost) extension costs that instead.
    ///
    /// ```
    /// # use floodgate::{algorithm::TokenBucket, key::Global, layer::RateLimitLayer, store::MemoryStore, Limiter};
    /// # let limiter = Limiter::new(MemoryStore::new(), TokenBucket::new(100, 10.0));
    /// let layer = RateLimitLayer::new(limiter, Global::new())
    ///     .cost_fn(|req| if req.method() == http::Method::GET { 1 } else { 5 });
    /// ```
    pub fn cost_fn<F>(self, f: F) -> Self
    where
        F: Fn(RequestView<'_>) -> u64 + Send + Sync + 'static,
    {
        self.map(|c| c.pricing = Pricing::Fn(Arc::new(f)))
    }

    /// Settle what a request actually cost once its response says it: the
    /// request is charged its cost when it comes in (an estimate: the
    /// layer's [`cost`](Self::cost), [`cost_fn`](Self::cost_fn) or the
    /// request's [`Cost`](crate::layer::Cost)), and when the response's
    /// head is known the layer reads the actual cost from `source` (a
    /// response header, or a [`Cost`](crate::layer::Cost) the handler put
    /// in the response's extensions: the tokens an LLM call used) and
    /// charges or gives back the difference, in one store call each way.
    ///
    /// A difference larger than what remains puts the key in **debt**
    /// ([`Limiter::debit`]): GCRA and the buckets then refuse the key's
    /// requests until time has paid it back; a window or the sliding log
    /// is charged up to its limit (full until it ends). A response that
    /// says no cost (or one that is not a number) keeps the estimate; so
    /// does a response dropped before its head is known. A cost known only
    /// when a streamed body ends comes in a trailer
    /// ([`ActualCost::Trailer`]): the settlement then waits for the body's
    /// end, and a body dropped before it keeps the estimate.
    ///
    /// Composes with [`refund_when`](Self::refund_when) and
    /// [`count_only_when`](Self::count_only_when): a response that owes
    /// nothing owes nothing, one that owes owes what it says.
    ///
    /// ```
    /// use floodgate::{algorithm::TokenBucket, key::Header, layer::{ActualCost, RateLimitLayer}, store::MemoryStore, Limiter};
    /// use http::HeaderName;
    ///
    /// // 100 000 tokens a minute per API key; a call is estimated at 1 000.
    /// let tokens = Limiter::new(MemoryStore::new(), TokenBucket::new(100_000, 100_000.0 / 60.0));
    /// let layer = RateLimitLayer::new(tokens, Header::try_new("x-api-key").unwrap())
    ///     .cost(1_000)
    ///     .actual_cost(ActualCost::Header(HeaderName::from_static("x-tokens-used")));
    /// ```
    pub fn actual_cost(self, source: ActualCost) -> Self {
        self.map(|c| c.actual_cost = Some(source))
    }

    /// Resolve the limits per request, e.g. from the customer's tier that an
    /// auth layer put in the request's extensions: `None` keeps the
    /// limiter's own (see [`Limiter::check_with`]). No limiter per tier is
    /// needed, and a key's state carries over when its plan changes.
    ///
    /// ```
    /// # use floodgate::{algorithm::Gcra, key::Global, layer::RateLimitLayer, store::MemoryStore, Limiter};
    /// # use std::time::Duration;
    /// #[derive(Clone)]
    /// enum Tier { Free, Pro }
    /// let limiter = Limiter::new(MemoryStore::new(), Gcra::new(10, Duration::from_secs(1)));
    /// let layer = RateLimitLayer::new(limiter, Global::new()).limits_for(|req| {
    ///     match req.extensions().get::<Tier>()? {
    ///         Tier::Free => None, // the limiter's own: 10/s
    ///         Tier::Pro => Some(Gcra::new(100, Duration::from_secs(1))),
    ///     }
    /// });
    /// ```
    pub fn limits_for<F>(self, f: F) -> Self
    where
        F: Fn(RequestView<'_>) -> Option<A> + Send + Sync + 'static,
    {
        self.map(|c| c.limits_for = Some(Arc::new(f)))
    }

    /// Give this layer's charge back when a limit inside it (another
    /// `RateLimitLayer` wrapped by this one) denies the request (default
    /// on): with stacked limits, a request is charged only where all admit.
    /// Between two stores or keys this is not atomic: for a moment the
    /// outer limit holds the charge of a request an inner one denied.
    pub fn refund_inner_denials(self, refund: bool) -> Self {
        self.map(|c| c.refund_inner = refund)
    }

    /// Which rate-limit headers to send (default: the IETF fields).
    pub fn headers(self, style: HeaderStyle) -> Self {
        self.map(|c| c.responder_mut().style = style)
    }

    /// Replace the answers the layer gives by itself (429, 400, 503 and their
    /// gRPC forms). `f` may call [`Rejection::default_response`] and adjust it.
    pub fn on_rejection<F>(self, f: F) -> Self
    where
        F: Fn(&Rejection<'_>) -> Response<Bytes> + Send + Sync + 'static,
    {
        self.map(|c| c.responder_mut().on_rejection = Some(Arc::new(f)))
    }

    /// Shadow mode: decide, charge and send headers as usual, but never
    /// block: a denied request is served anyway (and logged at `info`).
    /// For trying a limit on real traffic before enforcing it.
    pub fn shadow(self, shadow: bool) -> Self {
        self.map(|c| c.responder_mut().shadow = shadow)
    }

    /// The limiter.
    pub fn limiter(&self) -> &Limiter<A> {
        &self.config.limiter
    }
}

impl<K, A> RateLimitConfig<K, A> {
    fn responder_mut(&mut self) -> &mut Responder {
        &mut Arc::make_mut(&mut self.responder).responder
    }
}

impl<S, K, A, C> Layer<S> for RateLimitLayer<K, A, C> {
    type Service = RateLimit<S, K, A>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(inner, self.config.clone())
    }
}

impl<K: fmt::Debug, A: fmt::Debug, C> fmt::Debug for RateLimitLayer<K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RateLimitLayer").field(&self.config).finish()
    }
}

impl<K: fmt::Debug, A: fmt::Debug> fmt::Debug for RateLimitConfig<K, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitConfig")
            .field("limiter", &self.limiter)
            .field("extractor", &self.extractor)
            .field("pricing", &self.pricing)
            .field("style", &self.responder.responder.style)
            .field("shadow", &self.responder.responder.shadow)
            .finish_non_exhaustive()
    }
}
