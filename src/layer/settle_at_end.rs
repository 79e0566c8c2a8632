//! A cost a response says at its very end, in a trailer
//! ([`ActualCost::Trailer`](super::ActualCost::Trailer)): the request's
//! settlement rides on the response body and is made when the body ends.

use super::cost::cost_in;
use super::settle::Settlement;
use http::{HeaderMap, HeaderName};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// An admitted request's charge, settled when its response body ends: at
/// the cost its trailer says, or at the estimate when the body ends without
/// it, fails, or is dropped before its end.
///
/// Made by [`RateLimitLayer`](super::RateLimitLayer) with
/// [`ActualCost::Trailer`](super::ActualCost::Trailer) and handed to
/// [`RejectionBody::settle_at_end`](super::RejectionBody::settle_at_end);
/// a body type of your own carries it in a [`SettlingBody`].
pub struct SettleAtEnd(Box<Unsettled>);

struct Unsettled {
    /// `None` once settled.
    settlement: Option<Settlement>,
    /// What the request owes if the trailer says nothing: the estimate, as
    /// the response's head left it.
    estimate: u64,
    trailer: HeaderName,
}

impl SettleAtEnd {
    pub(crate) fn new(settlement: Settlement, estimate: u64, trailer: HeaderName) -> Self {
        Self(Box::new(Unsettled {
            settlement: Some(settlement),
            estimate,
            trailer,
        }))
    }

    /// The body ended, with `trailers` if it had any: settle at the cost
    /// they say, else at the estimate.
    fn ended(&mut self, trailers: Option<&HeaderMap>) {
        let pending = &mut *self.0;
        if let Some(settlement) = pending.settlement.take() {
            let said = trailers.and_then(|t| cost_in(t, &pending.trailer));
            settlement.settle(said.unwrap_or(pending.estimate));
        }
    }
}

impl Drop for SettleAtEnd {
    /// Dropped before its body ended: the estimate stays charged (a request
    /// only tried is charged it now).
    fn drop(&mut self) {
        self.ended(None);
    }
}

impl fmt::Debug for SettleAtEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SettleAtEnd")
            .field("trailer", &self.0.trailer)
            .field("estimate", &self.0.estimate)
            .field("settled", &self.0.settlement.is_none())
            .finish()
    }
}

pin_project! {
    /// A response body that settles its request's charge when it ends
    /// ([`SettleAtEnd`]): its frames pass through untouched.
    ///
    /// axum's and tonic's bodies wrap themselves in one
    /// ([`RejectionBody::settle_at_end`](super::RejectionBody::settle_at_end));
    /// a body type of your own that can hold any body does the same.
    pub struct SettlingBody<B> {
        #[pin]
        body: B,
        end: Option<SettleAtEnd>,
    }
}

impl<B> SettlingBody<B> {
    /// `body`, settling `end` when it ends.
    pub fn new(body: B, end: SettleAtEnd) -> Self {
        Self {
            body,
            end: Some(end),
        }
    }
}

impl<B: Body> Body for SettlingBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let frame = ready!(this.body.poll_frame(cx));
        let ended = match &frame {
            // Trailers end the body; data does not.
            Some(Ok(frame)) => frame.trailers_ref().map(Some),
            // Its end without trailers, or a failure: the estimate stays.
            None | Some(Err(_)) => Some(None),
        };
        if let Some(trailers) = ended {
            if let Some(mut end) = this.end.take() {
                end.ended(trailers);
            }
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<B: fmt::Debug> fmt::Debug for SettlingBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SettlingBody")
            .field("body", &self.body)
            .field("end", &self.end)
            .finish()
    }
}
