use crate::clock::Clock;
use crate::store::{key::storage_key, Store};
use crate::{ConfigError, Error};
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// Limits how many requests per key are in flight at once; see the
/// [module docs](super).
#[derive(Clone)]
pub struct ConcurrencyLimiter {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    prefix: String,
    name: String,
    max: u64,
    lease_ms: u64,
    clock: Option<Arc<dyn Clock>>,
}

/// A slot held by one request. Dropping it releases the slot (on a tokio
/// task when the store is Redis); [`release`](Self::release) does it now.
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct Permit {
    limiter: ConcurrencyLimiter,
    key: String,
    id: String,
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
    /// At most `max` requests in flight per key, over `store`.
    pub fn builder(store: impl Into<Store>, max: u64) -> ConcurrencyLimiterBuilder {
        ConcurrencyLimiterBuilder {
            store: store.into(),
            max,
            lease: Duration::from_secs(60),
            prefix: "floodgate".into(),
            name: "concurrency".into(),
            clock: None,
        }
    }

    /// Take a slot for `key`: `Some(permit)` if fewer than `max` requests of
    /// this key are in flight, `None` if it is full.
    pub async fn acquire(&self, key: &str) -> Result<Option<Permit>, Error> {
        let id = lease_id();
        let reply = self.call(key, "acquire", &id).await?;
        Ok((reply[0] == 1).then(|| Permit {
            limiter: self.clone(),
            key: key.to_string(),
            id,
            released: false,
        }))
    }

    /// How many requests of `key` are in flight (leases not yet expired
    /// count until they are swept by the next acquire).
    pub async fn in_flight(&self, key: &str) -> Result<u64, Error> {
        Ok(self.call(key, "release", "").await?[2].max(0) as u64)
    }

    /// The most requests in flight per key.
    pub fn max(&self) -> u64 {
        self.inner.max
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    async fn call(&self, key: &str, op: &str, id: &str) -> Result<[i64; 4], Error> {
        let inner = &*self.inner;
        let storage = storage_key(&inner.prefix, &inner.name, "cc", key);
        let now = inner
            .clock
            .as_ref()
            .map(|c| crate::clock::bounded(c.now_ms()));
        Ok(inner
            .store
            .lease(&storage, now, op, id, inner.max, inner.lease_ms)
            .await?)
    }
}

impl Permit {
    /// Release the slot now, waiting for the store.
    pub async fn release(mut self) {
        self.released = true;
        if let Err(e) = self.limiter.call(&self.key, "release", &self.id).await {
            tracing::warn!(error = %e, "floodgate: could not release a concurrency slot; its lease will expire");
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let (limiter, key, id) = (
            self.limiter.clone(),
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.id),
        );
        if let Store::Memory(m) = &limiter.inner.store {
            // Memory needs no waiting: release right here.
            let inner = &*limiter.inner;
            let storage = storage_key(&inner.prefix, &inner.name, "cc", &key);
            let now = inner
                .clock
                .as_ref()
                .map(|c| crate::clock::bounded(c.now_ms()));
            let now = crate::store::memory_now(now);
            m.lease(&storage, now, "release", &id, inner.max, inner.lease_ms);
            return;
        }
        crate::layer::spawn_settlement(async move {
            if let Err(e) = limiter.call(&key, "release", &id).await {
                tracing::warn!(error = %e, "floodgate: could not release a concurrency slot; its lease will expire");
            }
        });
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").field("id", &self.id).finish()
    }
}

impl fmt::Debug for ConcurrencyLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimiter")
            .field("name", &self.inner.name)
            .field("max", &self.inner.max)
            .field("lease_ms", &self.inner.lease_ms)
            .finish()
    }
}

/// Builds a [`ConcurrencyLimiter`].
#[must_use]
pub struct ConcurrencyLimiterBuilder {
    store: Store,
    max: u64,
    lease: Duration,
    prefix: String,
    name: String,
    clock: Option<Arc<dyn Clock>>,
}

impl ConcurrencyLimiterBuilder {
    /// How long a slot is held at most if never released (default 60 s):
    /// longer than the slowest request.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// The namespace of every key (default `floodgate`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The limiter's name (default `concurrency`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Take the time from `clock` (for tests) instead of the store's.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// Check the configuration and build the limiter.
    pub fn build(self) -> Result<ConcurrencyLimiter, ConfigError> {
        if self.max == 0 || self.max > 1 << 20 {
            return Err(ConfigError::new("max", "must be between 1 and 2^20"));
        }
        let lease_ms = crate::algorithm::validate_window("lease", self.lease)?;
        crate::limiter::validate_names(&self.prefix, &self.name)?;
        Ok(ConcurrencyLimiter {
            inner: Arc::new(Inner {
                store: self.store,
                prefix: self.prefix,
                name: self.name,
                max: self.max,
                lease_ms,
                clock: self.clock,
            }),
        })
    }
}
