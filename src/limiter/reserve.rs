//! Reservations: admit now, or book the earliest time the cost fits, at
//! most a given wait ahead, charging it now ([`Limiter::reserve`]); and
//! waiting for that time ([`Limiter::until_ready`]).

use super::Limiter;
use crate::algorithm::Algorithm;
use crate::store::Mode;
use crate::{Decision, Error};
use std::time::Duration;

/// A cost booked with [`Limiter::reserve`]: admitted now, or at a time at
/// most the reservation's longest wait ahead, and charged already.
///
/// Wait [`decision().delay()`](Decision::delay) before doing what it was
/// booked for (or let [`Limiter::until_ready`] wait). A reservation that is
/// no longer needed can be [cancelled](Self::cancel): its cost is given
/// back. Dropping it keeps the charge, as a check's charge is kept.
#[derive(Debug)]
#[must_use = "a reservation is charged already: wait for it, or cancel it"]
pub struct Reservation<A> {
    limiter: Limiter<A>,
    key: Box<str>,
    cost: u64,
    decision: Decision,
}

impl<A: Algorithm> Reservation<A> {
    /// What the store decided: admitted with the wait as its
    /// [`delay`](Decision::delay) (zero when it fits now), or denied when
    /// even the longest wait would not do, with the
    /// [`retry_after`](Decision::retry_after) after which the same
    /// reservation would be granted.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// Whether the cost is booked (and charged).
    pub fn is_granted(&self) -> bool {
        self.decision.allowed()
    }

    /// How long to wait, from the decision, before the booked time: the
    /// decision's [`delay`](Decision::delay).
    pub fn wait(&self) -> Duration {
        self.decision.delay()
    }

    /// Give the booked cost back (as [`Limiter::refund`]): before or after
    /// its time. A reservation that was denied charged nothing, and gives
    /// nothing back. Returns the key's state after it.
    ///
    /// A reservation of several limits was booked at the longest of their
    /// waits: each limit gets its cost back, and a limit that the others
    /// made wait keeps that wait (it is never charged less than it was).
    ///
    /// # Errors
    /// As [`Limiter::refund`].
    pub async fn cancel(self) -> Result<Decision, Error> {
        if !self.is_granted() {
            return Ok(self.decision);
        }
        self.limiter.refund(&self.key, self.cost).await
    }
}

impl<A: Algorithm> Limiter<A> {
    /// Charge `cost` to `key` now, for now or for the earliest time at most
    /// `max_wait` ahead at which it fits: the decision's
    /// [`delay`](Decision::delay) says how long to wait (zero when it fits
    /// now). Denied, charging nothing, when it would have to wait longer,
    /// with the [`retry_after`](Decision::retry_after) after which the same
    /// reservation would be granted.
    ///
    /// Exact for [`Gcra`](crate::algorithm::Gcra) and the
    /// [`TokenBucket`](crate::algorithm::TokenBucket): the booked time is
    /// the one the algorithm's schedule gives, so requests served at their
    /// booked times never exceed the limit. A
    /// [`LeakyBucket`](crate::algorithm::LeakyBucket) admits as a check and
    /// its queue's delay is the wait: a reservation is granted only when
    /// that delay is at most `max_wait` (its capacity bounds how far ahead
    /// it books). The windows and the sliding log book nothing ahead (a
    /// booking in a later window would not count in it): a reservation is
    /// a check there, granted only if the cost fits now, and so is a
    /// reservation of [`Limits`](crate::algorithm::Limits) that hold any of
    /// them. Several limits are booked at the longest of their waits.
    ///
    /// The same path as every decision: exemptions, the timeout, the
    /// failure policy (which answers with no wait) and the metrics (a
    /// reservation is counted as a check).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use floodgate::{algorithm::Gcra, clock::ManualClock, store::MemoryStore, Limiter};
    /// use std::time::Duration;
    ///
    /// // One a second, no burst beyond that one.
    /// let limiter = Limiter::builder(MemoryStore::new(), Gcra::new(1, Duration::from_secs(1)))
    ///     .clock(ManualClock::new(0))
    ///     .build()?;
    /// let now = limiter.reserve("job", 1, Duration::from_secs(5)).await?;
    /// assert_eq!(now.wait(), Duration::ZERO);
    /// let next = limiter.reserve("job", 1, Duration::from_secs(5)).await?;
    /// assert_eq!(next.wait(), Duration::from_secs(1)); // booked a second ahead
    /// // Not within half a second: denied, nothing charged.
    /// let denied = limiter.reserve("job", 1, Duration::from_millis(500)).await?;
    /// assert!(!denied.is_granted());
    /// assert_eq!(denied.decision().retry_after(), Some(Duration::from_millis(1500)));
    /// // The second booking given back: the third second is free again.
    /// next.cancel().await?;
    /// assert_eq!(limiter.reserve("job", 1, Duration::from_secs(5)).await?.wait(), Duration::from_secs(1));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub async fn reserve(
        &self,
        key: &str,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation<A>, Error> {
        let version = self.version();
        let mode = reserving(version.plan.books_ahead, max_wait);
        let decision = self.overall(None, key, cost, mode).await?;
        Ok(Reservation {
            limiter: self.clone(),
            key: key.into(),
            cost,
            decision,
        })
    }

    /// [`reserve`](Self::reserve), then wait for the booked time: the
    /// decision once the cost may be used (admitted, its
    /// [`delay`](Decision::delay) waited already), or the denial at once
    /// when the wait would exceed `max_wait`.
    ///
    /// Dropped while it waits (a caller that gave up, a timeout around it),
    /// it cancels its reservation: the cost is given back, in the
    /// background on the current Tokio runtime.
    ///
    /// The wait is on Tokio's clock (`tokio::time::sleep`), not the
    /// limiter's: a test clock moves the decisions, not the sleep.
    ///
    /// # Errors
    /// As [`check`](Self::check).
    pub async fn until_ready(
        &self,
        key: &str,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, Error> {
        let reservation = self.reserve(key, cost, max_wait).await?;
        let wait = reservation.wait();
        if !reservation.is_granted() || wait.is_zero() {
            return Ok(reservation.decision);
        }
        let decision = reservation.decision;
        let booked = CancelOnDrop(Some(reservation));
        tokio::time::sleep(wait).await;
        booked.keep();
        Ok(decision)
    }
}

/// The longest wait a reservation books, in ms (2^40 ms, 35 years: the
/// longest duration any limit takes), so that the numbers stay exact.
const MAX_WAIT_MS: u64 = 1 << 40;

/// The store's mode for a reservation of at most `max_wait` (whole ms,
/// rounded down: never longer than asked), under a plan that can book
/// ahead or not (`Plan::books_ahead`).
pub(crate) fn reserving(books_ahead: bool, max_wait: Duration) -> Mode {
    let ms = u64::try_from(max_wait.as_millis()).unwrap_or(u64::MAX);
    Mode::Reserve {
        max_wait_ms: if books_ahead { ms.min(MAX_WAIT_MS) } else { 0 },
    }
}

/// A granted reservation being waited for: cancelled if dropped before
/// [`keep`](Self::keep).
struct CancelOnDrop<A: Algorithm>(Option<Reservation<A>>);

impl<A: Algorithm> CancelOnDrop<A> {
    /// Keep the reservation: its time has come.
    fn keep(mut self) {
        self.0 = None;
    }
}

impl<A: Algorithm> Drop for CancelOnDrop<A> {
    fn drop(&mut self) {
        if let Some(r) = self.0.take() {
            r.limiter
                .start(None, &r.key, r.cost, Mode::Refund)
                .detach("cancelled reservation");
        }
    }
}
