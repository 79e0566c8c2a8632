//! How the layers answer by themselves: one rejection path for the rate
//! limit and the concurrency layer, and how to replace its answers.

use super::settle::DeniedByLimit;
use crate::headers::{HeaderStyle, LimitReport};
use crate::key::KeyRejection;
use crate::response;
use bytes::Bytes;
use http::{HeaderMap, Response};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Why a layer answered a request itself instead of calling the service.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum RejectionKind<'a> {
    /// A limit denied the request: over it, or a cost it can never hold.
    Limited {
        /// One report per limit checked, with its decision.
        reports: &'a [LimitReport<'a>],
    },
    /// No rate-limit key could be extracted from the request.
    NoKey(&'a KeyRejection),
    /// The store could not decide and the failure policy denies (fails
    /// closed, or returns the error).
    Unavailable {
        /// When to try again, if known.
        retry_after: Option<Duration>,
    },
    /// The request's key is on the deny list of the limiter's
    /// [`Exemptions`](crate::Exemptions).
    Blocked,
}

/// A rejection about to be sent: what happened, and how the default answer
/// would be written. Given to a custom handler set with `on_rejection` on
/// either layer.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Rejection<'a> {
    /// What happened.
    pub kind: RejectionKind<'a>,
    /// Whether the request is gRPC (`content-type: application/grpc*`):
    /// gRPC clients must get a gRPC status, never an HTTP 429. Always
    /// `false` without the `grpc` feature.
    pub grpc: bool,
    /// The header style the layer is configured with.
    pub style: HeaderStyle,
    /// The time the decision was made (for epoch-based headers).
    pub now: SystemTime,
}

impl Rejection<'_> {
    /// The answer floodgate gives by default: 429 / 400 / 503 / 403 with an
    /// RFC 9457 problem+json body for HTTP, a trailers-only
    /// `RESOURCE_EXHAUSTED` / `INVALID_ARGUMENT` / `UNAVAILABLE` /
    /// `PERMISSION_DENIED` status for gRPC.
    pub fn default_response(&self) -> Response<Bytes> {
        #[cfg(feature = "grpc")]
        if self.grpc {
            return match self.kind {
                RejectionKind::Limited { reports } => {
                    response::grpc_resource_exhausted(reports, self.style, self.now)
                }
                RejectionKind::NoKey(r) => response::grpc_invalid_argument(r.reason()),
                RejectionKind::Unavailable { retry_after } => {
                    response::grpc_unavailable(retry_after)
                }
                RejectionKind::Blocked => response::grpc_permission_denied(),
            };
        }
        match self.kind {
            RejectionKind::Limited { reports } => {
                response::too_many_requests(reports, self.style, self.now)
            }
            RejectionKind::NoKey(r) => response::bad_request(r.reason()),
            RejectionKind::Unavailable { retry_after } => {
                response::service_unavailable(retry_after)
            }
            RejectionKind::Blocked => response::forbidden(),
        }
    }
}

pub(crate) type OnRejection = Arc<dyn Fn(&Rejection<'_>) -> Response<Bytes> + Send + Sync>;

/// How a layer answers: what its response future needs, free of the
/// layer's key and algorithm types.
#[derive(Clone)]
pub(crate) struct Responder {
    /// The limiter's name, for logs.
    pub(crate) name: Arc<str>,
    pub(crate) style: HeaderStyle,
    pub(crate) on_rejection: Option<OnRejection>,
    pub(crate) shadow: bool,
}

impl Responder {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            name: name.into(),
            style: HeaderStyle::default(),
            on_rejection: None,
            shadow: false,
        }
    }

    /// The answer to a request the layer rejects for `kind`.
    pub(crate) fn reject(&self, kind: RejectionKind<'_>, request: &HeaderMap) -> Response<Bytes> {
        let rejection = Rejection {
            kind,
            grpc: is_grpc(request),
            style: self.style,
            now: SystemTime::now(),
        };
        let mut response = match &self.on_rejection {
            Some(f) => f(&rejection),
            None => rejection.default_response(),
        };
        if let RejectionKind::Limited { .. } = kind {
            response.extensions_mut().insert(DeniedByLimit);
        }
        response
    }
}

fn is_grpc(headers: &HeaderMap) -> bool {
    #[cfg(feature = "grpc")]
    return response::is_grpc(headers);
    #[cfg(not(feature = "grpc"))]
    {
        let _ = headers;
        false
    }
}
