//! Where the time of a decision comes from.
//!
//! By default a [`RedisStore`](crate::store::RedisStore) reads the Redis
//! server's clock (`TIME`) inside the script, so app servers with skewed
//! clocks still agree; a [`MemoryStore`](crate::store::MemoryStore) reads
//! [`MonotonicClock`]. Tests set a [`ManualClock`] on the limiter and move time
//! themselves, which makes every decision deterministic on either store.
//!
//! ```
//! use floodgate::clock::{Clock, ManualClock};
//! use std::time::Duration;
//! let clock = ManualClock::new(1_000);
//! let shared = clock.clone();
//! clock.advance(Duration::from_millis(250));
//! assert_eq!(shared.now_ms(), 1_250);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The latest time a decision uses: 2^48 ms, the year 10889. A clock
/// reading later than this (only a manual clock can) is taken as this, so
/// every number the scripts compute stays below 2^53, where doubles are
/// exact, and limits keep holding.
pub const MAX_TIME_MS: u64 = 1 << 48;

/// `d` in whole ms, saturating (no duration here comes anywhere near).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `ms`, no later than [`MAX_TIME_MS`].
pub(crate) fn bounded(ms: u64) -> u64 {
    ms.min(MAX_TIME_MS)
}

/// A source of time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    /// The current time, in ms since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, millis)
    }
}

/// The wall clock read once, then moved on by the CPU's time-stamp counter
/// (through `quanta`, as governor does): the [`MemoryStore`]'s default.
///
/// Reading it costs a few ns where [`SystemClock`] can cost over 100 (on
/// virtual machines whose system clock is not read in user space), which
/// for an in-memory decision is most of its cost. It never steps back when
/// the system clock is adjusted, so an adjustment can never hand out a
/// window or a bucket again; over a long uptime it can drift from the
/// system clock by the counter's error (parts per million).
///
/// [`MemoryStore`]: crate::store::MemoryStore
#[derive(Debug, Clone, Copy, Default)]
pub struct MonotonicClock;

/// Where the monotonic clock starts: the wall time and a reading of the
/// time-stamp counter taken together, and the counter's rate.
struct Anchor {
    wall_ms: u64,
    counter: quanta::Clock,
    at: u64,
    /// Ms per tick of the counter, times 2^64: ticks since `at` times this,
    /// shifted right by 64, are ms since `at`. One multiplication a read,
    /// where scaling to ns (`quanta::Clock::delta_as_nanos`) and then
    /// dividing took a shift by a variable amount, a branch and a second
    /// multiplication.
    // 65.4 -> 64.0 ns a memory-store GCRA decision (benches/outside).
    ms_per_tick: u64,
}

static ANCHOR: LazyLock<Anchor> = LazyLock::new(|| {
    let counter = quanta::Clock::new();
    let at = counter.raw();
    // The ns of 2^40 ticks (over 5 minutes at 3 GHz): exact to about 1
    // part in 10^12, well within the counter's own error.
    let ns = u128::from(counter.delta_as_nanos(0, 1 << 40));
    let ms_per_tick = u64::try_from((ns << 24) / 1_000_000).unwrap_or(u64::MAX);
    Anchor {
        wall_ms: SystemClock.now_ms(),
        counter,
        at,
        ms_per_tick,
    }
});

impl Clock for MonotonicClock {
    fn now_ms(&self) -> u64 {
        let anchor = &*ANCHOR;
        // Zero if this core's counter is behind the anchor's.
        let ticks = anchor.counter.raw().saturating_sub(anchor.at);
        let ms = (u128::from(ticks) * u128::from(anchor.ms_per_tick)) >> 64;
        anchor.wall_ms + ms as u64
    }
}

/// A reading of the time-stamp counter, for timing calls: `Instant::now()`
/// costs over 100 ns on some virtual machines.
pub(crate) fn ticks() -> quanta::Instant {
    ANCHOR.counter.now()
}

/// A clock that moves only when told. Clones share the same time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock reading `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        Self(Arc::new(AtomicU64::new(start_ms)))
    }

    /// Set the time to `ms`.
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    /// Move the time forward by `by` (whole milliseconds; saturates).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(by))
            });
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_reads_wall_time_and_never_steps_back() {
        let wall = SystemClock.now_ms();
        let start = MonotonicClock.now_ms();
        let mut last = start;
        // Anchored on the wall clock: the two agree closely at the start.
        assert!(last.abs_diff(wall) < 1_000, "{last} vs {wall}");
        let until = std::time::Instant::now() + Duration::from_millis(30);
        while std::time::Instant::now() < until {
            let now = MonotonicClock.now_ms();
            assert!(now >= last, "{now} after {last}");
            last = now;
        }
        // And it moves with time: 30 ms passed. Read once more after the
        // loop (the loop's last read may be well before its end, if the
        // thread was preempted just after it); measured from its own start,
        // not from the wall clock read before it (on a loaded machine the
        // two reads can be several ms apart).
        let end = MonotonicClock.now_ms();
        assert!(end >= last, "{end} after {last}");
        assert!(end >= start + 29, "{end} vs {start}");
    }
}
