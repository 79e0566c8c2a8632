//! What a twin is asked to do beyond a check, a peek or a refund: the
//! rest of the store's mode, as the twins read it.

/// The rest of the store's mode: for a reservation how far ahead it may
/// book (`wait`, ms) and, for a reservation of several limits decided
/// again, how far ahead it is booked (`lead`, ms); a charge whether it
/// fits or not (`debit`); a block of `blocked` ms (GCRA and the buckets;
/// sent with cost 0, which leaves the others as they are).
///
/// A twin reads it through a reference, and a check, a peek or a refund
/// pass [`PLAIN`](Self::PLAIN): building and copying it for every decision
/// cost ~40 instructions a GCRA decision on the memory store (callgrind,
/// `benches/outside`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TwinMode {
    pub(crate) wait: Option<u64>,
    pub(crate) lead: u64,
    pub(crate) debit: bool,
    pub(crate) blocked: Option<u64>,
}

impl TwinMode {
    /// Nothing beyond a check, a peek or a refund.
    pub(crate) const PLAIN: Self = Self {
        wait: None,
        lead: 0,
        debit: false,
        blocked: None,
    };
}
