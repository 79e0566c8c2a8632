//! The responses floodgate sends when it rejects a request.
//!
//! Every builder returns an `http::Response<bytes::Bytes>` (the layer maps the
//! body into its own type), so nothing is boxed.
//!
//! | situation | HTTP client | gRPC client |
//! |---|---|---|
//! | a limit denied the request | [`too_many_requests`]: 429 | `grpc_resource_exhausted`: `RESOURCE_EXHAUSTED` |
//! | no rate-limit key in the request | [`bad_request`]: 400 | `grpc_invalid_argument`: `INVALID_ARGUMENT` |
//! | store down, the failure policy denies | [`service_unavailable`]: 503 | `grpc_unavailable`: `UNAVAILABLE` |
//! | the key is on the deny list ([`Exemptions`](crate::Exemptions)) | [`forbidden`]: 403 | `grpc_permission_denied`: `PERMISSION_DENIED` |
//!
//! HTTP rejections carry an RFC 9457 `application/problem+json` body and
//! `Cache-Control: no-store`. gRPC rejections (feature `grpc`) are
//! Trailers-Only responses with HTTP status 200: a gRPC client never gets an
//! HTTP 429, which it would read as `UNAVAILABLE` and retry. Use `is_grpc` on
//! the request headers to choose.

mod denial;
#[cfg(feature = "grpc")]
mod grpc;
mod problem;

#[cfg(feature = "grpc")]
pub use grpc::{
    grpc_invalid_argument, grpc_permission_denied, grpc_resource_exhausted, grpc_unavailable,
    is_grpc,
};
pub use problem::{
    bad_request, forbidden, service_unavailable, too_many_requests, PROBLEM_JSON,
    QUOTA_EXCEEDED_TYPE,
};

/// Why a fail-closed limiter rejects, for both the HTTP and gRPC forms.
const UNAVAILABLE_DETAIL: &str =
    "The rate limiter cannot reach its store and rejects requests until it can.";

/// Why a request whose key is on the deny list is refused, for both forms.
const BLOCKED_DETAIL: &str = "The rate limiter refuses every request of this key.";
