use super::layer::ConcurrencyLimitConfig;
use crate::concurrency::ConcurrencyLimiter;
use crate::key::{KeyExtractor, KeyRejection};
use crate::layer::body::ResponseBody;
use crate::layer::future;
use crate::layer::future::ConcurrencyLimitFuture;
use crate::layer::gatekeeper::Gatekeeper;
use crate::layer::next::{LeaseTicket, Next};
use crate::layer::responder::Responder;
use crate::limiter::{Outcome, Pending};
use crate::Error;
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body::Body;
use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};
use tower_service::Service;

/// The middleware [`ConcurrencyLimitLayer`](super::ConcurrencyLimitLayer)
/// wraps a service in: each admitted request holds a lease of its key until
/// its response body ends.
pub struct ConcurrencyLimit<S, K> {
    inner: S,
    config: Arc<ConcurrencyLimitConfig<K>>,
}

impl<S, K> ConcurrencyLimit<S, K> {
    pub(crate) fn new(inner: S, config: Arc<ConcurrencyLimitConfig<K>>) -> Self {
        Self { inner, config }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// The limiter leases are taken from.
    pub fn limiter(&self) -> &ConcurrencyLimiter {
        &self.config.limiter
    }
}

impl<S: Clone, K> Clone for ConcurrencyLimit<S, K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            config: self.config.clone(),
        }
    }
}

impl<S, K, ReqBody, ResBody> Service<Request<ReqBody>> for ConcurrencyLimit<S, K>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    K: KeyExtractor,
    ResBody: Body<Data = Bytes>,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ConcurrencyLimitFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        ConcurrencyLimitFuture::new(future::call(&mut self.inner, &self.config, req))
    }
}

impl<S: fmt::Debug, K: fmt::Debug> fmt::Debug for ConcurrencyLimit<S, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimit")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

// The trait is sealed: its items are reached only through the service's
// `call`, never named outside the crate.
#[allow(private_interfaces)]
impl<K: KeyExtractor> Gatekeeper for ConcurrencyLimitConfig<K> {
    type Ticket = LeaseTicket;

    fn key<'r, B>(&self, req: &'r Request<B>) -> Result<Cow<'r, str>, KeyRejection> {
        self.extractor.extract(req)
    }

    fn responder(&self) -> &Responder {
        &self.responder.responder
    }

    fn start<B>(
        this: &Arc<Self>,
        _req: &Request<B>,
        key: Cow<'_, str>,
    ) -> (Pending<Outcome>, LeaseTicket) {
        let (id, decision) = this.limiter.start_acquire(&key);
        let ticket = LeaseTicket {
            limiter: this.limiter.clone(),
            key: key.into_owned(),
            id,
        };
        (decision, ticket)
    }

    fn next(
        &self,
        ticket: LeaseTicket,
        result: Result<Outcome, Error>,
        headers: &HeaderMap,
    ) -> Next {
        self.responder.next(ticket, result, headers)
    }
}
