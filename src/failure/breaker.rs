//! The circuit breaker: after enough consecutive store failures, stop calling
//! the store for a cool-down, then let one probe through.

use crate::algorithm::validate::{self as check, or_panic, Invalid, COOL_DOWN, FAILURES};
use crate::ConfigError;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Default number of consecutive failures that opens the circuit.
pub const DEFAULT_FAILURES: u32 = 5;

/// Default time the circuit stays open before a probe is let through.
pub const DEFAULT_COOL_DOWN: Duration = Duration::from_millis(500);

/// When to stop calling a failing store, and for how long.
///
/// Closed (the normal state), every decision calls the store. After
/// `failures` consecutive failures (errors or timeouts) the circuit **opens**:
/// for `cool_down`, decisions do not call the store at all and the failure
/// policy answers at once, without waiting for a timeout. When the cool-down
/// has passed the circuit is **half-open**: the next decision is a probe and
/// calls the store (concurrent ones are still answered by the policy); if it
/// succeeds the circuit closes and limiting resumes, if it fails the circuit
/// opens for another cool-down.
///
/// Defaults: 5 failures, 500 ms cool-down. Five consecutive failures are
/// rare on a healthy Redis (a single timeout or a killed connection is not
/// enough) and cost at most five timeouts before callers stop waiting;
/// half a second of cool-down means a store that comes back is used again
/// within about 0.5 s, while a dead one sees only two probes per second per
/// limiter.
///
/// ```
/// use floodgate::failure::CircuitBreaker;
/// use std::time::Duration;
///
/// const PATIENT: CircuitBreaker = CircuitBreaker::new(10, Duration::from_secs(1));
/// assert_eq!(PATIENT.failures(), 10);
/// assert_eq!(CircuitBreaker::default().cool_down(), Duration::from_millis(500));
/// assert!(CircuitBreaker::try_new(0, Duration::from_secs(1)).is_err());
/// ```
///
/// An invalid constant is a compile-time error:
///
/// ```compile_fail
/// use floodgate::failure::CircuitBreaker;
/// use std::time::Duration;
/// const NEVER: CircuitBreaker = CircuitBreaker::new(0, Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreaker {
    failures: u32,
    cool_down: Duration,
    enabled: bool,
}

impl CircuitBreaker {
    /// Open after `failures` consecutive failures (at least 1), for
    /// `cool_down` (whole ms, 1 ms to 2^40 ms).
    ///
    /// A `const fn`: in a constant, an invalid value does not compile.
    ///
    /// # Panics
    /// When a value is invalid (see [`try_new`](Self::try_new)); the message
    /// names the field, and the panic points at the caller.
    #[track_caller]
    pub const fn new(failures: u32, cool_down: Duration) -> Self {
        or_panic(Self::checked(failures, cool_down))
    }

    /// Like [`new`](Self::new), returning an error that names the invalid
    /// field instead of panicking.
    ///
    /// # Errors
    /// A [`ConfigError`] naming `failures` (0) or `cool_down` (not whole ms,
    /// under 1 ms or over 2^40 ms).
    pub fn try_new(failures: u32, cool_down: Duration) -> Result<Self, ConfigError> {
        Self::checked(failures, cool_down).map_err(ConfigError::from)
    }

    const fn checked(failures: u32, cool_down: Duration) -> Result<Self, Invalid> {
        if failures == 0 {
            return Err(FAILURES);
        }
        if let Err(e) = check::window(cool_down, COOL_DOWN) {
            return Err(e);
        }
        Ok(Self {
            failures,
            cool_down,
            enabled: true,
        })
    }

    /// Never open: every decision calls the store and waits up to the
    /// timeout. The cool-down is still the `retry_after` of fail-closed
    /// decisions.
    pub const fn disabled() -> Self {
        Self {
            failures: DEFAULT_FAILURES,
            cool_down: DEFAULT_COOL_DOWN,
            enabled: false,
        }
    }

    /// How many consecutive failures open the circuit.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// How long the circuit stays open before a probe.
    pub fn cool_down(&self) -> Duration {
        self.cool_down
    }

    /// Whether the breaker ever opens.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        Self::new(DEFAULT_FAILURES, DEFAULT_COOL_DOWN)
    }
}

/// The state of a limiter's circuit breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CircuitState {
    /// Decisions call the store.
    Closed,
    /// The store failed repeatedly: decisions are made by the failure policy
    /// without calling it, until the cool-down ends.
    Open,
    /// The cool-down has ended: the next decision probes the store.
    HalfOpen,
}

/// The breaker's state, shared by all clones of a limiter. Lock-free: the
/// hot path (closed, success) is one atomic load, and a store only when a
/// failure streak ends.
pub(crate) struct Breaker {
    config: CircuitBreaker,
    epoch: Instant,
    /// Consecutive failures while closed.
    failures: AtomicU32,
    /// 0 when closed; otherwise the end of the cool-down in ms since
    /// `epoch`, plus 1 (so that 0 is never a valid time).
    open_until: AtomicU64,
    /// A half-open probe is in flight.
    probing: AtomicBool,
}

/// What a call learned: the circuit opened or closed because of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    None,
    Opened,
    Closed,
}

