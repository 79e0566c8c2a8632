//! A key's pause apart from its limits: what the outbound layer writes
//! when a partner answers 429, and reads before sending a request booked
//! earlier. A block ([`Limiter::block`]) pushes the key's own schedule,
//! which new bookings see; a request booked before it holds its time
//! already, and a block that falls within what is booked changes nothing.
//! So a pause is also kept as a marker of its own: a GCRA limit of one a
//! millisecond named `~pause` under the limiter (`{prefix}:{name}/~pause:…`),
//! which only pauses charge, and whose backlog is the pause left. `~` is
//! no character of a limit's name (`A-Z a-z 0-9 _ - .`), so no limit of
//! the user's shares the marker's keys.

use super::block::blocking;
use super::{Limiter, Plan};
use crate::algorithm::{Algorithm, Gcra};
use crate::store::Mode;
use crate::{Error, Reason};
use std::sync::Arc;
use std::time::Duration;

/// The marker's limit name: one no limit of the user's can have.
const MARKER: &str = "~pause";

impl<A: Algorithm> Limiter<A> {
    /// The plan of the pause markers of this limiter's keys: made once by
    /// the outbound layer.
    pub(crate) fn pause_plan(&self) -> Plan {
        let marker = parts_of(&Gcra::new(1, Duration::from_millis(1)));
        let parts = marker
            .into_iter()
            .map(|(_, spec)| (Some(Arc::from(MARKER)), spec))
            .collect();
        self.inner.core.plan(parts, 0)
    }

    /// Pause `key` for `duration` on every server sharing the store (a
    /// longer pause already there stays).
    pub(crate) async fn pause(
        &self,
        pauses: &Plan,
        key: &str,
        duration: Duration,
    ) -> Result<(), Error> {
        self.overall(Some(pauses), key, 0, blocking(duration))
            .await
            .map(drop)
    }

    /// How long `key` stays paused, if it is. A store that cannot say
    /// (its failure policy answered) is taken as no pause.
    pub(crate) async fn paused_for(
        &self,
        pauses: &Plan,
        key: &str,
    ) -> Result<Option<Duration>, Error> {
        let d = self.overall(Some(pauses), key, 0, Mode::Peek).await?;
        let marked = d.reason() == Reason::WithinLimit && d.remaining() == 0;
        Ok(marked.then(|| d.reset_after()))
    }
}

impl<A: Algorithm> Limiter<A> {
    /// Whether the limiter's own limits keep a schedule a block pushes
    /// (GCRA and the buckets), as they are now.
    pub(crate) fn books_ahead(&self) -> bool {
        self.version().plan.books_ahead
    }
}

/// An algorithm's parts, as any caller of the sealed trait reads them.
fn parts_of<B: Algorithm>(algorithm: &B) -> Vec<(Option<Arc<str>>, crate::algorithm::Spec)> {
    algorithm.parts()
}
