//! What both layers' services share: how a request is gated.

use super::future::Stage;
use super::gate::Next;
use super::responder::{RejectionKind, Responder};
use crate::key::KeyRejection;
use crate::limiter::{Outcome, Pending};
use crate::Error;
use http::{HeaderMap, Request};
use std::borrow::Cow;
use std::sync::Arc;
use tower_service::Service;

pub(crate) use sealed::Gatekeeper;

mod sealed {
    use super::{
        Arc, Cow, Error, HeaderMap, KeyRejection, Next, Outcome, Pending, Request, Responder,
    };

    /// What a layer's configuration does with each request. Sealed: its
    /// items are reached only through the services' `call`.
    #[allow(private_interfaces)]
    pub trait Gatekeeper: Send + Sync + 'static {
        /// What a request brings from the start of its decision to what
        /// the decision leads to.
        type Gate: Send + Sync + 'static;
        /// The request's key, or why there is none.
        fn key<'r, B>(&self, req: &'r Request<B>) -> Result<Cow<'r, str>, KeyRejection>;
        /// How the layer answers.
        fn responder(&self) -> &Responder;
        /// Start the decision of `req`, whose key is `key`.
        fn start<B>(
            this: &Arc<Self>,
            req: &Request<B>,
            key: Cow<'_, str>,
        ) -> (Pending<Outcome>, Self::Gate);
        /// What the decision `result` of the request of `gate` leads to;
        /// `headers` are the request's.
        fn next(
            &self,
            gate: Self::Gate,
            result: Result<Outcome, Error>,
            headers: &HeaderMap,
        ) -> Next;
    }
}

/// The `call` of [`RateLimit`](super::RateLimit) and
/// [`ConcurrencyLimit`](super::ConcurrencyLimit): take the key, start the
/// decision, and let the response future carry on from the state returned.
pub(crate) fn call<S, C, ReqBody>(
    inner: &mut S,
    config: &Arc<C>,
    req: Request<ReqBody>,
) -> Stage<S, ReqBody>
where
    S: Service<Request<ReqBody>> + Clone,
    C: Gatekeeper,
{
    let key = match config.key(&req) {
        Ok(key) => key,
        Err(rejection) => {
            let kind = RejectionKind::NoKey(&rejection);
            return Stage::done(config.responder().reject(kind, req.headers()));
        }
    };
    let (decision, gate) = C::start(config, &req, key);
    Stage::start(inner, req, decision, config, gate)
}
