//! The window algorithms' config types: `limit` cost units per `window`.
//! Their twins are in `fixed_window.rs`, `sliding_log.rs` and
//! `sliding_window.rs`.

use super::spec::Spec;
use super::validate::{self as check, or_panic, tri, Invalid, LONG_LOG, WIDE_LOG};
use crate::{ConfigError, Quota};
use std::time::Duration;

/// Fixed window: one counter per aligned window of time.
///
/// The cheapest algorithm, and the loosest: a client that times its bursts
/// to a window boundary gets up to twice the limit within a moment. Use it
/// for coarse quotas (per day), where a brief 2× does not matter. Every
/// key's windows end at the same instant, unless
/// [jittered](Self::jittered).
///
/// ```
/// use floodgate::algorithm::FixedWindow;
/// use std::time::Duration;
/// const DAILY: FixedWindow = FixedWindow::new(10_000, Duration::from_secs(86_400));
/// assert_eq!(DAILY.quota().units, 10_000);
/// assert!(FixedWindow::try_new(0, Duration::from_secs(1)).is_err());
/// ```
///
/// An invalid constant is a compile-time error:
///
/// ```compile_fail
/// use floodgate::algorithm::FixedWindow;
/// use std::time::Duration;
/// const NONE: FixedWindow = FixedWindow::new(0, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedWindow {
    limit: u64,
    window_ms: u64,
    jittered: bool,
}

impl FixedWindow {
    /// At most `limit` cost units per aligned `window` (whole ms, 1 ms to
    /// 2^40 ms; `limit` 1 to 2^40).
    ///
    /// A `const fn`: in a constant, an invalid value does not compile.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message
    /// names the field, and the panic points at the caller.
    #[track_caller]
    pub const fn new(limit: u64, window: Duration) -> Self {
        or_panic(Self::checked(limit, window))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field instead of panicking.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `limit` or `window` when it is out of bounds.
    pub fn try_new(limit: u64, window: Duration) -> Result<Self, ConfigError> {
        Self::checked(limit, window).map_err(ConfigError::from)
    }

    const fn checked(limit: u64, window: Duration) -> Result<Self, Invalid> {
        let (limit, window_ms) = tri!(check::per_window(limit, window));
        Ok(Self {
            limit,
            window_ms,
            jittered: false,
        })
    }

    /// The limit as it reads on the wire (`RateLimit-Policy`): `limit`
    /// per `window`.
    pub fn quota(&self) -> Quota {
        self.to_spec().quota()
    }

    /// The same limit with jittered windows: each key's windows start at
    /// its own offset in `[0, window)` instead of on the aligned instants,
    /// so that the keys of one limit reset at different moments across the
    /// window rather than all at once (clients denied until the reset then
    /// come back spread out, not as one herd).
    ///
    /// A key's windows start at `k × window + offset`, where `offset` is
    /// XXH3-64 of the key's bytes modulo the window in ms: the same for a
    /// key on every server, store and release. `reset_after`,
    /// `Retry-After` and the `RateLimit` fields are those of the key's
    /// shifted window. A jittered limit keeps its state apart from the
    /// unjittered one of the same name (turning the option on or off starts
    /// every key afresh, never misreading the other's counts).
    ///
    /// ```
    /// use floodgate::algorithm::FixedWindow;
    /// use std::time::Duration;
    /// const HOURLY: FixedWindow = FixedWindow::new(1_000, Duration::from_secs(3_600)).jittered();
    /// assert!(HOURLY.is_jittered());
    /// assert!(!FixedWindow::new(1_000, Duration::from_secs(3_600)).is_jittered());
    /// // The same quota on the wire.
    /// assert_eq!(HOURLY.quota(), FixedWindow::new(1_000, Duration::from_secs(3_600)).quota());
    /// ```
    #[must_use]
    pub const fn jittered(self) -> Self {
        Self {
            jittered: true,
            ..self
        }
    }

    /// Whether each key's windows start at an offset of its own (see
    /// [`jittered`](Self::jittered)); off by default.
    pub const fn is_jittered(&self) -> bool {
        self.jittered
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::FixedWindow {
            limit: self.limit,
            window_ms: self.window_ms,
            jittered: self.jittered,
        }
    }
}

/// Sliding log: the time of every admitted request within the window.
///
/// Exact: no span of `window` ever admits more than `limit`. The price is
/// memory: one entry per admitted request, so `limit` entries per busy key.
/// Use it for low limits that must be exact (login attempts). Rejected
/// requests are never recorded, so a client that keeps hammering is released
/// as soon as its old requests leave the window.
///
/// ```
/// use floodgate::algorithm::{SlidingLog, MAX_LOG};
/// use std::time::Duration;
/// const LOGINS: SlidingLog = SlidingLog::new(5, Duration::from_secs(60));
/// assert_eq!(LOGINS.quota().window, Duration::from_secs(60));
/// let e = SlidingLog::try_new(MAX_LOG + 1, Duration::from_secs(1)).unwrap_err();
/// assert_eq!(e.field(), "limit");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    limit: u64,
    window_ms: u64,
}

