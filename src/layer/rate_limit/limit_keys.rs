//! Several keys, one decision: [`RateLimitLayer::key_for`].

use std::marker::PhantomData;
use std::sync::Arc;

use super::layer::{RateLimitConfig, RateLimitLayer};
use crate::algorithm::Algorithm;
use crate::key::{KeyExtractor, KeyFor};
use crate::ConfigError;

impl<K: KeyExtractor, A: Algorithm, C> RateLimitLayer<K, A, C> {
    /// Charge the limit named `limit` (of the limiter's
    /// [`Limits`](crate::algorithm::Limits)) to the key `extractor` takes
    /// from the request, instead of the layer's key: per user and global,
    /// per API key and per organisation, in **one decision**, all or nothing
    /// ([`Limiter::check_keys`](crate::Limiter::check_keys)). A request
    /// refused by one limit charges none, and with one store call a stalled
    /// Redis costs one timeout, where two stacked layers cost two.
    ///
    /// The layer's extractor becomes one that yields every limit's key
    /// ([`KeyFor`]); a request lacking any of them is answered 400 (gRPC
    /// `INVALID_ARGUMENT`) before anything is charged.
    ///
    /// ```
    /// # fn main() -> Result<(), floodgate::ConfigError> {
    /// use floodgate::algorithm::{Gcra, Limits};
    /// use floodgate::key::{Global, Header};
    /// use floodgate::{layer::RateLimitLayer, store::MemoryStore, Limiter};
    /// use std::time::Duration;
    ///
    /// let limits = Limits::new("user", Gcra::new(10, Duration::from_secs(1)))
    ///     .try_with("org", Gcra::new(100, Duration::from_secs(1)))?
    ///     .try_with("global", Gcra::new(1_000, Duration::from_secs(1)))?;
    /// let layer = RateLimitLayer::new(Limiter::new(MemoryStore::new(), limits), Header::try_new("x-user")?)
    ///     // "user" takes the layer's key; "org" the x-org header; "global" one key for all.
    ///     .key_for("org", Header::try_new("x-org")?)?
    ///     .key_for("global", Global::new())?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A [`ConfigError`] naming `key_for` when the limiter has no limit
    /// named `limit`, or that limit has a key of its own already. (Limits
    /// resolved per request, [`limits_for`](Self::limits_for), take the
    /// keys of the limits of the same names; a limit with no key of its own
    /// takes the layer's.)
    pub fn key_for<E: KeyExtractor>(
        self,
        limit: &str,
        extractor: E,
    ) -> Result<RateLimitLayer<KeyFor<K, E>, A, C>, ConfigError> {
        let version = self.config.limiter.version();
        if !version.plan.names.iter().any(|n| &**n == limit) {
            let why = format!("the limiter has no limit named {limit:?}");
            return Err(ConfigError::new("key_for", why));
        }
        if self.config.limit_keys.iter().any(|l| &**l == limit) {
            let why = format!("the limit {limit:?} has a key of its own already");
            return Err(ConfigError::new("key_for", why));
        }
        let c = Arc::unwrap_or_clone(self.config);
        let mut limit_keys = c.limit_keys;
        limit_keys.push(limit.into());
        let config = RateLimitConfig {
            extractor: KeyFor::new(c.extractor, limit, extractor),
            limit_keys,
            limiter: c.limiter,
            pricing: c.pricing,
            limits_for: c.limits_for,
            counting: c.counting,
            refund_inner: c.refund_inner,
            actual_cost: c.actual_cost,
            waiting: c.waiting,
            seats: c.seats,
            responder: c.responder,
        };
        Ok(RateLimitLayer {
            config: Arc::new(config),
            charging: PhantomData,
        })
    }
}
