//! Refusing a key for a time across the fleet ([`Limiter::block`]).

use super::Limiter;
use crate::algorithm::Algorithm;
use crate::store::Mode;
use crate::{ConfigError, Decision, Error};
use std::time::Duration;

/// The longest block, in ms (2^40 ms: the longest duration any limit
/// takes), so that the numbers stay exact.
const MAX_BLOCK_MS: u64 = 1 << 40;

impl<A: Algorithm> Limiter<A> {
    /// Refuse `key` for `duration`, on every server sharing the store:
    /// after too many failed logins, or while a partner's API answers 429.
    /// Its requests are denied over the limit until then, with a
    /// `retry_after` (and a layer's `Retry-After`) counting down to the
    /// end of the block; then the key goes on from where the block left
    /// it (empty, as after a burst). A shorter block never shortens a
    /// longer one; a [`refund`](Self::refund) gives back what it is given,
    /// which may end a block early.
    ///
    /// Kept in the key's own state, in the same store and the same call
    /// as its decisions: no key of its own, nothing read on other calls.
    /// With [`HotKeys`](crate::HotKeys), a server still holding a slice
    /// of the key spends it first (at most one slice a server: the store
    /// refuses the next).
    #[doc(alias = "pause")]
    /// For GCRA and the buckets, whose schedule it pushes; a window or the
    /// sliding log keeps no schedule to push, and its limiter's `block`
    /// is an error (block a key there with
    /// [`Exemptions::deny_key`](crate::Exemptions::deny_key), which is
    /// this server's own).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodgate::{algorithm::Gcra, clock::ManualClock, store::MemoryStore, Limiter};
    /// use std::time::Duration;
    ///
    /// let clock = ManualClock::new(0);
    /// let logins = Limiter::builder(MemoryStore::new(), Gcra::new(5, Duration::from_secs(60)))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// logins.block("ana@example.com", Duration::from_secs(900)).await?;
    /// let d = logins.check("ana@example.com", 1).await?;
    /// assert_eq!(d.retry_after(), Some(Duration::from_secs(900)));
    /// clock.advance(Duration::from_secs(900));
    /// assert!(logins.check("ana@example.com", 1).await?.allowed());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Unsupported`] when a limit is a window or the sliding log;
    /// else as [`check`](Self::check).
    pub async fn block(&self, key: &str, duration: Duration) -> Result<Decision, Error> {
        if !self.version().plan.books_ahead {
            return Err(Error::Unsupported(ConfigError::new(
                "limits",
                "block needs GCRA, a token bucket or a leaky bucket: a window or a sliding log \
                 keeps no schedule to push",
            )));
        }
        self.overall(None, key, 0, blocking(duration)).await
    }
}

/// The mode of a block of `duration`: whole ms, rounded up (a block is
/// never shorter than asked), at most [`MAX_BLOCK_MS`].
pub(super) fn blocking(duration: Duration) -> Mode {
    let ms = u64::try_from(duration.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    Mode::Block {
        ms: ms.min(MAX_BLOCK_MS),
    }
}
