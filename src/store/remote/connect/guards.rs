//! The guards of the connect machinery: the end of a connection attempt,
//! and the watch on a call that notices a stalled connection.

use super::{Connector, LinksShared, STALL_LIMIT_MS};
use crate::store::StoreError;
use std::sync::atomic::Ordering;

/// The end of a connection attempt, also when its task is dropped.
pub(super) struct Attempt<'a, C: Connector> {
    pub(super) shared: &'a LinksShared<C>,
    pub(super) slot: usize,
    pub(super) result: Option<Result<C::Conn, StoreError>>,
}

impl<C: Connector> Drop for Attempt<'_, C> {
    fn drop(&mut self) {
        if let Some(result) = self.result.take() {
            self.shared.install(self.slot, result);
        }
    }
}

/// Notices calls given up on (their future dropped, i.e. timed out) with no
/// answer from the connection, and replaces a connection that stalled.
pub(super) struct Watch<'a, C: Connector> {
    pub(super) shared: &'a LinksShared<C>,
    pub(super) slot: usize,
    pub(super) generation: u64,
    pub(super) answered: bool,
}

impl<C: Connector> Watch<'_, C> {
    pub(super) fn answered(mut self) {
        self.answered = true;
        let since = &self.shared.slots[self.slot].stalled_since;
        if since.load(Ordering::Relaxed) != 0 {
            since.store(0, Ordering::Relaxed);
        }
    }
}

impl<C: Connector> Drop for Watch<'_, C> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let since = &self.shared.slots[self.slot].stalled_since;
        let now = self.shared.now_ms();
        match since.load(Ordering::Relaxed) {
            0 => {
                let _ = since.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
            }
            t if now.saturating_sub(t) >= STALL_LIMIT_MS => {
                since.store(0, Ordering::Relaxed);
                self.shared.detach(self.slot, self.generation);
            }
            _ => {}
        }
    }
}
