//! The bodies of the layers' responses: the concurrency layer's
//! [`ResponseBody`], and how the rate-limit layer builds a rejection as the
//! inner service's own body type ([`RejectionBody`]).

use super::settle_at_end::SettleAtEnd;
#[cfg(any(feature = "axum", feature = "grpc"))]
use super::settle_at_end::SettlingBody;
use crate::concurrency::Lease;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

pin_project! {
    /// Response body of [`ConcurrencyLimit`](super::ConcurrencyLimit): the
    /// inner service's body, untouched (holding the request's lease, if
    /// any, until it ends or is dropped), or the small body of a rejection
    /// the layer answered itself. No boxing either way.
    pub struct ResponseBody<B> {
        #[pin]
        inner: BodyKind<B>,
    }
}

pin_project! {
    #[project = BodyKindProj]
    enum BodyKind<B> {
        Service { #[pin] body: B, lease: Option<Box<Lease>> },
        Full { data: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    /// The inner service's body, holding `lease` until it ends.
    pub(crate) fn service(body: B, lease: Option<Box<Lease>>) -> Self {
        Self {
            inner: BodyKind::Service { body, lease },
        }
    }

    /// The body of a rejection.
    pub(crate) fn full(data: Bytes) -> Self {
        Self {
            inner: BodyKind::Full {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

impl<B: Body<Data = Bytes>> Body for ResponseBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().inner.project() {
            BodyKindProj::Service { body, lease } => {
                let frame = ready!(body.poll_frame(cx));
                if frame.is_none() {
                    // The response is complete: free the slot now, not when
                    // the connection gets around to dropping the body.
                    lease.take();
                }
                Poll::Ready(frame)
            }
            BodyKindProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            BodyKind::Service { body, .. } => body.is_end_stream(),
            BodyKind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            BodyKind::Service { body, .. } => body.size_hint(),
            BodyKind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

/// A response body the rate-limit layer can answer with by itself: it
/// builds its rejections (429, 400, 503 and their gRPC forms) as the inner
/// service's own body type, so [`RateLimit`](super::RateLimit) passes
/// admitted responses through unchanged (no re-boxing downstream).
///
/// Implemented for axum's body (feature `axum`), tonic's (feature `grpc`),
/// `String`, and [`ResponseBody`] (a
/// [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer) inside the
/// rate-limit layer). For a body type of your own, build it from the bytes:
///
/// ```
/// use bytes::Bytes;
/// use floodgate::layer::RejectionBody;
///
/// struct MyBody(Bytes);
///
/// impl RejectionBody for MyBody {
///     fn from_rejection(bytes: Bytes) -> Self {
///         MyBody(bytes)
///     }
/// }
/// ```
pub trait RejectionBody: Sized {
    /// The body of a rejection whose content is `bytes` (empty for gRPC's
    /// trailers-only answers).
    fn from_rejection(bytes: Bytes) -> Self;

    /// This body, settling `end` when it ends: for a cost a trailer says
    /// ([`ActualCost::Trailer`](super::ActualCost::Trailer)). A body type
    /// that can hold any body wraps it in a [`SettlingBody`], as axum's
    /// and tonic's do:
    ///
    /// ```
    /// # use bytes::Bytes;
    /// # use floodgate::layer::{RejectionBody, SettleAtEnd, SettlingBody};
    /// # struct MyBody;
    /// # impl MyBody { fn new<B>(_: B) -> Self { MyBody } }
    /// impl RejectionBody for MyBody {
    ///     fn from_rejection(bytes: Bytes) -> Self {
    ///         MyBody::new(bytes)
    ///     }
    ///     fn settle_at_end(self, end: SettleAtEnd) -> Self {
    ///         MyBody::new(SettlingBody::new(self, end))
    ///     }
    /// }
    /// ```
    ///
    /// The default cannot watch a body it does not know: `end` is settled
    /// at once, at the estimate.
    #[must_use]
    fn settle_at_end(self, end: SettleAtEnd) -> Self {
        drop(end);
        self
    }
}

impl<B> RejectionBody for ResponseBody<B> {
    fn from_rejection(bytes: Bytes) -> Self {
        Self::full(bytes)
    }
}

#[cfg(feature = "axum")]
impl RejectionBody for axum::body::Body {
    fn from_rejection(bytes: Bytes) -> Self {
        Self::from(bytes)
    }

    fn settle_at_end(self, end: SettleAtEnd) -> Self {
        Self::new(SettlingBody::new(self, end))
    }
}

#[cfg(feature = "grpc")]
impl RejectionBody for tonic::body::Body {
    fn from_rejection(bytes: Bytes) -> Self {
        // Empty (trailers-only gRPC answers) stays unboxed; the problem+json
        // body of a request that was not gRPC is boxed, as tonic boxes.
        Self::new(ResponseBody::<Self>::full(bytes))
    }

    fn settle_at_end(self, end: SettleAtEnd) -> Self {
        Self::new(SettlingBody::new(self, end))
    }
}

impl RejectionBody for String {
    fn from_rejection(bytes: Bytes) -> Self {
        // The layer's bodies are UTF-8 (problem+json, or empty).
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    /// Every data frame of `body`, polled by hand (every body here is ready).
    fn data<B: Body<Data = Bytes>>(body: B) -> (Vec<u8>, bool) {
        let mut body = Box::pin(body);
        let empty_at_start = body.is_end_stream();
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(frame)) = body.as_mut().poll_frame(&mut cx) {
            if let Ok(d) = frame.map(Frame::into_data) {
                out.extend_from_slice(&d.unwrap_or_default());
            }
        }
        (out, empty_at_start)
    }

    const JSON: &[u8] = br#"{"status":429}"#;

    #[test]
    fn a_rejection_is_its_bytes_in_every_body() {
        let bytes = || Bytes::from_static(JSON);
        assert_eq!(
            data(ResponseBody::<String>::from_rejection(bytes())).0,
            JSON
        );
        assert_eq!(data(String::from_rejection(bytes())).0, JSON);
        #[cfg(feature = "axum")]
        assert_eq!(data(axum::body::Body::from_rejection(bytes())).0, JSON);
        #[cfg(feature = "grpc")]
        assert_eq!(data(tonic::body::Body::from_rejection(bytes())).0, JSON);
    }

    #[test]
    fn an_empty_rejection_ends_at_once() {
        assert_eq!(
            data(ResponseBody::<String>::from_rejection(Bytes::new())),
            (Vec::new(), true)
        );
        #[cfg(feature = "grpc")]
        assert_eq!(
            data(tonic::body::Body::from_rejection(Bytes::new())),
            (Vec::new(), true)
        );
    }
}
