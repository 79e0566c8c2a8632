//! Answers the layer gives by itself, and how to replace them.

use crate::headers::{HeaderStyle, PolicyReport};
use crate::key::KeyRejection;
use crate::response;
use bytes::Bytes;
use http::Response;
use std::time::{Duration, SystemTime};

/// Why the layer answered a request itself instead of calling the service.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Reason<'a> {
    /// A policy denied the request.
    Limited {
        /// One report per policy checked, with its decision.
        reports: &'a [PolicyReport<'a>],
    },
    /// No rate-limit key could be extracted from the request.
    NoKey(&'a KeyRejection),
    /// The store could not be asked and the failure policy is to deny.
    Unavailable {
        /// When to try again, if known.
        retry_after: Option<Duration>,
    },
}

/// A rejection about to be sent: what happened, and how the default answer
/// would be written. Given to a custom handler set with
/// [`RateLimitLayer::on_rejection`](super::RateLimitLayer::on_rejection).
#[derive(Debug, Clone, Copy)]
pub struct Rejection<'a> {
    /// What happened.
    pub reason: Reason<'a>,
    /// Whether the request is gRPC (`content-type: application/grpc*`):
    /// gRPC clients must get a gRPC status, never an HTTP 429.
    pub grpc: bool,
    /// The header style the layer is configured with.
    pub style: HeaderStyle,
    /// The time the decision was made (for epoch-based headers).
    pub now: SystemTime,
}

impl Rejection<'_> {
    /// The answer floodgate gives by default: 429 / 400 / 503 with an RFC
    /// 9457 problem+json body for HTTP, a trailers-only `RESOURCE_EXHAUSTED` /
    /// `INVALID_ARGUMENT` / `UNAVAILABLE` status for gRPC.
    pub fn default_response(&self) -> Response<Bytes> {
        #[cfg(feature = "grpc")]
        if self.grpc {
            return match self.reason {
                Reason::Limited { reports } => {
                    response::grpc_resource_exhausted(reports, self.style, self.now)
                }
                Reason::NoKey(r) => response::grpc_invalid_argument(r.reason()),
                Reason::Unavailable { retry_after } => response::grpc_unavailable(retry_after),
            };
        }
        match self.reason {
            Reason::Limited { reports } => {
                response::too_many_requests(reports, self.style, self.now)
            }
            Reason::NoKey(r) => response::bad_request(r.reason()),
            Reason::Unavailable { retry_after } => response::service_unavailable(retry_after),
        }
    }
}
