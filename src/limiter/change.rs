//! Changing a running limiter's limits: [`Limiter::set_algorithm`].

use super::own::Version;
use super::Limiter;
use crate::algorithm::Algorithm;
use crate::ConfigError;

impl<A: Algorithm> Limiter<A> {
    /// Decide with `algorithm` from now on, instead of the limiter's
    /// current limits: for limits reloaded from a file, or changed by an
    /// operator, without rebuilding the limiter or the layers that use it.
    /// Every clone of this limiter (and every layer holding one) sees the
    /// change at its next decision. The
    /// [guide](crate::guide::changing_limits) shows it with a reloaded file.
    ///
    /// **Decisions in flight** finish under the limits they started with:
    /// each decision reads the limits once, as it starts (one atomic load),
    /// and its numbers and the layer's `RateLimit` header fields are those
    /// limits'. A change waits for no decision, and no decision waits for a
    /// change.
    ///
    /// **What a key keeps.** A key's state in the store is named by the
    /// limiter's prefix and name, the limit's name (in a
    /// [`Limits`](crate::algorithm::Limits)) and the algorithm, not by its
    /// numbers (`{prefix}:{name}[/{limit}]:{algorithm}:{key}`). So a limit
    /// of the same name and algorithm with new numbers keeps every key's
    /// counters, read under the new numbers:
    ///
    /// | algorithm | a new limit, capacity or burst | a new window, period or rate |
    /// |---|---|---|
    /// | [`FixedWindow`](crate::algorithm::FixedWindow) | kept: what the key used in this window counts against the new limit | starts over: the windows are not the same windows, the count restarts at the next decision |
    /// | [`SlidingWindow`](crate::algorithm::SlidingWindow) | kept: both windows' counts | starts over, as a fixed window |
    /// | [`SlidingLog`](crate::algorithm::SlidingLog) | kept: the same admissions counted | kept: the admissions the log still holds are counted over the new window (a longer window does not see admissions that had already left the old one) |
    /// | [`TokenBucket`](crate::algorithm::TokenBucket), [`Gcra`](crate::algorithm::Gcra), [`LeakyBucket`](crate::algorithm::LeakyBucket) | kept: the units used stay used | the backlog is kept as time: the key is full (or its queue empty) again at the same instant as before, so the units it counts as used scale with the new rate |
    ///
    /// A key that used more than a lower new limit allows is denied until
    /// enough of it expires or drains, as any key over its limit.
    ///
    /// A limit whose **algorithm changes** (a `Limits` whose limit of the
    /// same name is now another algorithm), or that is **renamed or new**,
    /// starts empty for every key: its state has another name. The old
    /// state is no longer read; in Redis it expires at its TTL (going back
    /// before then finds it again), in memory it is evicted as any idle key.
    ///
    /// **What is derived from the limits** changes with them: the
    /// [deny cache](crate::LimiterBuilder::deny_cache) starts empty under
    /// the new limits (a denial under a lower limit may be an admission
    /// now), and [hot keys](crate::HotKeys) start new allotments sized from
    /// the new limits (the units this server held under the old ones are
    /// left to expire, at most one slice per hot key, as when a key cools).
    /// Limits given per call ([`check_with`](Self::check_with), a layer's
    /// `limits_for`) are not the limiter's own and do not change.
    ///
    /// Setting the limits the limiter already has changes nothing. Each
    /// change keeps the previous limits in memory (a few hundred bytes;
    /// their deny cache and allotments are emptied) until the limiter and
    /// all its clones are dropped: that is what lets every decision read
    /// its limits with one atomic load, and no lock or reference count.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodgate::{algorithm::FixedWindow, store::MemoryStore, Limiter};
    /// use std::time::Duration;
    ///
    /// let minute = Duration::from_secs(60);
    /// let limiter = Limiter::new(MemoryStore::new(), FixedWindow::new(3, minute));
    /// for _ in 0..3 {
    ///     assert!(limiter.check("ana", 1).await?.allowed());
    /// }
    /// assert!(limiter.check("ana", 1).await?.denied());
    ///
    /// // 5 a minute from now on: ana keeps the 3 she used.
    /// limiter.set_algorithm(FixedWindow::new(5, minute))?;
    /// let d = limiter.check("ana", 1).await?;
    /// assert!(d.allowed());
    /// assert_eq!((d.limit(), d.remaining()), (5, 1));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The [`ConfigError`] [`build`](crate::LimiterBuilder::build) would
    /// give for these limits, naming the field: with
    /// [hot keys](crate::LimiterBuilder::hot_keys), `hot_keys` for a
    /// limit in shadow mode, a sliding log or leaky bucket, or a limit too
    /// small to share. The
    /// limits then stay as they were. (The numbers themselves were checked
    /// when `algorithm` was made: `try_new` and the other `try_` methods.)
    pub fn set_algorithm(&self, algorithm: A) -> Result<(), ConfigError> {
        self.inner.versions.set(&self.inner.core, algorithm)
    }

    /// How many versions of its limits this limiter keeps (the current one
    /// and each one changed from): see [`set_algorithm`](Self::set_algorithm).
    pub fn versions_kept(&self) -> usize {
        self.inner.versions.kept()
    }

    /// The limiter's own limits as they are now.
    #[inline(always)]
    pub(crate) fn version(&self) -> &Version<A> {
        self.inner.versions.current()
    }

    /// The limiter's own limits of `generation`: the current ones, or
    /// those a decision started under before a change.
    pub(crate) fn version_of(&self, generation: u64) -> &Version<A> {
        match self.inner.versions.of(generation) {
            Some(version) => version,
            None => self.version(), // Never: every version is kept.
        }
    }
}
