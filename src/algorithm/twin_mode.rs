//! What a twin is asked to do: the store's mode, as the twins read it.

/// What a twin is asked to do, as the store's mode says it: give the cost
/// back (`refund`), write the state (`write`), for a reservation how far
/// ahead it may book (`wait`, ms) and, for a reservation of several limits
/// decided again, how far ahead it is booked (`lead`, ms); or charge the
/// cost whether it fits or not (`debit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TwinMode {
    pub(crate) refund: bool,
    pub(crate) write: bool,
    pub(crate) wait: Option<u64>,
    pub(crate) lead: u64,
    pub(crate) debit: bool,
    /// A block of this many ms (GCRA and the buckets; sent with cost 0,
    /// which leaves the others as they are).
    pub(crate) blocked: Option<u64>,
}

impl TwinMode {
    /// A check: charge if admitted.
    pub(crate) const CHECK: Self = Self {
        refund: false,
        write: true,
        wait: None,
        lead: 0,
        debit: false,
        blocked: None,
    };
    /// A peek: decide, write nothing.
    pub(crate) const PEEK: Self = Self {
        write: false,
        ..Self::CHECK
    };
}
