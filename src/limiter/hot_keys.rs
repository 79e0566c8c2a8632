//! The option that shares a hot key's quota among app servers by
//! allotments: [`HotKeys`], and what it makes of a limiter's limits.

use crate::algorithm::Spec;
use crate::ConfigError;
use std::time::Duration;

/// Hot keys decided from local allotments (off by default; set with
/// [`LimiterBuilder::hot_keys`](crate::LimiterBuilder::hot_keys)).
///
/// A key is **hot** on an app server when this server decides it at least
/// [`threshold`](Self::threshold) times in a second (default 100). For a
/// hot key, the server takes an **allotment**: a slice of the key's quota,
/// charged in the store at once, in the same call that decides the request
/// at hand. It then decides that key from memory until the slice is spent
/// or the allotment ends, and takes the next slice the same way; requests
/// for the key that arrive while a slice is being taken wait for it (at
/// most the limiter's timeout), so a burst takes one slice, not one each.
/// Cold keys are decided by the store as before. (On a memory store the
/// same happens, for nothing: use hot keys with Redis.)
///
/// Every admitted unit was charged in Redis before it was admitted, so the
/// servers together never admit more than the store would have. The price
/// is fairness: a server may deny while another still holds unused units,
/// and units a server holds when the key cools (or the server dies) are
/// lost to the others until the algorithm refills them: at most one slice
/// per server.
///
/// **The slice** is `limit / (10 × servers)` units, `limit`
/// being the smallest of the limiter's limits (a bucket's capacity, GCRA's
/// burst) and `servers` the number of app servers that share the key
/// (given to [`new`](Self::new)). The units held at any moment then add up
/// to at most a tenth of the limit, so when demand is above the limit the
/// fleet admits at least 90 % of it. A slice under 2 units is refused at
/// build: it would cost a store call per request anyway.
///
/// **How long an allotment lasts**, so that the algorithm's own bound holds:
/// - fixed window and sliding window counter: until the end of the window
///   it was charged in. Exact: the units admitted in a window were all
///   charged in it, and a sliding window's estimate only falls during a
///   window, so a unit admitted later than it was charged would have been
///   admitted then too.
/// - token bucket and GCRA: as long as the bucket takes to refill the
///   slice, and then the unused units are given back (a refund). The
///   long-run rate is exact; a unit is admitted at most that long after it
///   was charged, so over any interval the fleet can admit up to one slice
///   more than the bucket's own bound (burst + rate × interval).
/// - sliding log and leaky bucket: refused at build. A log records each
///   request's own time, and the leaky bucket's delay is each request's
///   place in the queue: units taken ahead cannot keep either definition.
///
/// When a server's take finds no room for a slice (the key is spent for
/// now), the request is decided by the store alone, and the server then
/// denies that key itself until the store's wait for a slice has passed,
/// as if another server held the units: one call per slice, not one per
/// request, while the key is over its limit.
///
/// **The numbers on a local decision**: `remaining` is what the store
/// reported left when the slice was taken, plus what this server's slice
/// still holds (other servers may have spent some since); `reset_after`
/// and the waits count down from that reply. A denial comes from the
/// store, from the local denial of a spent key above (its `retry_after`
/// is when this server will ask again), or from the deny cache, which hot
/// keys turn on (see
/// [`LimiterBuilder::deny_cache`](crate::LimiterBuilder::deny_cache) for
/// when it is exact).
///
/// Only the limiter's own limits use allotments, for `check`, `check_all`
/// and the layer's charges; per-request limits (`check_with`, a layer's
/// `limits_for`), peeks and refunds go to the store. The metrics count
/// local decisions and the units taken, given back and left to expire
/// ([`metrics`](crate::metrics)); the guide's page
/// [hot keys](crate::guide::hot_keys) says when to turn this on.
///
/// ```
/// # fn main() -> Result<(), floodgate::ConfigError> {
/// use floodgate::algorithm::FixedWindow;
/// use floodgate::store::MemoryStore;
/// use floodgate::{HotKeys, Limiter};
/// use std::time::Duration;
///
/// // 10 000 a second per partner key, shared by 8 app servers: slices of 125.
/// let limiter = Limiter::builder(
///     MemoryStore::new(),
///     FixedWindow::new(10_000, Duration::from_secs(1)),
/// )
/// .name("partners")
/// .hot_keys(HotKeys::new(8).threshold(200))
/// .build()?;
/// # let _ = limiter; Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotKeys {
    servers: u32,
    threshold: u32,
    max_keys: usize,
}

impl HotKeys {
    /// Hot keys for a key shared by `servers` app servers (the slice is
    /// sized from it: see above). At least 1, checked at build.
    #[must_use]
    pub const fn new(servers: u32) -> Self {
        Self {
            servers,
            threshold: 100,
            max_keys: 10_000,
        }
    }

    /// How many decisions of one key in a second make it hot on this
    /// server (default 100). At least 1, checked at build.
    #[must_use]
    pub const fn threshold(mut self, per_second: u32) -> Self {
        self.threshold = per_second;
        self
    }

