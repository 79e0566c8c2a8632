//! Where rate-limit state lives: in this process ([`MemoryStore`]), in
//! Redis ([`RedisStore`]) or in a Redis Cluster ([`RedisClusterStore`]). All
//! make the same decisions, decision by decision.
//!
//! A limiter takes any of them, or a [`Store`]: any store, chosen at run
//! time (`REDIS_URL` set or not). Only this module knows which store is
//! which: limiters hand every store the same batch (which keys, which
//! algorithm, what to do) through one internal trait, and a store that never
//! waits (memory) answers it at once, the others with a future.
//!
//! ```
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use floodgate::store::{MemoryStore, RedisStore, Store};
//!
//! let store: Store = match std::env::var("REDIS_URL") {
//!     Ok(url) => RedisStore::from_url(&url)?.into(),
//!     Err(_) => MemoryStore::new().into(),
//! };
//! # Ok(()) }
//! ```

mod error;
pub(crate) mod key;
mod memory;
mod remote;

pub use self::error::{StoreError, StoreErrorKind};
pub use self::memory::{MemoryStats, MemoryStore, DEFAULT_MAX_KEYS};
pub use self::remote::{
    NodeReport, ProbeReport, RedisClusterStore, RedisClusterStoreBuilder, RedisStore,
    RedisStoreBuilder,
};
/// The Redis client floodgate is built with (redis-rs 1.x), re-exported on
/// purpose: to configure a cluster client yourself
/// ([`RedisClusterStore::from_client`]), and to read the Redis error of a
/// [`StoreError`], with the same version floodgate uses.
pub use ::redis;

use crate::algorithm::{Reply, Spec, TwinMode};
use smallvec::SmallVec;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Any store: a [`MemoryStore`], a [`RedisStore`] or a
/// [`RedisClusterStore`], made with `.into()`. For choosing the store at
/// run time; a limiter takes each store type directly as well.
///
/// Cheap to clone: clones share the store.
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.backend.fmt(f)
    }
}

impl Store {
    pub(crate) fn new(backend: Arc<dyn Backend>) -> Self {
        Self { backend }
    }

    /// Where the store's calls go, for messages.
    pub(crate) fn place(&self) -> String {
        self.backend.place()
    }

    /// Where the keys `{prefix}:{name}:{tag}:{…}` live: made once per limit,
    /// when a limiter is built.
    pub(crate) fn namespace(&self, prefix: &str, name: &str, tag: &str) -> Namespace {
        let head = key::head(prefix, name, tag);
        self.backend.namespace(&head)
    }

    /// Decide `batch`: at once when the store never waits, else a future.
    #[inline]
    pub(crate) fn decide(&self, batch: &Batch<'_>) -> Answer {
        self.backend.decide(batch)
    }
}

/// What a store does to the keys of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Decide, and charge the cost if every key admits (a concurrency limit:
    /// acquire the lease).
    Check,
    /// A check that may book the cost up to `max_wait_ms` ahead: admitted
    /// with the wait as its delay. GCRA and the token bucket book the
    /// earliest time the cost fits, the leaky bucket admits only a delay
    /// of at most `max_wait_ms`, the windows and the sliding log decide it
    /// as a check.
    Reserve { max_wait_ms: u64 },
    /// Charge the cost whether it fits or not: GCRA and the buckets go
    /// into debt (later requests are denied until it is paid back), a
    /// window or the sliding log is charged up to its limit.
    Debit,
    /// Refuse requests for `ms` (GCRA and the buckets: their schedule is
    /// pushed that far; sent with cost 0, which leaves the others as they
    /// are).
    Block { ms: u64 },
    /// Decide, write nothing.
    Peek,
    /// Give the cost back (a concurrency limit: release the lease).
    Refund,
}

