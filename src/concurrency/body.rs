use super::limiter::Permit;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project! {
    /// Response body of [`ConcurrencyLimit`](super::ConcurrencyLimit): the
    /// inner body holding the request's slot until it ends or is dropped,
    /// or the bytes of a rejection.
    // pin-project-lite takes no doc comments on variant fields.
    #[allow(missing_docs)]
    #[project = BodyProj]
    pub enum ConcurrencyBody<B> {
        /// The inner service's body, and the slot it holds.
        Leased { #[pin] body: B, permit: Option<Permit> },
        /// A rejection built by the layer: the bytes not yet sent.
        Full { data: Option<Bytes> },
    }
}

impl<B: Body<Data = Bytes>> Body for ConcurrencyBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project() {
            BodyProj::Leased { body, permit } => {
                let frame = ready!(body.poll_frame(cx));
                if frame.is_none() {
                    // The response is complete: free the slot now, not when
                    // the connection gets around to dropping the body.
                    permit.take();
                }
                Poll::Ready(frame)
            }
            BodyProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ConcurrencyBody::Leased { body, .. } => body.is_end_stream(),
            ConcurrencyBody::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ConcurrencyBody::Leased { body, .. } => body.size_hint(),
            ConcurrencyBody::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}