    /// At most this many keys are followed at once (default 10 000); past
    /// that, keys that were quiet for a second are forgotten, and a new key
    /// is decided by the store until there is room. At least 1.
    #[must_use]
    pub const fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The number of servers sharing a key.
    pub const fn servers(&self) -> u32 {
        self.servers
    }

    /// Its three settings: `servers`, `threshold` and `max_keys` (what the
    /// `serde` feature writes).
    #[cfg(feature = "serde")]
    pub(crate) const fn settings(&self) -> (u32, u32, usize) {
        (self.servers, self.threshold, self.max_keys)
    }

    /// The check of `build` that needs no limits: each setting at least 1.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `hot_keys`.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        if self.servers == 0 || self.threshold == 0 || self.max_keys == 0 {
            return Err(Self::zero());
        }
        Ok(())
    }

    /// The error of a setting at 0.
    pub(crate) fn zero() -> ConfigError {
        ConfigError::new(
            "hot_keys",
            "servers, threshold and max_keys must each be at least 1",
        )
    }
}

/// What [`HotKeys`] makes of one limiter's limits, checked at build.
#[derive(Debug, Clone)]
pub(crate) struct Sharing {
    /// Units a server takes at a time.
    pub(crate) slice: u64,
    /// Decisions a second that make a key hot.
    pub(crate) threshold: u32,
    pub(crate) max_keys: usize,
    /// How long an allotment lasts, per limit.
    pub(crate) lifetimes: Box<[Lifetime]>,
}

/// How long an allotment lasts for one limit, from the reply of the call
/// that took it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Lifetime {
    /// Until the window ends: the reply's `reset_after` less `window_ms`
    /// (a fixed window's reset is its end: 0; a sliding window's is the end
    /// of the next window).
    WindowEnd { past_end_ms: u64 },
    /// As long as the bucket refills the slice: `ms_per_unit` × slice; the
    /// unused units are then given back.
    Refill { ms_per_unit: f64 },
}

impl Sharing {
    /// Check `hot` against the limiter's `specs`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `hot_keys`.
    pub(crate) fn new(hot: HotKeys, specs: &[Spec]) -> Result<Self, ConfigError> {
        let field = "hot_keys";
        hot.check()?;
        let lifetimes = specs
            .iter()
            .map(|spec| match *spec {
                Spec::FixedWindow { .. } => Ok(Lifetime::WindowEnd { past_end_ms: 0 }),
                Spec::SlidingWindow { window_ms, .. } => Ok(Lifetime::WindowEnd {
                    past_end_ms: window_ms,
                }),
                Spec::TokenBucket { rate, .. } => Ok(Lifetime::Refill {
                    ms_per_unit: 1000.0 / rate,
                }),
                Spec::Gcra { interval_ms, .. } => Ok(Lifetime::Refill {
                    ms_per_unit: interval_ms,
                }),
                Spec::SlidingLog { .. } | Spec::LeakyBucket { .. } | Spec::Concurrency { .. } => {
                    Err(ConfigError::new(
                        field,
                        "the sliding log and the leaky bucket cannot be shared by allotments \
                         (a log keeps each request's own time, a leaky bucket each request's \
                         place in its queue): use a fixed window, sliding window, token bucket \
                         or GCRA",
                    ))
                }
            })
            .collect::<Result<Box<[_]>, _>>()?;
        let smallest = specs.iter().map(Spec::max_cost).min().unwrap_or(0);
        let slice = smallest / (10 * u64::from(hot.servers));
        if slice < 2 {
            // Slices of one unit would cost a store call per request anyway.
            return Err(ConfigError::new(
                field,
                "the limit is too small to share: limit / (10 × servers) must be at least 2",
            ));
        }
        Ok(Self {
            slice,
            threshold: hot.threshold,
            max_keys: hot.max_keys,
            lifetimes,
        })
    }

    /// Whether unused units go back to the store when an allotment ends (a
    /// bucket's: a window's end with their window).
    pub(crate) fn gives_back(&self) -> bool {
        self.lifetimes
            .iter()
            .all(|l| matches!(l, Lifetime::Refill { .. }))
    }

    /// How long an allotment of `units` lasts, from each limit's
    /// `reset_after` in the reply that took it.
    pub(crate) fn lifetime(&self, units: u64, resets: impl Iterator<Item = Duration>) -> u64 {
        self.lifetimes
            .iter()
            .zip(resets)
            .map(|(l, reset)| match *l {
                Lifetime::WindowEnd { past_end_ms } => {
                    crate::clock::millis(reset).saturating_sub(past_end_ms)
                }
                // Both below 2^40 (validate.rs): the product is exact enough,
                // and whole ms rounded down never outlive the refill.
                #[allow(
                    clippy::cast_precision_loss,
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss
                )]
                Lifetime::Refill { ms_per_unit } => (ms_per_unit * units as f64).floor() as u64,
            })
            .min()
            .unwrap_or(0)
    }
}