impl Mode {
    /// Its name in messages and spans.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Check => "check",
            Mode::Reserve { .. } => "reserve",
            Mode::Debit => "debit",
            Mode::Block { .. } => "block",
            Mode::Peek => "peek",
            Mode::Refund => "refund",
        }
    }

    /// The twins' `(refund, write)` for this mode, and whether they need
    /// nothing more (a check, a peek or a refund: they read
    /// [`TwinMode::PLAIN`], else [`extras`](Self::extras)).
    // One match for the three, not `==` twice and a `matches!`: the
    // derived comparison of a mode with a payload compares the payload
    // too (12 instructions a decision, callgrind).
    #[inline]
    pub(crate) fn twin(self) -> (bool, bool, bool) {
        match self {
            Mode::Check => (false, true, true),
            Mode::Peek => (false, false, true),
            Mode::Refund => (true, true, true),
            Mode::Reserve { .. } | Mode::Debit | Mode::Block { .. } => (false, true, false),
        }
    }

    /// What the twins are told beyond `twin()`: for a reservation its wait,
    /// and `lead` (see `Sharded::decide`); a debit; a block.
    pub(crate) fn extras(self, lead: u64) -> TwinMode {
        match self {
            Mode::Check | Mode::Peek | Mode::Refund => TwinMode::PLAIN,
            Mode::Reserve { max_wait_ms } => TwinMode {
                wait: Some(max_wait_ms),
                lead,
                ..TwinMode::PLAIN
            },
            Mode::Debit => TwinMode {
                debit: true,
                ..TwinMode::PLAIN
            },
            Mode::Block { ms } => TwinMode {
                blocked: Some(ms),
                ..TwinMode::PLAIN
            },
        }
    }

    /// Whether a decision in this mode charges what it admits (a debit
    /// charges, but decides nothing: it is not counted as a decision).
    #[inline]
    pub(crate) fn charges(self) -> bool {
        matches!(self, Mode::Check | Mode::Reserve { .. })
    }
}

/// The keys of one limit in one store: their name's head
/// (`{prefix}:{name}:{tag}:`), and the id a memory store looks them up by.
#[derive(Debug, Clone)]
pub(crate) struct Namespace {
    id: u64,
    head: Arc<str>,
}

/// One key of a batch: its namespace and its limit.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) ns: Namespace,
    pub(crate) spec: Spec,
    /// In shadow mode: decided and charged when it admits, but its denial
    /// does not stop the others' charge (`Limits::shadow`).
    pub(crate) shadow: bool,
}

/// One call to a store: every target for the same user key (or each its
/// own, `keys`), decided all or nothing, at one time, in one mode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch<'a> {
    /// Never empty; only a concurrency limiter's batch holds a
    /// [`Spec::Concurrency`], and then alone.
    pub(crate) targets: &'a [Target],
    /// The user key.
    pub(crate) key: &'a str,
    /// Each target's own user key, when a call decides several keys (see
    /// [`key_of`](Self::key_of)); empty when every target has `key`.
    pub(crate) keys: &'a [&'a str],
    /// The time in ms, or `None` for the store's own clock.
    pub(crate) now: Option<u64>,
    pub(crate) mode: Mode,
    /// Already clamped to at most the largest limit + 1.
    pub(crate) cost: u64,
    /// The lease a concurrency limit acquires or releases (else empty).
    pub(crate) lease: &'a str,
}

impl<'a> Batch<'a> {
    /// The user key of target `i`.
    #[inline]
    pub(crate) fn key_of(&self, i: usize) -> &'a str {
        self.keys.get(i).copied().unwrap_or(self.key)
    }
}

/// One reply per target, in order.
pub(crate) type Replies = SmallVec<[Reply; 1]>;

/// A store's decision still under way. It owns what it needs, so it can be
/// kept beyond the call that made it.
pub(crate) type StoreFuture = Pin<Box<dyn Future<Output = Result<Replies, StoreError>> + Send>>;

/// A store's answer to a batch.
///
/// Flat, with one target's reply at the start of the answer, as the store
/// wrote it: the caller reads it where it lies. (A reply one word further
/// in, as inside a `SmallVec`, is copied in 16-byte pieces that straddle
/// the ones it was written in, and the CPU waits for each; a memory-store
/// decision takes ~100 ns, and that wait showed.)
pub(crate) enum Answer {
    /// Outcome at once, a batch of one target (a store that never waits,
    /// and cannot fail).
    One(Reply),
    /// Outcome at once, one reply per target.
    PerTarget(Vec<Reply>),
    /// Under way: the store waits for I/O.
    Later(StoreFuture),
}

/// The one trait behind [`Store`]: what every store does.
pub(crate) trait Backend: Send + Sync + fmt::Debug {
    /// The namespace of the keys whose names start with `head`.
    fn namespace(&self, head: &str) -> Namespace;
    /// Decide `batch`.
    fn decide(&self, batch: &Batch<'_>) -> Answer;
    /// Where the store's calls go, for messages (`redis at host:port`). A
    /// store that never waits is never named in one.
    fn place(&self) -> String {
        "the store".to_owned()
    }
}
