use crate::algorithm::validate::{self as check, LEASE};
use crate::algorithm::Spec;
use crate::clock::Clock;
use crate::failure::{
    CircuitBreaker, CircuitState, FailureEvent, FailurePolicy, FallbackDecider, FallbackKind,
    FallbackLimiter,
};
use crate::limiter::{Ask, Core, Outcome, Pending, Plan, Settings};
use crate::store::{Mode, Store};
use crate::{ConfigError, Decision, Error, Quota, Reason};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// The most requests in flight one key may have.
const MAX_IN_FLIGHT: u64 = 1 << 20;

/// Limits how many requests per key are in flight at once; see the
/// [module docs](super).
///
/// Built like a [`Limiter`](crate::Limiter), with the same settings (prefix,
/// name, clock, timeout, failure policy, circuit breaker), and deciding on
/// the same path: every call is bounded by the timeout and answered by the
/// failure policy when the store fails.
#[derive(Clone)]
pub struct ConcurrencyLimiter {
    inner: Arc<ConcurrencyInner>,
}

struct ConcurrencyInner {
    core: Arc<Core>,
    /// The one limit: `max` leases of `lease` each.
    plan: Plan,
    max: u64,
    quota: Quota,
}

/// A slot held by one request. Dropping it releases the slot (through the
/// store, in the background when the store waits); [`release`](Self::release)
/// does it now.
///
/// A lease granted by [fail open](FailurePolicy::FailOpen) holds no slot
/// (there was no store to hold it in): its [`decision`](Self::decision) is
/// degraded, and releasing it does nothing.
#[must_use = "the slot is released as soon as the lease is dropped"]
pub struct Lease {
    limiter: ConcurrencyLimiter,
    key: String,
    id: String,
    decision: Decision,
    released: bool,
}

/// Unique lease ids across processes: a random number per process, then a
/// counter.
fn lease_id() -> String {
    static PROCESS: LazyLock<u64> = LazyLock::new(|| RandomState::new().build_hasher().finish());
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{:x}.{:x}", *PROCESS, NEXT.fetch_add(1, Ordering::Relaxed))
}

impl ConcurrencyLimiter {
    /// At most `max` requests in flight per key (1 to 2^20, checked by
    /// `build`), over `store`.
    pub fn builder(store: impl Into<Store>, max: u64) -> ConcurrencyLimiterBuilder {
        ConcurrencyLimiterBuilder {
            settings: Settings::new(store.into(), "concurrency"),
            max,
            lease: Duration::from_secs(60),
        }
    }

    /// Take a slot for `key`: `Ok(lease)` if fewer than `max` requests of
    /// this key are in flight, `Err(decision)` with the reason when not
    /// (full: [`OverLimit`](Reason::OverLimit), `retry_after` the time
    /// until the first lease expires; or the failure policy's
    /// [`FailClosed`](Reason::FailClosed)).
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    pub async fn acquire(&self, key: &str) -> Result<Result<Lease, Decision>, Error> {
        let (id, pending) = self.start_acquire(key);
        Ok(self.lease(key.to_owned(), id, &pending.await?))
    }

    /// What [`acquire`](Self::acquire) would say now, taking nothing:
    /// `remaining` is the number of free slots.
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    pub async fn peek(&self, key: &str) -> Result<Decision, Error> {
        Ok(self.start(key, Mode::Peek, "").await?.overall())
    }

    /// How many requests of `key` are in flight (at most `max`), from the
    /// store, or as the failure policy decides when the store fails (0 when
    /// it fails open, `max` when it fails closed).
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    pub async fn in_flight(&self, key: &str) -> Result<u64, Error> {
        let d = self.peek(key).await?;
        Ok(self.inner.max.saturating_sub(d.remaining()))
    }

    /// The most requests in flight per key.
    pub fn max(&self) -> u64 {
        self.inner.max
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.inner.core.name
    }

    /// What this limiter does when its store fails.
    pub fn failure_policy(&self) -> &FailurePolicy {
        self.inner.core.guard.policy()
    }

    /// The state of this limiter's circuit breaker.
    pub fn circuit_state(&self) -> CircuitState {
        self.inner.core.guard.circuit_state()
    }

    /// The limit as it reads on the wire: `max` per lease.
    pub(crate) fn quota(&self) -> Quota {
        self.inner.quota
    }

    fn start(&self, key: &str, mode: Mode, lease: &str) -> Pending<Outcome> {
        let inner = &*self.inner;
        inner.core.run(Ask {
            plan: &inner.plan,
            local: None,
            key,
            keys: &[],
            cost: 1,
            mode,
            counted: mode == Mode::Check,
            lease,
            slice: 0,
        })
    }

    /// Start acquiring a new lease for `key`: its id, and the decision.
    pub(crate) fn start_acquire(&self, key: &str) -> (String, Pending<Outcome>) {
        let id = lease_id();
        let pending = self.start(key, Mode::Check, &id);
        (id, pending)
    }

    /// The lease `id` of `key` if `decided` granted it.
    pub(crate) fn lease(
        &self,
        key: String,
        id: String,
        decided: &Outcome,
    ) -> Result<Lease, Decision> {
        let decision = decided.overall();
        if !decision.allowed() {
            return Err(decision);
        }
        Ok(Lease {
            limiter: self.clone(),
            key,
            id,
            decision,
            // Nothing was taken in the store to give back.
            released: matches!(decision.reason(), Reason::FailOpen | Reason::Exempt),
        })
    }

