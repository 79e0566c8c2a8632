//! What each layer's configuration does with a request: the one trait both
//! layers' response futures are written against (`future.rs`).

use super::next::Next;
use super::responder::Responder;
use crate::key::KeyRejection;
use crate::limiter::{Outcome, Pending};
use crate::Error;
use http::{HeaderMap, Request};
use std::borrow::Cow;
use std::sync::Arc;

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
        type Ticket: Send + Sync + 'static;
        /// The request's key, or why there is none.
        fn key<'r, B>(&self, req: &'r Request<B>) -> Result<Cow<'r, str>, KeyRejection>;
        /// How the layer answers.
        fn responder(&self) -> &Responder;
        /// Start the decision of `req`, whose key is `key`.
        fn start<B>(
            this: &Arc<Self>,
            req: &Request<B>,
            key: Cow<'_, str>,
        ) -> (Pending<Outcome>, Self::Ticket);
        /// What the decision `result` of the request of `ticket` leads to;
        /// `headers` are the request's.
        fn next(
            &self,
            ticket: Self::Ticket,
            result: Result<Outcome, Error>,
            headers: &HeaderMap,
        ) -> Next;
    }
}
