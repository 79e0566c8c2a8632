//! What every limiter is built with: the store, the names, the clock, and
//! what happens when the store fails. Both builders ([`LimiterBuilder`] and
//! the concurrency limiter's) hold them as one [`Settings`], checked and
//! turned into a limiter's core in one place, and set them with the same
//! methods, written out on each.

use super::core::Core;
use super::exemptions::Exemptions;
use super::hot_keys::HotKeys;
use super::Limiter;
use crate::algorithm::Algorithm;
use crate::clock::Clock;
use crate::failure::{
    self, CircuitBreaker, FailureEvent, FailureHook, FailurePolicy, FallbackKind, Guard,
};
use crate::metrics::Metrics;
use crate::store::Store;
use crate::ConfigError;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

const MAX_PREFIX: usize = 64;
const MAX_NAME: usize = 64;

/// The settings every limiter has, as a builder collects them.
pub(crate) struct Settings {
    store: Store,
    pub(crate) prefix: String,
    pub(crate) name: String,
    pub(crate) clock: Option<Arc<dyn Clock>>,
    pub(crate) timeout: Duration,
    pub(crate) policy: FailurePolicy,
    pub(crate) breaker: CircuitBreaker,
    pub(crate) hook: Option<FailureHook>,
    pub(crate) exemptions: Option<Exemptions>,
}

impl Settings {
    /// The defaults: prefix `floodgate`, the given name, the store's clock,
    /// a 100 ms timeout, fail open, the default breaker.
    pub(crate) fn new(store: Store, name: &str) -> Self {
        Self {
            store,
            prefix: crate::store::key::DEFAULT_PREFIX.into(),
            name: name.into(),
            clock: None,
            timeout: failure::DEFAULT_TIMEOUT,
            policy: FailurePolicy::default(),
            breaker: CircuitBreaker::default(),
            hook: None,
            exemptions: None,
        }
    }

    /// Check the settings of a limiter of `kind` and make its core: an
    /// error naming the field otherwise.
    pub(crate) fn core(
        self,
        kind: FallbackKind,
        deny_cache: Option<NonZeroUsize>,
    ) -> Result<Core, ConfigError> {
        validate_names(&self.prefix, &self.name)?;
        if self.timeout < Duration::from_millis(1) {
            return Err(ConfigError::new("timeout", "must be at least 1 ms"));
        }
        if let FailurePolicy::Fallback(f) = &self.policy {
            if f.kind() != kind {
                let want = match kind {
                    FallbackKind::Rate => "a rate limiter falls back to a `Limiter`",
                    FallbackKind::Concurrency => {
                        "a concurrency limiter falls back to a `ConcurrencyLimiter`"
                    }
                };
                return Err(ConfigError::new("on_store_failure", want));
            }
        }
        Ok(self.into_core(deny_cache))
    }

    /// The core, unchecked: for settings known to be valid.
    pub(crate) fn into_core(self, deny_cache: Option<NonZeroUsize>) -> Core {
        Core {
            store: self.store,
            metrics: Metrics::new(&self.name),
            name: self.name.into(),
            prefix: self.prefix.into(),
            clock: self.clock,
            guard: Guard::new(self.timeout, self.policy, self.breaker, self.hook),
            deny_cache,
            hot_keys: None,
            wait: self.timeout,
            exemptions: self.exemptions,
        }
    }
}

/// Prefix: at most 64 bytes, no braces (they would move keys between
/// cluster slots). Name: 1 to 64 characters of `A-Z a-z 0-9 _ - .`.
fn validate_names(prefix: &str, name: &str) -> Result<(), ConfigError> {
    if prefix.len() > MAX_PREFIX || prefix.contains(['{', '}']) {
        return Err(ConfigError::new(
            "prefix",
            "must be at most 64 bytes without `{` or `}`",
        ));
    }
    let name_ok = crate::algorithm::validate::is_name_char;
    if name.is_empty() || name.len() > MAX_NAME || !name.chars().all(name_ok) {
        return Err(ConfigError::new(
            "name",
            "must be 1 to 64 characters of A-Z a-z 0-9 _ - .",
        ));
    }
    Ok(())
}

/// Builds a [`Limiter`]; see [`Limiter::builder`].
#[must_use]
pub struct LimiterBuilder<A> {
    settings: Settings,
    algorithm: A,
    deny_cache: Option<NonZeroUsize>,
    hot_keys: Option<HotKeys>,
}

impl<A: Algorithm> LimiterBuilder<A> {
    pub(crate) fn new(store: Store, algorithm: A) -> Self {
        Self {
            settings: Settings::new(store, "default"),
            algorithm,
            deny_cache: None,
            hot_keys: None,
        }
    }