    /// Release lease `id` of `key`, granted by `decision`: in the store, or
    /// in the fallback that granted it.
    fn release(&self, key: &str, id: &str, decision: &Decision) -> Pending<Outcome> {
        if decision.is_degraded() {
            if let FailurePolicy::Fallback(f) = self.failure_policy() {
                return f.decide(key, 1, Mode::Refund, id).map(Outcome::one);
            }
        }
        self.start(key, Mode::Refund, id)
    }
}

impl Lease {
    /// The decision that granted this lease.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// Release the slot now, waiting for the store (at most the limiter's
    /// timeout).
    pub async fn release(mut self) {
        if self.released {
            return;
        }
        self.released = true;
        let pending = self.limiter.release(&self.key, &self.id, &self.decision);
        if let Err(e) = pending.await {
            tracing::warn!(error = %e, "floodgate: could not release a concurrency slot; its lease will expire");
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        // Released at once on a store that never waits; else in the
        // background. If it fails, the lease expires by itself.
        self.limiter
            .release(&self.key, &self.id, &self.decision)
            .detach("release of a concurrency lease (it will expire)");
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .field("decision", &self.decision)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for ConcurrencyLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimiter")
            .field("core", &self.inner.core)
            .field("max", &self.inner.max)
            .finish()
    }
}

impl FallbackDecider for ConcurrencyLimiter {
    fn kind(&self) -> FallbackKind {
        FallbackKind::Concurrency
    }

    fn decide(&self, key: &str, _cost: u64, mode: Mode, lease: &str) -> Pending<Decision> {
        self.start(key, mode, lease).map(|d| d.overall())
    }
}

impl From<ConcurrencyLimiter> for FallbackLimiter {
    fn from(limiter: ConcurrencyLimiter) -> Self {
        FallbackLimiter::new(Arc::new(limiter))
    }
}

/// Builds a [`ConcurrencyLimiter`]; see [`ConcurrencyLimiter::builder`].
#[must_use]
pub struct ConcurrencyLimiterBuilder {
    settings: Settings,
    max: u64,
    lease: Duration,
}

impl ConcurrencyLimiterBuilder {
    /// The namespace of every key this limiter writes (default
    /// `floodgate`); as [`LimiterBuilder::prefix`](crate::LimiterBuilder::prefix).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.prefix = prefix.into();
        self
    }

    /// The limiter's name (default `concurrency`); as
    /// [`LimiterBuilder::name`](crate::LimiterBuilder::name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.settings.name = name.into();
        self
    }

    /// Where the time of every decision comes from, instead of the store's
    /// own; as [`LimiterBuilder::clock`](crate::LimiterBuilder::clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.settings.clock = Some(Arc::new(clock));
        self
    }

    /// The longest a decision (acquire, release, peek) waits for the store
    /// (default 100 ms); as [`LimiterBuilder::timeout`](crate::LimiterBuilder::timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// What to decide when the store fails or times out (default
    /// [`FailurePolicy::FailOpen`]); a fallback must be a
    /// [`ConcurrencyLimiter`]. See [`crate::failure`].
    pub fn on_store_failure(mut self, policy: FailurePolicy) -> Self {
        self.settings.policy = policy;
        self
    }

    /// When to stop calling a failing store, and for how long; as
    /// [`LimiterBuilder::circuit_breaker`](crate::LimiterBuilder::circuit_breaker).
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.settings.breaker = breaker;
        self
    }

    /// Call `hook` for every decision the store could not make; as
    /// [`LimiterBuilder::failure_hook`](crate::LimiterBuilder::failure_hook).
    pub fn failure_hook(
        mut self,
        hook: impl Fn(&FailureEvent<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.settings.hook = Some(Arc::new(hook));
        self
    }

    /// How long a slot is held at most if never released (default 60 s;
    /// whole ms, 1 ms to 2^40 ms): longer than the slowest request.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Keys never limited and keys always refused
    /// ([`Exemptions`](crate::Exemptions)), as for a rate limiter
    /// ([`LimiterBuilder::exemptions`](crate::LimiterBuilder::exemptions)):
    /// an exempt key holds no slot, a blocked one gets none.
    pub fn exemptions(mut self, exemptions: crate::Exemptions) -> Self {
        self.settings.exemptions = Some(exemptions);
        self
    }

    /// Check the configuration and build the limiter; an error names the
    /// field that is wrong.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the field: `max`, `lease`, `prefix`, `name`,
    /// `timeout` or `on_store_failure` (a fallback that is not a concurrency
    /// limiter).
    pub fn build(self) -> Result<ConcurrencyLimiter, ConfigError> {
        if self.max == 0 || self.max > MAX_IN_FLIGHT {
            return Err(ConfigError::new("max", "must be between 1 and 2^20"));
        }
        let lease_ms = check::window(self.lease, LEASE)?;
        let core = self.settings.core(FallbackKind::Concurrency, None)?;
        let spec = Spec::Concurrency {
            max: self.max,
            lease_ms,
        };
        let plan = core.plan(vec![(None, spec)], 0);
        Ok(ConcurrencyLimiter {
            inner: Arc::new(ConcurrencyInner {
                core: Arc::new(core),
                plan,
                max: self.max,
                quota: spec.quota(),
            }),
        })
    }
}
