//! What both layers' services share: how a request is gated.

use super::body::ResponseBody;
use super::future::ResponseFuture;
use super::gate::Gate;
use super::responder::{RejectionKind, Responder};
use crate::key::KeyRejection;
use crate::limiter::{Outcome, Pending};
use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use std::sync::Arc;
use tower_service::Service;

pub(crate) use sealed::Gatekeeper;

mod sealed {
    use super::{Arc, Gate, KeyRejection, Outcome, Pending, Request, Responder};

    /// What a layer's configuration does with each request. Sealed: its
    /// items are reached only through the services' `call`.
    #[allow(private_interfaces)]
    pub trait Gatekeeper: Send + Sync + 'static {
        /// The request's key, or why there is none.
        fn key<B>(&self, req: &Request<B>) -> Result<String, KeyRejection>;
        /// How the layer answers.
        fn responder(&self) -> &Responder;
        /// Start the decision of `req`, whose key is `key`: the decision
        /// and what follows it.
        fn start<B>(this: &Arc<Self>, req: &Request<B>, key: String) -> (Pending<Outcome>, Gate);
    }
}

/// The `call` of [`RateLimit`](super::RateLimit) and
/// [`ConcurrencyLimit`](super::ConcurrencyLimit): take the key, start the
/// decision, and let the response future carry on.
pub(crate) fn call<S, C, ReqBody, ResBody>(
    inner: &mut S,
    config: &Arc<C>,
    req: Request<ReqBody>,
) -> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    C: Gatekeeper,
    ResBody: Body<Data = Bytes>,
{
    let key = match config.key(&req) {
        Ok(key) => key,
        Err(rejection) => {
            let kind = RejectionKind::NoKey(&rejection);
            return ResponseFuture::done(config.responder().reject(kind, req.headers()));
        }
    };
    let (decision, gate) = C::start(config, &req, key);
    ResponseFuture::start(inner, req, decision, gate)
}

/// The response type of both services.
pub(crate) type Answered<ResBody> = Response<ResponseBody<ResBody>>;