    /// The namespace of every key this limiter writes (default
    /// `floodgate`). At most 64 bytes, no `{` or `}`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.prefix = prefix.into();
        self
    }

    /// The limiter's name: keys of limiters with different names never
    /// collide, and it names the limit in headers and metrics.
    /// 1 to 64 characters of `A-Z a-z 0-9 _ - .`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.settings.name = name.into();
        self
    }

    /// Take the time of every decision from `clock` instead of the store's
    /// own (Redis `TIME`, or a [`MonotonicClock`](crate::clock::MonotonicClock)
    /// for memory). For tests, a [`ManualClock`](crate::clock::ManualClock);
    /// in production prefer the default, one time source for all app
    /// servers.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.settings.clock = Some(Arc::new(clock));
        self
    }

    /// The longest a decision waits for the store (default 100 ms,
    /// [`DEFAULT_TIMEOUT`](crate::failure::DEFAULT_TIMEOUT); at least 1 ms):
    /// the whole call, connection and code loading included. When it
    /// passes, the [failure policy](Self::on_store_failure) decides. A
    /// memory store never waits. See [`crate::failure`] for why 100 ms.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.settings.timeout = timeout;
        self
    }

    /// What to decide when the store fails or times out (default
    /// [`FailurePolicy::FailOpen`]). See [`crate::failure`] for how to
    /// choose.
    pub fn on_store_failure(mut self, policy: FailurePolicy) -> Self {
        self.settings.policy = policy;
        self
    }

    /// When to stop calling a failing store, and for how long (default 5
    /// consecutive failures, 500 ms). [`CircuitBreaker::disabled`] never
    /// stops calling it.
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.settings.breaker = breaker;
        self
    }

    /// Call `hook` for every decision the store could not make, with what
    /// the policy decided: the place for alerts. It runs on the request's
    /// task: keep it short and non-blocking.
    pub fn failure_hook(
        mut self,
        hook: impl Fn(&FailureEvent<'_>) + Send + Sync + 'static,
    ) -> Self {
        self.settings.hook = Some(Arc::new(hook));
        self
    }

    /// Answer denials locally (off by default): once a key is denied until
    /// some time, the same request (same key, same cost) is denied again
    /// until then without calling the store, with the same answer. A client
    /// that keeps hammering while denied then costs no Redis call at all.
    /// At most `max_keys` denials are remembered; past that, new ones are
    /// simply not cached.
    ///
    /// It only skips calls the store would certainly deny: until the time a
    /// denial names, a key only fills up, unless something gives room back.
    /// So it is safe exactly when nothing refunds this limiter's keys from
    /// another process (this process's own refunds clear the entry): no
    /// [`refund`](Limiter::refund) and no layer refunding
    /// ([`RateLimitLayer::refund_inner_denials`](crate::layer::RateLimitLayer::refund_inner_denials)
    /// is on by default, `refund_when`) on other app servers. That is why it
    /// is off by default. Per-request limits
    /// ([`check_with`](Limiter::check_with)) bypass it. A cached denial
    /// reports the numbers of the original one, its waits shortened by the
    /// time since: requests admitted meanwhile by other app servers can make
    /// `remaining` and the waits a little optimistic, never the decision.
    pub fn deny_cache(mut self, max_keys: NonZeroUsize) -> Self {
        self.deny_cache = Some(max_keys);
        self
    }

    /// Decide hot keys from allotments: slices of a hot key's quota taken
    /// from the store, so that many app servers share one key without a
    /// store call per request, and never admit more than the limit
    /// together. Off by default; see [`HotKeys`] for what it guarantees
    /// for each algorithm, and the guide's [hot keys](crate::guide::hot_keys).
    /// It turns the [deny cache](Self::deny_cache) on (for `max_keys`
    /// keys) unless that is set.
    pub fn hot_keys(mut self, hot_keys: HotKeys) -> Self {
        self.hot_keys = Some(hot_keys);
        self
    }

    /// Keys never limited and keys always refused ([`Exemptions`]): checked
    /// first, on every entry, before the deny cache and the store. Keep a
    /// clone of the handle to change the lists at run time; one handle may
    /// serve several limiters.
    pub fn exemptions(mut self, exemptions: Exemptions) -> Self {
        self.settings.exemptions = Some(exemptions);
        self
    }

    /// Check the configuration and build the limiter; an error names the
    /// field that is wrong.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the field: `prefix`, `name`, `timeout`,
    /// `on_store_failure` (a fallback that is not a rate limiter) or
    /// `hot_keys` (a limit in shadow mode, a sliding log or leaky bucket,
    /// a zero setting, or a limit too small to share).
    pub fn build(self) -> Result<Limiter<A>, ConfigError> {
        let mut core = self.settings.core(FallbackKind::Rate, self.deny_cache)?;
        core.hot_keys = self.hot_keys;
        // The same check as a change of limits (`Limiter::set_algorithm`).
        let sharing = core.sharing(&self.algorithm)?;
        Ok(Limiter::from_core(core, self.algorithm, sharing))
    }

    /// The limiter of the default settings, which are valid.
    pub(crate) fn build_defaults(self) -> Limiter<A> {
        Limiter::from_core(self.settings.into_core(None), self.algorithm, None)
    }
}