/// The most entries a sliding log keeps per key: an admitted request writes
/// one per unit of its cost, in one call.
pub const MAX_LOG: u64 = 1 << 16;

impl SlidingLog {
    /// At most `limit` cost units in any span of `window` (whole ms, 1 ms
    /// to 2^40 ms; `limit` 1 to 2^16 ([`MAX_LOG`]): one entry per unit
    /// admitted; and `limit` × `window` in ms below 2^50, where the log's
    /// member numbering would lose precision).
    ///
    /// A `const fn`: in a constant, an invalid value does not compile.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message
    /// names the field, and the panic points at the caller.
    #[track_caller]
    pub const fn new(limit: u64, window: Duration) -> Self {
        or_panic(Self::checked(limit, window))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field instead of panicking.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `limit` or `window` when it is out of bounds.
    pub fn try_new(limit: u64, window: Duration) -> Result<Self, ConfigError> {
        Self::checked(limit, window).map_err(ConfigError::from)
    }

    const fn checked(limit: u64, window: Duration) -> Result<Self, Invalid> {
        let (limit, window_ms) = tri!(check::per_window(limit, window));
        if limit > MAX_LOG {
            return Err(LONG_LOG);
        }
        if (limit as u128) * (window_ms as u128) >= 1 << 50 {
            return Err(WIDE_LOG);
        }
        Ok(Self { limit, window_ms })
    }

    /// The limit as it reads on the wire (`RateLimit-Policy`): `limit`
    /// per `window`.
    pub fn quota(&self) -> Quota {
        self.to_spec().quota()
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::SlidingLog {
            limit: self.limit,
            window_ms: self.window_ms,
        }
    }
}

/// Sliding window counter: the current and the previous fixed-window counts,
/// the previous one weighted by how much of it is still inside the sliding
/// window: `prev × (1 − (now mod w)/w) + cur`, counted in whole requests.
///
/// Nearly exact with constant memory: what most gateways run. A request is
/// denied when adding its cost to the estimate would exceed the limit.
///
/// ```
/// use floodgate::algorithm::SlidingWindow;
/// use std::time::Duration;
/// const API: SlidingWindow = SlidingWindow::new(100, Duration::from_secs(60));
/// assert_eq!(API.quota().units, 100);
/// let e = SlidingWindow::try_new(100, Duration::from_micros(1_500)).unwrap_err();
/// assert_eq!(e.field(), "window");
/// ```
///
/// An invalid constant is a compile-time error:
///
/// ```compile_fail
/// use floodgate::algorithm::SlidingWindow;
/// use std::time::Duration;
/// const NONE: SlidingWindow = SlidingWindow::new(0, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingWindow {
    limit: u64,
    window_ms: u64,
    jittered: bool,
}

impl SlidingWindow {
    /// About `limit` cost units in any span of `window` (whole ms, 1 ms to
    /// 2^40 ms; `limit` 1 to 2^40).
    ///
    /// A `const fn`: in a constant, an invalid value does not compile.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message
    /// names the field, and the panic points at the caller.
    #[track_caller]
    pub const fn new(limit: u64, window: Duration) -> Self {
        or_panic(Self::checked(limit, window))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field instead of panicking.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `limit` or `window` when it is out of bounds.
    pub fn try_new(limit: u64, window: Duration) -> Result<Self, ConfigError> {
        Self::checked(limit, window).map_err(ConfigError::from)
    }

    const fn checked(limit: u64, window: Duration) -> Result<Self, Invalid> {
        let (limit, window_ms) = tri!(check::per_window(limit, window));
        Ok(Self {
            limit,
            window_ms,
            jittered: false,
        })
    }

    /// The limit as it reads on the wire (`RateLimit-Policy`): `limit`
    /// per `window`.
    pub fn quota(&self) -> Quota {
        self.to_spec().quota()
    }

    /// The same limit with jittered windows: each key's fixed windows
    /// (whose counts the estimate weighs) start at its own offset in
    /// `[0, window)`, so that the keys of one limit do not all turn over at
    /// the same instant. As [`FixedWindow::jittered`], which says how the
    /// offset is computed; the estimate then runs on the shifted windows,
    /// and `reset_after`, `Retry-After` and the `RateLimit` fields are
    /// theirs.
    ///
    /// ```
    /// use floodgate::algorithm::SlidingWindow;
    /// use std::time::Duration;
    /// let api = SlidingWindow::new(100, Duration::from_secs(60)).jittered();
    /// assert!(api.is_jittered());
    /// assert_ne!(api, SlidingWindow::new(100, Duration::from_secs(60)));
    /// ```
    #[must_use]
    pub const fn jittered(self) -> Self {
        Self {
            jittered: true,
            ..self
        }
    }

    /// Whether each key's windows start at an offset of its own (see
    /// [`jittered`](Self::jittered)); off by default.
    pub const fn is_jittered(&self) -> bool {
        self.jittered
    }

    pub(super) fn to_spec(self) -> Spec {
        Spec::SlidingWindow {
            limit: self.limit,
            window_ms: self.window_ms,
            jittered: self.jittered,
        }
    }
}
