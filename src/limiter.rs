//! [`Limiter`]: one algorithm over one store, usable without HTTP.

use crate::algorithm::{Algorithm, Mode, Policy, Spec};
use crate::clock::Clock;
use crate::deny_cache::DenyCache;
use crate::failure::{
    self, CircuitBreaker, CircuitState, FailureEvent, FailureHook, FailurePolicy, Guard,
};
use crate::metrics::Metrics;
use crate::store::{key::storage_key, memory_now, Store};
use crate::{ConfigError, Decision, Decisions, Error, PolicyDecision};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument;

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
    parts: Box<[Part]>,
    store: Store,
    prefix: String,
    name: Arc<str>,
    clock: Option<Arc<dyn Clock>>,
    metrics: Metrics,
    guard: Guard,
    deny_cache: Option<DenyCache>,
}

/// One policy of the limiter: one key in the store per user key.
#[derive(Debug, Clone)]
struct Part {
    /// Its name on the wire.
    policy: Arc<str>,
    /// Its namespace in the store: the limiter's name, or `limiter/policy`.
    namespace: String,
    /// The id of `prefix:namespace:tag` in a memory store (0 elsewhere).
    memory_ns: u64,
    spec: Spec,
}

fn parts_of<A: Algorithm>(limiter: &str, prefix: &str, store: &Store, algorithm: &A) -> Vec<Part> {
    algorithm
        .parts()
        .into_iter()
        .map(|(policy, spec)| {
            let (policy, namespace) = match policy {
                None => (limiter.into(), limiter.to_string()),
                Some(p) => (p.clone(), format!("{limiter}/{p}")),
            };
            let memory_ns = match store {
                Store::Memory(m) => m.namespace(&format!("{prefix}:{namespace}:{}", spec.tag())),
                _ => 0,
            };
            Part {
                policy,
                namespace,
                memory_ns,
                spec,
            }
        })
        .collect()
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
            deny_cache: None,
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
    /// denied otherwise, consuming nothing. With several policies
    /// ([`Limits`](crate::algorithm::Limits)), admitted only if all admit,
    /// and then charged to all; the numbers are the most restrictive
    /// policy's (see [`check_all`](Self::check_all) for each).
    ///
    /// A cost of 0 is always admitted and reports the key's state. A cost
    /// above the limit can never fit: it is denied with no `retry_after`.
    pub async fn check(&self, key: &str, cost: u64) -> Result<Decision, Error> {
        // The memory store's common case, without entering another future.
        if let ([part], None) = (&*self.inner.parts, &self.inner.deny_cache) {
            if let Some(d) = self.in_memory(part, key, cost, Mode::Check) {
                return Ok(d);
            }
        }
        self.decide(&self.inner.parts, key, cost, Mode::Check).await
    }

    /// Like [`check`](Self::check), with each policy's decision too (what
    /// the layer writes in `RateLimit-Policy` and `RateLimit`).
    pub async fn check_all(&self, key: &str, cost: u64) -> Result<Decisions, Error> {
        self.decide_all(&self.inner.parts, key, cost, Mode::Check)
            .await
    }

    /// Like [`check_all`](Self::check_all), with the quota `algorithm`
    /// instead of the limiter's own, for this call only: quotas resolved per
    /// request (a customer's plan: free 10/s, pro 100/s) without a limiter
    /// per tier. The key's state is shared across quotas, so a customer who
    /// changes plan keeps what they used.
    pub async fn check_with(
        &self,
        key: &str,
        cost: u64,
        algorithm: &A,
    ) -> Result<Decisions, Error> {
        let parts = self.parts_of(algorithm);
        self.decide_all(&parts, key, cost, Mode::Check).await
    }

    /// What `check(key, 1)` would say now, consuming nothing: `remaining`
    /// is what would be left after it. For the remaining quota as it is, use
    /// `check(key, 0)`, which also consumes nothing.
    pub async fn peek(&self, key: &str) -> Result<Decision, Error> {
        self.decide(&self.inner.parts, key, 1, Mode::Peek).await
    }

    /// Give back `cost` that an earlier `check` charged to `key` (a request
    /// that failed on the server, or that a later limit denied). Returns the
    /// state after the refund. What has already expired is not given back;
    /// the sliding log gives back its newest entries.
    pub async fn refund(&self, key: &str, cost: u64) -> Result<Decision, Error> {
        self.decide(&self.inner.parts, key, cost, Mode::Refund)
            .await
    }

    /// Like [`refund`](Self::refund), for a charge made with
    /// [`check_with`](Self::check_with) and the same `algorithm`.
    pub async fn refund_with(
        &self,
        key: &str,
        cost: u64,
        algorithm: &A,
    ) -> Result<Decision, Error> {
        let parts = self.parts_of(algorithm);
        self.decide(&parts, key, cost, Mode::Refund).await
    }

    /// The layer's decision: each policy's, charged unless `peek_only`.
    pub(crate) async fn decide_for_layer(
        &self,
        key: &str,
        cost: u64,
        quota: Option<&A>,
        peek_only: bool,
    ) -> Result<Decisions, Error> {
        let mode = if peek_only { Mode::Peek } else { Mode::Check };
        match quota {
            None => self.decide_all(&self.inner.parts, key, cost, mode).await,
            Some(a) => self.decide_all(&self.parts_of(a), key, cost, mode).await,
        }
    }

    pub(crate) async fn charge_for_layer(
        &self,
        key: &str,
        cost: u64,
        quota: Option<&A>,
    ) -> Result<Decision, Error> {
        self.decide_quota(key, cost, quota, Mode::Check).await
    }

    pub(crate) async fn refund_for_layer(
        &self,
        key: &str,
        cost: u64,
        quota: Option<&A>,
    ) -> Result<Decision, Error> {
        self.decide_quota(key, cost, quota, Mode::Refund).await
    }

    async fn decide_quota(
        &self,
        key: &str,
        cost: u64,
        quota: Option<&A>,
        mode: Mode,
    ) -> Result<Decision, Error> {
        match quota {
            None => self.decide(&self.inner.parts, key, cost, mode).await,
            Some(a) => self.decide(&self.parts_of(a), key, cost, mode).await,
        }
    }

    fn parts_of(&self, algorithm: &A) -> Vec<Part> {
        let inner = &*self.inner;
        parts_of(&inner.name, &inner.prefix, &inner.store, algorithm)
    }

    /// The limiter's clock, or a local monotonic one: what the deny cache
    /// measures time with.
    fn local_now(&self) -> u64 {
        memory_now(self.now())
    }

    /// Whether the deny cache applies: charges to the limiter's own policies.
    fn cacheable(&self, parts: &[Part], mode: Mode) -> Option<&DenyCache> {
        let own = std::ptr::eq(parts.as_ptr(), self.inner.parts.as_ptr());
        self.inner
            .deny_cache
            .as_ref()
            .filter(|_| own && mode == Mode::Check)
    }

    fn now(&self) -> Option<u64> {
        self.inner
            .clock
            .as_ref()
            .map(|c| crate::clock::bounded(c.now_ms()))
    }

    /// The combined decision; the fast path for a single policy.
    async fn decide(
        &self,
        parts: &[Part],
        key: &str,
        cost: u64,
        mode: Mode,
    ) -> Result<Decision, Error> {
        let cached = self.inner.deny_cache.is_some() && mode != Mode::Peek;
        let [part] = parts else {
            return Ok(self.decide_all(parts, key, cost, mode).await?.combined);
        };
        if cached {
            return Ok(self.decide_all(parts, key, cost, mode).await?.combined);
        }
        self.decide_one(part, key, cost, mode).await
    }

    /// The decision of one policy on the memory store (`None` on any other
    /// store), made right here, outside any future: it cannot fail and takes
    /// ~100 ns, so no timeout, no breaker, no latency timer, and the key is
    /// looked up without building it. The deny cache is the caller's.
    #[inline]
    fn in_memory(&self, part: &Part, key: &str, cost: u64, mode: Mode) -> Option<Decision> {
        let inner = &*self.inner;
        let Store::Memory(m) = &inner.store else {
            return None;
        };
        let cost = part.spec.clamp_cost(cost);
        let now = memory_now(self.now());
        let decide = || {
            m.decide_one(&part.spec, part.memory_ns, key, now, cost, mode)
                .decision()
        };
        let d = if tracing::enabled!(tracing::Level::DEBUG) {
            self.span(&part.policy, mode, cost).in_scope(decide)
        } else {
            decide()
        };
        inner.metrics.counted(d.allowed);
        Some(d)
    }

    /// One policy, one key: the fast path (no deny cache).
    async fn decide_one(
        &self,
        part: &Part,
        key: &str,
        cost: u64,
        mode: Mode,
    ) -> Result<Decision, Error> {
        if let Some(d) = self.in_memory(part, key, cost, mode) {
            return Ok(d);
        }
        let inner = &*self.inner;
        let cost = part.spec.clamp_cost(cost);
        let now = self.now();
        let started = crate::clock::ticks();
        let storage = storage_key(&inner.prefix, &part.namespace, part.spec.tag(), key);
        let store = inner
            .store
            .decide_one(&part.spec, &storage, now, cost, mode);
        let call = failure::Call {
            limiter: &inner.name,
            specs: &[&part.spec],
            key,
            cost,
            mode,
        };
        let store = async { store.await.map(|r| vec![r]) };
        let span = self.span(&part.policy, mode, cost);
        let mut each = boxed(inner.guard.decide(call, store), span).await?;
        let d = each
            .pop()
            .ok_or_else(|| Error::Config(ConfigError::new("algorithm", "no policy")))?;
        inner.metrics.decided(
            d.allowed,
            d.degraded,
            crate::clock::ticks().saturating_duration_since(started),
        );
        Ok(d)
    }

    /// A debug span per decision. Spans cost even when nothing listens
    /// (axum enables tracing's `log` feature): make one only for a debug
    /// listener.
    fn span(&self, policy: &str, mode: Mode, cost: u64) -> tracing::Span {
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug_span!("floodgate.decide", limiter = %self.inner.name, policy, ?mode, cost)
        } else {
            tracing::Span::none()
        }
    }

    async fn decide_all(
        &self,
        parts: &[Part],
        key: &str,
        cost: u64,
        mode: Mode,
    ) -> Result<Decisions, Error> {
        // One policy and no cache: the single-key path, without a decide
        // first and a commit after, nor the vectors.
        if let ([part], None) = (parts, &self.inner.deny_cache) {
            let decision = self.decide_one(part, key, cost, mode).await?;
            let each = vec![PolicyDecision {
                name: part.policy.clone(),
                policy: part.spec.policy(),
                decision,
            }];
            return Ok(Decisions {
                combined: decision,
                each,
            });
        }
        let inner = &*self.inner;
        let started = crate::clock::ticks();
        // Storage keys are built only where they are used: Redis, and the
        // deny cache.
        let cache = self.cacheable(parts, mode);
        let memory = match &inner.store {
            Store::Memory(m) => Some(m),
            _ => None,
        };
        let keys: Vec<String> = if memory.is_none() || cache.is_some() {
            parts
                .iter()
                .map(|p| storage_key(&inner.prefix, &p.namespace, p.spec.tag(), key))
                .collect()
        } else {
            Vec::new()
        };
        // The time the cache measures with, read only when there is one.
        let cache = cache.map(|c| (c, self.local_now()));
        if let Some(hit) = cache.and_then(|(c, asked)| c.get(&keys[0], cost, asked)) {
            inner.metrics.cache_hit();
            return Ok(hit);
        }
        if let (Mode::Refund, Some(c)) = (mode, &inner.deny_cache) {
            c.forget(&storage_key(
                &inner.prefix,
                &parts[0].namespace,
                parts[0].spec.tag(),
                key,
            ));
        }
        // Any cost above every maximum is denied alike; this bounds the numbers.
        let cost = parts
            .iter()
            .map(|p| p.spec.clamp_cost(cost))
            .max()
            .unwrap_or(cost);
        let now = self.now();
        let span = if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug_span!("floodgate.decide", limiter = %inner.name, policies = parts.len(), ?mode, cost)
        } else {
            tracing::Span::none()
        };
        let decisions: Vec<Decision> = if let Some(m) = memory {
            let _span = span.entered();
            let targets: Vec<(u64, &str, &Spec)> =
                parts.iter().map(|p| (p.memory_ns, key, &p.spec)).collect();
            m.decide_many(&targets, memory_now(now), cost, mode)
                .into_iter()
                .map(|r| r.decision())
                .collect()
        } else {
            let specs: Vec<&Spec> = parts.iter().map(|p| &p.spec).collect();
            let targets: Vec<(&str, &Spec)> = keys
                .iter()
                .map(|k| k.as_str())
                .zip(specs.iter().copied())
                .collect();
            let store = inner.store.decide_many(&targets, now, cost, mode);
            let call = failure::Call {
                limiter: &inner.name,
                specs: &specs,
                key,
                cost,
                mode,
            };
            boxed(inner.guard.decide(call, store), span).await?
        };
        let each: Vec<PolicyDecision> = parts
            .iter()
            .zip(decisions)
            .map(|(p, decision)| PolicyDecision {
                name: p.policy.clone(),
                policy: p.spec.policy(),
                decision,
            })
            .collect();
        let combined = Decision::combine(each.iter().map(|p| p.decision)).ok_or_else(|| {
            Error::Config(ConfigError::new("algorithm", "the limiter has no policy"))
        })?;
        if memory.is_some() {
            inner.metrics.counted(combined.allowed);
        } else {
            inner.metrics.decided(
                combined.allowed,
                combined.degraded,
                crate::clock::ticks().saturating_duration_since(started),
            );
        }
        let decisions = Decisions { combined, each };
        if let Some((c, asked)) = cache {
            if decisions.combined.allowed {
                // The key filled up: cached numbers of it are stale.
                c.forget(&keys[0]);
            } else {
                c.put(&keys[0], cost, asked, &decisions);
            }
        }
        Ok(decisions)
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

    /// Each policy's name and quota, as they read on the wire.
    pub fn policies(&self) -> impl Iterator<Item = (&str, Policy)> {
        self.inner
            .parts
            .iter()
            .map(|p| (&*p.policy, p.spec.policy()))
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
    deny_cache: Option<usize>,
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
    /// own (Redis `TIME`, or a [`MonotonicClock`](crate::clock::MonotonicClock) for memory). For tests, a
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

    /// Answer denials locally (off by default): once a key is denied until
    /// some time, the same request (same key, same cost) is denied again
    /// until then without calling the store, with the same answer. A client that keeps hammering while
    /// denied then costs no Redis call at all. At most `max_keys` denials
    /// are remembered; past that, new ones are simply not cached.
    ///
    /// It only skips calls the store would certainly deny: until the time a
    /// denial names, a key only fills up, unless something gives room back.
    /// So it is safe exactly when nothing refunds this limiter's keys from
    /// another process (this process's own refunds clear the entry): no
    /// [`refund`](Limiter::refund) and no layer refunding
    /// ([`RateLimitLayer::refund_inner_denials`](crate::layer::RateLimitLayer::refund_inner_denials)
    /// is on by default, `refund_when`) on other app servers. That is why it
    /// is off by default. Tier overrides ([`check_with`](Limiter::check_with))
    /// bypass it. A cached denial reports the numbers of the original one,
    /// its waits shortened by the time since: requests admitted meanwhile by
    /// other app servers can make `remaining` and the waits a little
    /// optimistic, never the decision.
    pub fn deny_cache(mut self, max_keys: usize) -> Self {
        self.deny_cache = Some(max_keys);
        self
    }

    /// Check the configuration and build the limiter.
    pub fn build(self) -> Result<Limiter<A>, ConfigError> {
        validate_names(&self.prefix, &self.name)?;
        let parts = parts_of(&self.name, &self.prefix, &self.store, &self.algorithm);
        if parts.is_empty() {
            return Err(ConfigError::new(
                "algorithm",
                "Limits needs at least one limit",
            ));
        }
        if self.timeout < Duration::from_millis(1) {
            return Err(ConfigError::new("timeout", "must be at least 1 ms"));
        }
        self.breaker.validate()?;
        Ok(Limiter {
            inner: Arc::new(Inner {
                parts: parts.into(),
                algorithm: self.algorithm,
                store: self.store,
                prefix: self.prefix,
                metrics: Metrics::new(&self.name),
                name: self.name.into(),
                clock: self.clock,
                guard: Guard::new(self.timeout, self.policy, self.breaker, self.hook),
                deny_cache: self.deny_cache.map(DenyCache::new),
            }),
        })
    }
}

/// A store call, boxed: its future is ~10 KB, and unboxed it would make
/// every future awaiting a decision that big, memory store included. Inside
/// `span` only when a debug listener made one (`Instrumented` costs every
/// poll something).
fn boxed<'a, T>(
    call: impl Future<Output = T> + Send + 'a,
    span: tracing::Span,
) -> Pin<Box<dyn Future<Output = T> + Send + 'a>> {
    if span.is_disabled() {
        Box::pin(call)
    } else {
        Box::pin(call.instrument(span))
    }
}

/// Prefix: at most 64 bytes, no braces (they would move keys between
/// cluster slots). Name: 1 to 64 characters of `A-Z a-z 0-9 _ - .`.
pub(crate) fn validate_names(prefix: &str, name: &str) -> Result<(), ConfigError> {
    if prefix.len() > MAX_PREFIX || prefix.contains(['{', '}']) {
        return Err(ConfigError::new(
            "prefix",
            "must be at most 64 bytes without `{` or `}`",
        ));
    }
    let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(name_ok) {
        return Err(ConfigError::new(
            "name",
            "must be 1 to 64 characters of A-Z a-z 0-9 _ - .",
        ));
    }
    Ok(())
}
