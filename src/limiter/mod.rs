//! [`Limiter`]: one algorithm over one store, usable without HTTP, and the
//! one decision path every limiter takes (`core.rs`).

mod allotments;
mod at_most;
mod block;
mod builder;
mod change;
mod core;
mod current;
mod debt;
mod deny_cache;
mod exemptions;
mod hot_keys;
mod keys;
mod later;
mod layer_call;
mod outcome;
mod own;
mod pause;
mod plan;
mod reserve;

pub use self::at_most::Grant;
pub use self::builder::LimiterBuilder;
pub(crate) use self::builder::Settings;
pub(crate) use self::core::{Ask, Core};
pub(crate) use self::debt::MAX_PARTS as MAX_DEBIT_PARTS;
pub use self::exemptions::Exemptions;
pub use self::hot_keys::HotKeys;
pub(crate) use self::layer_call::LayerCall;
use self::outcome::AsOverall;
pub(crate) use self::outcome::{Outcome, Overall};
use self::own::{Local, Versions};
use self::plan::decisions;
pub(crate) use self::plan::Plan;
pub use self::reserve::Reservation;
pub(crate) use crate::pending::Pending;

use crate::algorithm::{Algorithm, Quota};
use crate::failure::FallbackDecider;
use crate::failure::{CircuitState, FailurePolicy, FallbackKind, FallbackLimiter};
use crate::store::{Mode, Store};
use crate::{Decision, Decisions, Error};
use std::fmt;
use std::future::Future;
use std::sync::Arc;

/// Charges costs to keys with one algorithm, over one store.
///
/// `Clone + Send + Sync` and cheap to clone; works the same over a
/// [`MemoryStore`](crate::store::MemoryStore) or a
/// [`RedisStore`](crate::store::RedisStore). Every method takes the same
/// path: the [`Exemptions`], the timeout, the circuit breaker, the failure
/// policy, the metrics and the deny cache apply to each.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use floodgate::{algorithm::TokenBucket, clock::ManualClock, store::MemoryStore, Limiter};
///
/// let clock = ManualClock::new(0);
/// let limiter = Limiter::builder(MemoryStore::new(), TokenBucket::new(10, 10.0))
///     .prefix("rl")
///     .clock(clock.clone())
///     .build()?;
/// let d = limiter.check("ana", 4).await?;
/// assert!(d.allowed());
/// assert_eq!(d.remaining(), 6);
/// // peek: the key as it is now, consuming nothing.
/// assert_eq!(limiter.peek("ana").await?.remaining(), 6);
/// assert_eq!(limiter.peek("ana").await?.remaining(), 6);
/// // A cost of 0 reports the state as it is.
/// assert_eq!(limiter.check("ana", 0).await?.remaining(), 6);
/// assert!(limiter.check("ana", 7).await?.denied());
/// # Ok(()) }
/// ```
pub struct Limiter<A> {
    inner: Arc<LimiterInner<A>>,
}

