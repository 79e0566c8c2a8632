//! How a [`Decision`](super::Decision) keeps its reason and whether it is
//! degraded.

use super::Reason;

/// A decision's reason and whether it is degraded, in one word.
// One word, written by one store: the copy of a decision its caller makes
// at once (out of a `Result`, into a variable) reads the word straight
// back. As two bytes, the word was read back across two stores still on
// their way, a stall (71.3 -> 68.5 ns a memory-store GCRA decision over
// 10 000 keys, 59.5 -> 54.8 over 100, benches/outside).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct PackedReason(u64);

impl PackedReason {
    const DEGRADED: u64 = 1 << 8;

    #[inline]
    pub(super) fn new(reason: Reason, degraded: bool) -> Self {
        Self(reason.index() as u64 | if degraded { Self::DEGRADED } else { 0 })
    }

    #[inline]
    pub(super) fn reason(self) -> Reason {
        Reason::ALL[(self.0 & 0xff) as usize]
    }

    #[inline]
    pub(super) fn degraded(self) -> bool {
        self.0 & Self::DEGRADED != 0
    }
}
