//! Partial grants ([`Limiter::check_at_most`]): as much of a cost as fits
//! now.

use super::Limiter;
use crate::algorithm::Algorithm;
use crate::{Decision, Error};

/// What [`Limiter::check_at_most`] granted: how much, and the decision
/// that charged it (or the denial of a single unit, when nothing fits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    granted: u64,
    decision: Decision,
}

impl Grant {
    /// The units granted and charged: 0 when nothing fits now.
    pub fn granted(&self) -> u64 {
        self.granted
    }

    /// The decision that charged them; when nothing fits, the denial of
    /// one unit, with when it would fit
    /// ([`retry_after`](Decision::retry_after)).
    pub fn decision(&self) -> &Decision {
        &self.decision
    }
}

/// Tries before giving up on a key that others keep draining between the
/// look and the charge.
const TRIES: usize = 3;

impl<A: Algorithm> Limiter<A> {
    /// Grant as much of `max` as fits now, and charge it: batch jobs and
    /// streams that take what they can (go-redis/redis_rate's
    /// `AllowAtMost`, bucket4j's `tryConsumeAsMuchAsPossible`).
    ///
    /// Two store calls: what remains ([`peek`](Self::peek)), then a
    /// [`check`](Self::check) of that much, atomic as every check is, so
    /// nothing is ever granted beyond the limit. When other servers spent
    /// it in between, it looks again (three times at most, then grants
    /// nothing). With several limits, what the most restrictive one
    /// leaves.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodgate::{algorithm::TokenBucket, clock::ManualClock, store::MemoryStore, Limiter};
    ///
    /// let limiter = Limiter::builder(MemoryStore::new(), TokenBucket::new(100, 10.0))
    ///     .clock(ManualClock::new(0))
    ///     .build()?;
    /// assert_eq!(limiter.check_at_most("export", 70).await?.granted(), 70);
    /// assert_eq!(limiter.check_at_most("export", 70).await?.granted(), 30);
    /// let none = limiter.check_at_most("export", 70).await?;
    /// assert_eq!(none.granted(), 0);
    /// assert!(none.decision().retry_after().is_some());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub async fn check_at_most(&self, key: &str, max: u64) -> Result<Grant, Error> {
        if max == 0 {
            // Nothing asked: the key's state, as a check of 0 reports it.
            let decision = self.check(key, 0).await?;
            return Ok(Grant {
                granted: 0,
                decision,
            });
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let room = self.peek(key).await?.remaining().min(max);
            // Nothing left: the denial of one unit says when it fits (or,
            // if one was freed in between, it is granted).
            let asked = room.max(1);
            let decision = self.check(key, asked).await?;
            if decision.allowed() {
                return Ok(Grant {
                    granted: asked,
                    decision,
                });
            }
            if room == 0 || tries == TRIES {
                return Ok(Grant {
                    granted: 0,
                    decision,
                });
            }
        }
    }
}