struct LimiterInner<A> {
    core: Arc<Core>,
    /// The limiter's own limits: the current version, and those decisions
    /// in flight may have started under.
    versions: Versions<A>,
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
        LimiterBuilder::new(store.into(), algorithm)
    }

    /// A limiter with the defaults: prefix `floodgate`, name `default`, the
    /// store's own clock, a 100 ms timeout, failing open.
    pub fn new(store: impl Into<Store>, algorithm: A) -> Self {
        Self::builder(store, algorithm).build_defaults()
    }

    /// The limiter of `core` and `algorithm`, with what the hot keys make
    /// of it (checked: [`Core::sharing`]).
    pub(crate) fn from_core(core: Core, algorithm: A, sharing: Option<hot_keys::Sharing>) -> Self {
        let first = core.version(algorithm, sharing, 0);
        Self {
            inner: Arc::new(LimiterInner {
                core: Arc::new(core),
                versions: Versions::new(first),
            }),
        }
    }

    /// Charge `cost` to `key`: admitted if it fits, and then consumed;
    /// denied otherwise, consuming nothing. With several limits
    /// ([`Limits`](crate::algorithm::Limits)), admitted only if all admit,
    /// and then charged to all; the numbers are the most restrictive
    /// limit's (see [`check_all`](Self::check_all) for each).
    ///
    /// A cost of 0 is always admitted and reports the key's state. A cost
    /// above the limit can never fit: it is denied with no `retry_after`
    /// ([`Reason::CostTooHigh`](crate::Reason::CostTooHigh)).
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    // Not an `async fn`: its future is `overall`'s, not one around it (a
    // memory-store decision takes ~80 ns, and a layer of futures adds a
    // copy of the result that shows).
    pub fn check<'a>(
        &'a self,
        key: &'a str,
        cost: u64,
    ) -> impl Future<Output = Result<Decision, Error>> + Send + 'a {
        self.overall(None, key, cost, Mode::Check)
    }

    /// Like [`check`](Self::check), with each limit's decision too (what
    /// the layer writes in `RateLimit-Policy` and `RateLimit`).
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    pub async fn check_all(&self, key: &str, cost: u64) -> Result<Decisions, Error> {
        // Decided and reported under the same limits, whatever changes meanwhile.
        let version = self.version();
        let ask = ask(
            &version.plan,
            version.local.as_ref(),
            key,
            cost,
            Mode::Check,
        );
        let decided = self.inner.core.run(ask).await?;
        Ok(decisions(&version.plan, &decided))
    }

    /// Like [`check_all`](Self::check_all), with the limits of `limits`
    /// (the limiter's algorithm type) instead of the limiter's own, for this call only: limits resolved per
    /// request (a customer's plan: free 10/s, pro 100/s) without a limiter
    /// per tier. A key's state is shared by limits of the same name and
    /// algorithm, so a customer who changes plan keeps what they used.
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    pub async fn check_with(&self, key: &str, cost: u64, limits: &A) -> Result<Decisions, Error> {
        let plan = self.plan(limits);
        let decided = self.start(Some(&plan), key, cost, Mode::Check).await?;
        Ok(decisions(&plan, &decided))
    }

    /// The key as it is now, consuming nothing: `remaining` is what remains
    /// now (as `check(key, 0)` reports it, and as `redis_rate`'s `AllowN`
    /// with n = 0 and upstash's `getRemaining` do), `reset_after` when the
    /// key is full again. A peek is always admitted, and is not counted in
    /// the metrics. Whether a request of cost `c` would fit now is
    /// `remaining() >= c`.
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    pub async fn peek(&self, key: &str) -> Result<Decision, Error> {
        self.overall(None, key, 0, Mode::Peek).await
    }

    /// Give back `cost` that an earlier `check` charged to `key` (a request
    /// that failed on the server, or that a later limit denied). Returns the
    /// state after the refund. What has already expired is not given back;
    /// the sliding log gives back its newest entries.
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    pub async fn refund(&self, key: &str, cost: u64) -> Result<Decision, Error> {
        self.overall(None, key, cost, Mode::Refund).await
    }

    /// Like [`refund`](Self::refund), for a charge made with
    /// [`check_with`](Self::check_with) and the same `limits`.
    ///
    /// # Errors
    /// [`Error::Store`](crate::Error::Store), only when the store fails and the
    /// failure policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)
    /// (or a fallback whose own store fails that way); any other failure is
    /// answered by the failure policy.
    pub async fn refund_with(&self, key: &str, cost: u64, limits: &A) -> Result<Decision, Error> {
        let plan = self.plan(limits);
        self.overall(Some(&plan), key, cost, Mode::Refund).await
    }

    /// What the limits of `plan` (the limiter's own when `None`) add up
    /// to: what `check`, `peek` and `refund` return.
    #[inline(always)]
    async fn overall(
        &self,
        plan: Option<&Plan>,
        key: &str,
        cost: u64,
        mode: Mode,
    ) -> Result<Decision, Error> {
        let pending = self
            .inner
            .core
            .run_into(self.ask(plan, key, cost, mode), AsOverall);
        // Read where it lies, into the place it is returned to: see `Outcome`.
        let pending = match pending.read_ready(Overall::decision) {
            Ok(decision) => return Ok(decision),
            Err(pending) => pending,
        };
        match pending.now() {
            Ok(ready) => ready.map(|t| t.decision()),
            Err(later) => later.await.map(|t| t.decision()),
        }
    }

    /// One call of the decision path, under `plan` or else the limiter's
    /// own limits as they are now: read once here (one atomic load), and
    /// kept by the decision to its end whatever changes meanwhile.
    #[inline(always)]
    fn ask<'a>(&'a self, plan: Option<&'a Plan>, key: &'a str, cost: u64, mode: Mode) -> Ask<'a> {
        if let Some(plan) = plan {
            return ask(plan, None, key, cost, mode);
        }
        let version = self.version();
        ask(&version.plan, version.local.as_ref(), key, cost, mode)
    }

    /// Start a decision of `plan` (the limiter's own when `None`): what
    /// every method above does.
    #[inline(always)]
    fn start(&self, plan: Option<&Plan>, key: &str, cost: u64, mode: Mode) -> Pending<Outcome> {
        self.inner.core.run(self.ask(plan, key, cost, mode))
    }

    /// What this limiter does when its store fails.
    pub fn failure_policy(&self) -> &FailurePolicy {
        self.inner.core.guard.policy()
    }

    /// The state of this limiter's circuit breaker (always
    /// [`Closed`](CircuitState::Closed) over a memory store).
    pub fn circuit_state(&self) -> CircuitState {
        self.inner.core.guard.circuit_state()
    }

    /// The algorithm and its parameters: the current ones, after any
    /// [`set_algorithm`](Self::set_algorithm).
    pub fn algorithm(&self) -> &A {
        &self.inner.versions.current().algorithm
    }

    /// Each limit's name and quota, as they read on the wire (the current
    /// limits).
    pub fn quotas(&self) -> impl Iterator<Item = (&str, Quota)> {
        self.version()
            .plan
            .limits()
            .map(|(name, quota)| (&**name, quota))
    }

    /// The limiter's name: its namespace in the store and the name of its
    /// limit in `RateLimit` headers (for [`Limits`](crate::algorithm::Limits),
    /// each limit has its own).
    pub fn name(&self) -> &str {
        &self.inner.core.name
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.core.store
    }

    /// The [`Exemptions`] given to the builder, if any: a handle to
    /// change them at run time.
    pub fn exemptions(&self) -> Option<&Exemptions> {
        self.inner.core.exemptions.as_ref()
    }
}

/// One call of the decision path under `plan` (`local`: what this process
/// keeps under the limiter's own limits, when `plan` is theirs).
#[inline(always)]
fn ask<'a>(
    plan: &'a Plan,
    local: Option<&'a Arc<Local>>,
    key: &'a str,
    cost: u64,
    mode: Mode,
) -> Ask<'a> {
    Ask {
        plan,
        local,
        key,
        keys: &[],
        cost,
        mode,
        counted: mode.charges(),
        lease: "",
        slice: 0,
    }
}

impl<A: fmt::Debug> fmt::Debug for Limiter<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiter")
            .field("core", &self.inner.core)
            .field("algorithm", &self.inner.versions.current().algorithm)
            .finish()
    }
}

impl<B: Algorithm> FallbackDecider for Limiter<B> {
    fn kind(&self) -> FallbackKind {
        FallbackKind::Rate
    }

    fn decide(&self, key: &str, cost: u64, mode: Mode, _lease: &str) -> Pending<Decision> {
        self.start(None, key, cost, mode).map(|d| d.overall())
    }
}

impl<B: Algorithm> From<Limiter<B>> for FallbackLimiter {
    fn from(limiter: Limiter<B>) -> Self {
        FallbackLimiter::new(Arc::new(limiter))
    }
}