impl Breaker {
    pub(crate) fn new(config: CircuitBreaker) -> Self {
        Self {
            config,
            epoch: Instant::now(),
            failures: AtomicU32::new(0),
            open_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    pub(crate) fn config(&self) -> &CircuitBreaker {
        &self.config
    }

    /// Milliseconds since this breaker was made, plus 1.
    pub(crate) fn now_ms(&self) -> u64 {
        crate::clock::millis(self.epoch.elapsed()) + 1
    }

    fn cool_down_ms(&self) -> u64 {
        crate::clock::millis(self.config.cool_down).max(1)
    }

    /// May this decision call the store? `None`: the circuit is open, answer
    /// by the policy at once.
    pub(crate) fn try_acquire(&self) -> Option<Ticket<'_>> {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 || !self.config.enabled {
            return Some(Ticket {
                breaker: self,
                probe: false,
                done: false,
            });
        }
        if self.now_ms() < until {
            return None;
        }
        // Half-open: exactly one probe at a time.
        self.probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| Ticket {
                breaker: self,
                probe: true,
                done: false,
            })
    }

    pub(crate) fn state(&self) -> CircuitState {
        let until = self.open_until.load(Ordering::Acquire);
        if until == 0 || !self.config.enabled {
            CircuitState::Closed
        } else if self.now_ms() < until {
            CircuitState::Open
        } else {
            CircuitState::HalfOpen
        }
    }

    /// How long a client should wait before trying again: the rest of the
    /// cool-down while open, the whole cool-down otherwise.
    pub(crate) fn retry_after(&self) -> Duration {
        let until = self.open_until.load(Ordering::Acquire);
        if until != 0 {
            let now = self.now_ms();
            if now < until {
                return Duration::from_millis(until - now);
            }
        }
        crate::decision::whole_ms_up(self.config.cool_down.max(Duration::from_millis(1)))
    }

    fn success(&self, probe: bool) -> Transition {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
        if probe {
            self.open_until.store(0, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            return Transition::Closed;
        }
        Transition::None
    }

    fn failure(&self, probe: bool) -> Transition {
        if !self.config.enabled {
            return Transition::None;
        }
        if probe {
            let until = self.now_ms() + self.cool_down_ms();
            self.open_until.store(until, Ordering::Release);
            self.probing.store(false, Ordering::Release);
            return Transition::None;
        }
        let n = self
            .failures
            .fetch_add(1, Ordering::AcqRel)
            .saturating_add(1);
        if n >= self.config.failures {
            let until = self.now_ms() + self.cool_down_ms();
            if self
                .open_until
                .compare_exchange(0, until, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.failures.store(0, Ordering::Relaxed);
                return Transition::Opened;
            }
        }
        Transition::None
    }
}

/// Leave to call the store once: a ticket. Report the outcome with
/// [`success`](Self::success) or [`failure`](Self::failure); a probe dropped
/// without either (its caller gave up) lets the next decision probe instead.
pub(crate) struct Ticket<'a> {
    breaker: &'a Breaker,
    probe: bool,
    done: bool,
}

impl Ticket<'_> {
    pub(crate) fn success(mut self) -> Transition {
        self.done = true;
        self.breaker.success(self.probe)
    }

    pub(crate) fn failure(mut self) -> Transition {
        self.done = true;
        self.breaker.failure(self.probe)
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.probe && !self.done {
            self.breaker.probing.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(failures: u32, cool_ms: u64) -> Breaker {
        Breaker::new(CircuitBreaker::new(
            failures,
            Duration::from_millis(cool_ms),
        ))
    }

    #[test]
    fn opens_after_consecutive_failures_only() {
        let b = breaker(3, 10_000);
        for _ in 0..2 {
            assert_eq!(b.try_acquire().unwrap().failure(), Transition::None);
        }
        // A success ends the streak.
        assert_eq!(b.try_acquire().unwrap().success(), Transition::None);
        for _ in 0..2 {
            assert_eq!(b.try_acquire().unwrap().failure(), Transition::None);
        }
        assert_eq!(b.state(), CircuitState::Closed);
        assert_eq!(b.try_acquire().unwrap().failure(), Transition::Opened);
        assert_eq!(b.state(), CircuitState::Open);
        assert!(b.try_acquire().is_none());
        let wait = b.retry_after();
        assert!(wait > Duration::from_secs(9) && wait <= Duration::from_secs(10));
    }

    #[test]
    fn half_open_lets_one_probe_through() {
        let b = breaker(1, 20);
        assert_eq!(b.try_acquire().unwrap().failure(), Transition::Opened);
        assert!(b.try_acquire().is_none());
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(b.state(), CircuitState::HalfOpen);
        let probe = b.try_acquire().expect("a probe");
        assert!(b.try_acquire().is_none(), "one probe at a time");
        // The probe fails: open for another cool-down.
        assert_eq!(probe.failure(), Transition::None);
        assert_eq!(b.state(), CircuitState::Open);
        std::thread::sleep(Duration::from_millis(30));
        let probe = b.try_acquire().expect("a probe");
        assert_eq!(probe.success(), Transition::Closed);
        assert_eq!(b.state(), CircuitState::Closed);
        assert!(b.try_acquire().is_some());
    }

    #[test]
    fn an_abandoned_probe_frees_the_slot() {
        let b = breaker(1, 1);
        let _ = b.try_acquire().unwrap().failure();
        std::thread::sleep(Duration::from_millis(5));
        drop(b.try_acquire().expect("a probe"));
        assert!(b.try_acquire().is_some(), "the next decision probes");
    }

    #[test]
    fn disabled_never_opens() {
        let b = Breaker::new(CircuitBreaker::disabled());
        for _ in 0..100 {
            assert_eq!(b.try_acquire().unwrap().failure(), Transition::None);
        }
        assert_eq!(b.state(), CircuitState::Closed);
    }

    #[test]
    fn invalid_breakers_name_the_field() {
        assert_eq!(
            CircuitBreaker::try_new(0, Duration::from_secs(1))
                .unwrap_err()
                .field(),
            "failures"
        );
        assert_eq!(
            CircuitBreaker::try_new(1, Duration::ZERO)
                .unwrap_err()
                .field(),
            "cool_down"
        );
        assert!(CircuitBreaker::try_new(5, DEFAULT_COOL_DOWN).is_ok());
    }
}
