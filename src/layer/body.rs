//! The body of a limited response: the inner service's, or a rejection's.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::pin::Pin;
use std::task::{Context, Poll};

pin_project! {
    /// Response body of [`RateLimit`](super::RateLimit): the inner
    /// service's body, untouched, or the small body of a rejection the layer
    /// answered itself. No boxing either way.
    // pin-project-lite takes no doc comments on variant fields.
    #[allow(missing_docs)]
    #[project = BodyProj]
    pub enum RateLimitBody<B> {
        /// The inner service's body.
        Inner { #[pin] body: B },
        /// A rejection built by the layer: the bytes not yet sent.
        Full { data: Option<Bytes> },
    }
}

impl<B> RateLimitBody<B> {
    pub(crate) fn full(data: Bytes) -> Self {
        RateLimitBody::Full {
            data: (!data.is_empty()).then_some(data),
        }
    }
}

impl<B: Body<Data = Bytes>> Body for RateLimitBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project() {
            BodyProj::Inner { body } => body.poll_frame(cx),
            BodyProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RateLimitBody::Inner { body } => body.is_end_stream(),
            RateLimitBody::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            RateLimitBody::Inner { body } => body.size_hint(),
            RateLimitBody::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}
