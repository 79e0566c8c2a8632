//! Costs known late: charge what a request turned out to cost, whether it
//! fits or not ([`Limiter::debit`]), and settle an estimate charged
//! earlier against the actual cost ([`Limiter::settle`]).

use super::Limiter;
use crate::algorithm::Algorithm;
use crate::store::Mode;
use crate::{Decision, Error};

/// A debit larger than the largest limit goes to the store in parts of at
/// most that limit (a cost above it would be clamped, as a check's is), at
/// most this many: a debt of up to 64 times the limit is kept, the rest of
/// a larger one is dropped (a cost that large is a bug or an attack: it
/// would lock the key out for 64 times the limit's period anyway).
pub(crate) const MAX_PARTS: u64 = 64;

impl<A: Algorithm> Limiter<A> {
    /// Charge `cost` to `key` whether it fits or not: a cost known only
    /// once the work is done (the tokens an LLM call used), which must not
    /// be lost because the key is full. GCRA and the buckets go into
    /// **debt**: later requests are denied until it is paid back by time,
    /// as if the cost had been admitted when it was charged; nothing goes
    /// negative. A window or the sliding log is charged up to its limit
    /// (it is then full until it ends: a window keeps no debt past its
    /// end).
    ///
    /// Returns the key's state after the charge (admitted: a debit is never
    /// refused; `remaining` is 0 while in debt). Not counted as a decision
    /// in the metrics. A debit larger than the largest limit is sent in
    /// parts of that limit, at most 64 of them.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodgate::{algorithm::TokenBucket, clock::ManualClock, store::MemoryStore, Limiter};
    /// use std::time::Duration;
    ///
    /// // 1 000 tokens a minute.
    /// let clock = ManualClock::new(0);
    /// let tokens = Limiter::builder(MemoryStore::new(), TokenBucket::new(1000, 1000.0 / 60.0))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// // A call used 1 500 tokens: 500 in debt.
    /// let d = tokens.debit("key-1", 1500).await?;
    /// assert_eq!(d.remaining(), 0);
    /// assert!(tokens.check("key-1", 1).await?.denied());
    /// // 30 s repay the debt (500 tokens at 1000 a minute), then it refills.
    /// clock.advance(Duration::from_secs(36));
    /// assert_eq!(tokens.peek("key-1").await?.remaining(), 100);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub async fn debit(&self, key: &str, cost: u64) -> Result<Decision, Error> {
        let part = self.version().plan.cost_cap.saturating_sub(1).max(1);
        let mut left = cost.min(part.saturating_mul(MAX_PARTS));
        loop {
            let now = left.min(part);
            let decision = self.overall(None, key, now, Mode::Debit).await?;
            left -= now;
            if left == 0 {
                return Ok(decision);
            }
        }
    }

    /// Settle a cost charged as an `estimate` (by [`check`](Self::check),
    /// a reservation, or a layer) against the `actual` cost once it is
    /// known: the difference is given back ([`refund`](Self::refund)) or
    /// charged whether it fits or not ([`debit`](Self::debit): a debt when
    /// the key has no room left). Returns the key's state after it.
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub async fn settle(&self, key: &str, estimate: u64, actual: u64) -> Result<Decision, Error> {
        if actual > estimate {
            self.debit(key, actual - estimate).await
        } else {
            self.refund(key, estimate - actual).await
        }
    }
}
