use crate::Decision;
use std::fmt;

/// Why an [`OutboundLimit`](super::OutboundLimit) call did not return the
/// inner service's response.
#[derive(Debug)]
#[non_exhaustive]
pub enum OutboundError<E> {
    /// The call's cost would not fit within the layer's longest wait: it
    /// was not sent, and nothing was charged. The decision says when it
    /// would ([`retry_after`](Decision::retry_after)).
    Limited(Decision),
    /// The limiter could not decide (its store failed and its failure
    /// policy is [`ReturnError`](crate::failure::FailurePolicy::ReturnError)).
    Limiter(crate::Error),
    /// The inner service failed.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for OutboundError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutboundError::Limited(d) => match d.retry_after() {
                Some(t) => write!(f, "outbound limit: would wait too long (fits in {t:?})"),
                None => f.write_str("outbound limit: the cost can never fit"),
            },
            OutboundError::Limiter(e) => write!(f, "outbound limit: {e}"),
            OutboundError::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for OutboundError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OutboundError::Limited(_) => None,
            OutboundError::Limiter(e) => Some(e),
            OutboundError::Inner(e) => Some(e),
        }
    }
}
