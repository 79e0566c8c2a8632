//! The response futures of the layers: decide, then call the service or
//! answer at once. Both run one state machine ([`Stage`]); they differ only
//! in the body they answer with.

use super::body::{RejectionBody, ResponseBody};
use super::gatekeeper::Gatekeeper;
use super::next::{Admitted, Next, Rider};
use super::responder::RejectionKind;
use super::waiting::Waiter;
use crate::limiter::{Outcome, Pending};
use crate::Error;
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tower_service::Service;

pin_project! {
    /// Response future of [`RateLimit`](super::RateLimit): the inner
    /// service's response with its body type unchanged, or the layer's own
    /// answer built as that body type (see [`RejectionBody`]).
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: Stage<S, ReqBody>,
    }
}

pin_project! {
    /// Response future of [`ConcurrencyLimit`](super::ConcurrencyLimit): its
    /// body, a [`ResponseBody`], holds the request's lease until it ends.
    pub struct ConcurrencyLimitFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: Stage<S, ReqBody>,
    }
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn new(state: Stage<S, ReqBody>) -> Self {
        Self { state }
    }
}

impl<S, ReqBody> ConcurrencyLimitFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn new(state: Stage<S, ReqBody>) -> Self {
        Self { state }
    }
}

pin_project! {
    /// Where a request is between the layer's decision and its response.
    #[project = StageProj]
    pub(crate) enum Stage<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        /// Waiting for the store's decision. What waits is boxed (as in
        /// `Delaying`): the state the memory store's requests go through,
        /// `Calling`, stays small to move.
        Deciding {
            decision: Pending<Outcome>,
            waiting: Option<Box<(S, Request<ReqBody>, Resume)>>,
        },
        /// Admitted for a later time (a reservation, or the leaky bucket's
        /// place in its queue), waiting for it; dropped before, it gives
        /// its reservation back (`Waiter`).
        Delaying {
            sleep: Pin<Box<tokio::time::Sleep>>,
            waiting: Option<Box<(S, Request<ReqBody>, Admitted, Option<Box<Waiter>>)>>,
        },
        /// The inner service is handling the request.
        Calling {
            #[pin]
            fut: S::Future,
            admitted: Option<Admitted>,
        },
        /// The layer answered by itself.
        Done {
            response: Option<Response<Bytes>>,
        },
    }
}

/// What a decision under way leads to once made: the layer's `next`, with
/// the layer and the request's ticket taken along.
type Resume = Box<dyn FnOnce(Result<Outcome, Error>, &HeaderMap) -> Next + Send + Sync>;

const POLLED_AFTER_DONE: &str = "a layer's response future polled after completion";

/// How a request ends: served by the inner service (with what rides on
/// its body), or refused by the layer.
pub(crate) enum Ending<B> {
    Served(Response<B>, Rider),
    Refused(Response<Bytes>),
}

impl<S, ReqBody> Stage<S, ReqBody>
where
    S: Service<Request<ReqBody>> + Clone,
{
    /// The layer answers `response` by itself.
    pub(crate) fn done(response: Response<Bytes>) -> Self {
        Stage::Done {
            response: Some(response),
        }
    }

    /// What both layers do once their decision has started: go on at once
    /// when it is ready (the memory store's, or a deny-cache hit), calling
    /// the service that reported ready as a synchronous middleware does,
    /// with the layer `config` borrowed; else wait for it with the ready
    /// service and the layer taken along.
    pub(crate) fn start<C: Gatekeeper>(
        inner: &mut S,
        req: Request<ReqBody>,
        decision: Pending<Outcome>,
        config: &Arc<C>,
        ticket: C::Ticket,
    ) -> Self {
        match decision.now() {
            Ok(result) => Stage::after(config.next(ticket, result, req.headers()), inner, req),
            Err(decision) => {
                let config = Arc::clone(config);
                let resume: Resume =
                    Box::new(move |result, headers| config.next(ticket, result, headers));
                Stage::Deciding {
                    decision,
                    waiting: Some(Box::new((take_ready(inner), req, resume))),
                }
            }
        }
    }

    /// What follows the decision `next`: `inner` is called now, or after the
    /// wait booked for the request, or not at all.
    fn after(next: Next, inner: &mut S, req: Request<ReqBody>) -> Self {
        match next {
            Next::Reject(response) => Stage::done(response),
            Next::Call(admitted) => Stage::Calling {
                fut: inner.call(req),
                admitted: Some(admitted),
            },
            Next::Delay(delay, admitted, waiter) => Stage::Delaying {
                sleep: Box::pin(tokio::time::sleep(delay)),
                waiting: Some(Box::new((take_ready(inner), req, admitted, waiter))),
            },
        }
    }
}

/// The service that reported ready, leaving a clone for the next
/// `poll_ready`: the request reaches it later (tower-http's async
/// middlewares do the same).
fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

impl<S, ReqBody, ResBody> Stage<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    /// Drive the request to its answer.
    fn poll_answer(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Ending<ResBody>, S::Error>> {
        loop {
            match self.as_mut().project() {
                StageProj::Deciding { decision, waiting } => {
                    let result = ready!(Pin::new(decision).poll(cx));
                    let (mut inner, req, resume) = *waiting.take().expect(POLLED_AFTER_DONE);
                    let next = resume(result, req.headers());
                    self.set(Stage::after(next, &mut inner, req));
                }
                StageProj::Delaying { sleep, waiting } => {
                    ready!(sleep.as_mut().poll(cx));
                    let (mut inner, req, admitted, waiter) =
                        *waiting.take().expect(POLLED_AFTER_DONE);
                    if let Some(waiter) = waiter {
                        waiter.served();
                    }
                    self.set(Stage::Calling {
                        fut: inner.call(req),
                        admitted: Some(admitted),
                    });
                }
                StageProj::Calling { fut, admitted } => {
                    let mut response = ready!(fut.poll(cx))?;
                    let admitted = admitted.take().expect(POLLED_AFTER_DONE);
                    let rider = admitted.finish(&mut response);
                    return Poll::Ready(Ok(Ending::Served(response, rider)));
                }
                StageProj::Done { response } => {
                    let response = response.take().expect(POLLED_AFTER_DONE);
                    return Poll::Ready(Ok(Ending::Refused(response)));
                }
            }
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
    ResBody: RejectionBody,
{
    type Output = Result<Response<ResBody>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(match ready!(self.project().state.poll_answer(cx))? {
            // The rate-limit layer takes no lease; a settlement may ride on
            // the body, when a trailer will say the cost.
            Ending::Served(response, Rider { at_end: None, .. }) => response,
            Ending::Served(
                response,
                Rider {
                    at_end: Some(end), ..
                },
            ) => response.map(|body| body.settle_at_end(end)),
            Ending::Refused(response) => response.map(ResBody::from_rejection),
        }))
    }
}

impl<S, ReqBody, ResBody> Future for ConcurrencyLimitFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(Ok(match ready!(self.project().state.poll_answer(cx))? {
            // The concurrency layer settles no charge: only its lease rides.
            Ending::Served(response, Rider { lease, .. }) => {
                response.map(|body| ResponseBody::service(body, lease))
            }
            Ending::Refused(response) => response.map(ResponseBody::full),
        }))
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
    let (decision, ticket) = C::start(config, &req, key);
    Stage::start(inner, req, decision, config, ticket)
}
