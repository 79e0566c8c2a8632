//! [`Limiter`]: one algorithm over one store, usable without HTTP.

use crate::algorithm::{Algorithm, Policy, Spec};
use crate::clock::Clock;
use crate::failure::{
    self, CircuitBreaker, CircuitState, FailureEvent, FailureHook, FailurePolicy, Guard,
};
use crate::store::{key::storage_key, Store};
use crate::{ConfigError, Decision, Error};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

const MAX_PREFIX: usize = 64;
const MAX_NAME: usize = 64;

/// Charges costs to keys with one algorithm, over one store.
///
/// `Clone + Send + Sync` and cheap to clone; works the same over a
/// [`MemoryStore`](crate::store::MemoryStore) or a
/// [`RedisStore`](crate::store::RedisStore).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), floodgate::Error> {
/// use floodgate::{algorithm::TokenBucket, clock::ManualClock, store::MemoryStore, Limiter};
///
/// let clock = ManualClock::new(0);
/// let limiter = Limiter::builder(MemoryStore::new(), TokenBucket::new(10, 10.0))
///     .prefix("rl")
///     .clock(clock.clone())
///     .build()?;
/// let d = limiter.check("ana", 4).await?;
/// assert!(d.allowed);
/// assert_eq!(d.remaining, 6);
/// // peek: what check(key, 1) would say, consuming nothing.
/// assert_eq!(limiter.peek("ana").await?.remaining, 5);
/// assert_eq!(limiter.peek("ana").await?.remaining, 5);
/// // A cost of 0 reports the state as it is.
/// assert_eq!(limiter.check("ana", 0).await?.remaining, 6);
/// assert!(limiter.check("ana", 7).await?.denied());
/// # Ok(()) }
/// ```
pub struct Limiter<A> {
    inner: Arc<Inner<A>>,
}

struct Inner<A> {
    algorithm: A,
    spec: Spec,
    store: Store,
    prefix: String,
    name: String,
    clock: Option<Arc<dyn Clock>>,
    guard: Guard,
}

impl<A> Clone for Limiter<A> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<A: Algorithm> Limiter<A> {
    /// Start building a limiter of `algorithm` over `store`.
    pub fn builder(store: impl Into<Store>, algorithm: A) -> LimiterBuilder<A> {
        LimiterBuilder {
            store: store.into(),
            algorithm,
            prefix: "floodgate".into(),
            name: "default".into(),
            clock: None,
            timeout: failure::DEFAULT_TIMEOUT,
            policy: FailurePolicy::default(),
            breaker: CircuitBreaker::default(),
            hook: None,
        }
    }

    /// A limiter with the defaults: prefix `floodgate`, name `default`, the
    /// store's own clock.
    pub fn new(store: impl Into<Store>, algorithm: A) -> Self {
        Self::builder(store, algorithm)
            .build()
            .expect("the default prefix and name are valid")
    }

    /// Charge `cost` to `key`: admitted if it fits, and then consumed;
    /// denied otherwise, consuming nothing.
    ///
    /// A cost of 0 is always admitted and reports the key's state. A cost
    /// above the limit can never fit: it is denied with no `retry_after`.
    pub async fn check(&self, key: &str, cost: u64) -> Result<Decision, Error> {
        self.decide(key, cost, false).await
    }

    /// What `check(key, 1)` would say now, consuming nothing: `remaining`
    /// is what would be left after it. For the remaining quota as it is, use
    /// `check(key, 0)`, which also consumes nothing.
    pub async fn peek(&self, key: &str) -> Result<Decision, Error> {
        self.decide(key, 1, true).await
    }

    async fn decide(&self, key: &str, cost: u64, dry: bool) -> Result<Decision, Error> {
        let inner = &*self.inner;
        let storage = storage_key(&inner.prefix, &inner.name, inner.spec.tag(), key);
        let now = inner.clock.as_ref().map(|c| c.now_ms());
        let cost = inner.spec.clamp_cost(cost);
        let store = inner.store.decide(&inner.spec, &storage, now, cost, dry);
        if let Store::Memory(_) = inner.store {
            // Cannot fail, and needs no timer: no timeout, no breaker.
            return Ok(store.await?.decision());
        }
        let call = failure::Call {
            limiter: &inner.name,
            spec: &inner.spec,
            key,
            cost,
            dry,
        };
        inner.guard.decide(call, store).await
    }

