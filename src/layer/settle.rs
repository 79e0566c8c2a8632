//! What happens to a request's charge once its response is known.

use http::StatusCode;
use std::fmt;
use std::sync::Arc;

/// Put on every response the layer answers by itself because a policy
/// denied the request. An outer [`RateLimitLayer`](super::RateLimitLayer)
/// that charged the same request gives its charge back when it sees this
/// (see [`RateLimitLayer::refund_inner_denials`](super::RateLimitLayer::refund_inner_denials)),
/// so stacking limits (per API key inside a global one, per user inside
/// per IP) charges nothing where a later limit denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited;

pub(crate) type StatusFn = Arc<dyn Fn(StatusCode) -> bool + Send + Sync>;

/// Which requests are charged.
#[derive(Clone, Default)]
pub(crate) enum Counting {
    /// Every admitted request (the default).
    #[default]
    Always,
    /// Every admitted request, refunded when its status matches.
    RefundWhen(StatusFn),
    /// Only requests whose response status matches, charged once the
    /// response is known; before that the layer only peeks.
    OnlyWhen(StatusFn),
}

impl fmt::Debug for Counting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Counting::Always => "Always",
            Counting::RefundWhen(_) => "RefundWhen(..)",
            Counting::OnlyWhen(_) => "OnlyWhen(..)",
        })
    }
}

/// Called once with the response's status and whether an inner limit
/// denied it. Boxed: it carries the limiter, key, cost and quota of the
/// request, and runs at most once per request.
pub(crate) type Settle = Box<dyn FnOnce(StatusCode, bool) + Send>;

/// Run `work` on the current tokio runtime without delaying the response.
pub(crate) fn spawn(work: impl std::future::Future<Output = ()> + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(work);
        }
        Err(_) => tracing::warn!("floodgate: no tokio runtime to settle a charge on; skipped"),
    }
}