    /// What this limiter does when its store fails.
    pub fn failure_policy(&self) -> &FailurePolicy {
        self.inner.guard.policy()
    }

    /// The state of this limiter's circuit breaker (always
    /// [`Closed`](CircuitState::Closed) over a memory store).
    pub fn circuit_state(&self) -> CircuitState {
        self.inner.guard.circuit_state()
    }

    /// The algorithm and its parameters.
    pub fn algorithm(&self) -> &A {
        &self.inner.algorithm
    }

    /// The quota as it reads on the wire.
    pub fn policy(&self) -> Policy {
        self.inner.spec.policy()
    }

    /// The limiter's name: its namespace in the store and its policy name in
    /// `RateLimit` headers.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }
}

impl<A: fmt::Debug> fmt::Debug for Limiter<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("name", &self.inner.name)
            .field("algorithm", &self.inner.algorithm)
            .field("prefix", &self.inner.prefix)
            .field("store", &self.inner.store)
            .field("failure", &self.inner.guard)
            .finish()
    }
}

/// Builds a [`Limiter`]; see [`Limiter::builder`].
#[must_use]
pub struct LimiterBuilder<A> {
    store: Store,
    algorithm: A,
    prefix: String,
    name: String,
    clock: Option<Arc<dyn Clock>>,
    timeout: Duration,
    policy: FailurePolicy,
    breaker: CircuitBreaker,
    hook: Option<FailureHook>,
}

impl<A: Algorithm> LimiterBuilder<A> {
    /// The namespace of every key this limiter writes (default `floodgate`).
    /// At most 64 bytes, no `{` or `}`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The limiter's name (default `default`): keys of limiters with
    /// different names never collide, and it names the policy in headers.
    /// 1 to 64 characters of `A-Z a-z 0-9 _ - .`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Take the time of every decision from `clock` instead of the store's
    /// own (Redis `TIME`, or the system clock for memory). For tests, a
    /// [`ManualClock`](crate::clock::ManualClock); in production prefer the
    /// default, one time source for all app servers.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// The longest a decision waits for the store (default 100 ms,
    /// [`failure::DEFAULT_TIMEOUT`]; at least 1 ms): the whole call,
    /// connection and script reload included. When it passes, the
    /// [failure policy](Self::on_store_failure) decides. Not used over a
    /// memory store. See [`crate::failure`] for why 100 ms.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What to decide when the store fails or times out (default
    /// [`FailurePolicy::FailOpen`]). See [`crate::failure`] for how to choose.
    pub fn on_store_failure(mut self, policy: FailurePolicy) -> Self {
        self.policy = policy;
        self
    }

    /// When to stop calling a failing store, and for how long (default 5
    /// consecutive failures, 500 ms). [`CircuitBreaker::disabled`] never
    /// stops calling it.
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = breaker;
        self
    }

    /// Call `hook` for every decision the store could not make, with what
    /// the policy decided: the place for metrics. It runs on the request's
    /// task: keep it short and non-blocking.
    pub fn failure_hook(
        mut self,
        hook: impl Fn(&FailureEvent<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Check the configuration and build the limiter.
    pub fn build(self) -> Result<Limiter<A>, ConfigError> {
        if self.prefix.len() > MAX_PREFIX || self.prefix.contains(['{', '}']) {
            return Err(ConfigError::new(
                "prefix",
                "must be at most 64 bytes without `{` or `}`",
            ));
        }
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if self.name.is_empty() || self.name.len() > MAX_NAME || !self.name.chars().all(name_ok) {
            return Err(ConfigError::new(
                "name",
                "must be 1 to 64 characters of A-Z a-z 0-9 _ - .",
            ));
        }
        if self.timeout < Duration::from_millis(1) {
            return Err(ConfigError::new("timeout", "must be at least 1 ms"));
        }
        self.breaker.validate()?;
        Ok(Limiter {
            inner: Arc::new(Inner {
                spec: self.algorithm.spec(),
                algorithm: self.algorithm,
                store: self.store,
                prefix: self.prefix,
                name: self.name,
                clock: self.clock,
                guard: Guard::new(self.timeout, self.policy, self.breaker, self.hook),
            }),
        })
    }
}
