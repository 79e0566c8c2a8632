use super::body::RateLimitBody;
use super::rejection::{Reason, Rejection};
use super::settle::{RateLimited, Settle};
use crate::headers::{write_headers_at, HeaderStyle, PolicyReport};
use crate::{Decisions, Error};
use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::SystemTime;
use tower_service::Service;

pub(crate) type OnRejection = Arc<dyn Fn(&Rejection<'_>) -> Response<Bytes> + Send + Sync>;

/// The decision in flight. Boxed: it wraps the store's I/O future (redis-rs
/// boxes its own), and this keeps the layer's types nameable.
pub(crate) type DecisionFuture = Pin<Box<dyn Future<Output = Result<Decisions, Error>> + Send>>;

/// How the layer answers: what the response future needs, free of the
/// layer's key and algorithm types.
#[derive(Clone)]
pub(crate) struct Answer {
    pub(crate) name: Arc<str>,
    pub(crate) style: HeaderStyle,
    pub(crate) on_rejection: Option<OnRejection>,
    pub(crate) shadow: bool,
}

impl Answer {
    pub(crate) fn reject(&self, reason: Reason<'_>, request: &HeaderMap) -> Response<Bytes> {
        let rejection = Rejection {
            reason,
            grpc: is_grpc(request),
            style: self.style,
            now: SystemTime::now(),
        };
        let mut response = match &self.on_rejection {
            Some(f) => f(&rejection),
            None => rejection.default_response(),
        };
        if let Reason::Limited { .. } = reason {
            response.extensions_mut().insert(RateLimited);
        }
        response
    }

    fn reports<'a>(decisions: &'a Decisions) -> Vec<PolicyReport<'a>> {
        decisions
            .each
            .iter()
            .map(|p| PolicyReport::new(&p.name, p.policy, &p.decision))
            .collect()
    }
}

fn is_grpc(headers: &HeaderMap) -> bool {
    #[cfg(feature = "grpc")]
    return crate::response::is_grpc(headers);
    #[cfg(not(feature = "grpc"))]
    {
        let _ = headers;
        false
    }
}

pin_project! {
    /// Response future of [`RateLimit`](super::RateLimit).
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, ReqBody>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        /// Waiting for the store's decision.
        Deciding {
            decision: DecisionFuture,
            inner: Option<S>,
            req: Option<Request<ReqBody>>,
            answer: Arc<Answer>,
            settle: Option<Settle>,
        },
        /// Admitted by the leaky bucket, waiting for its place in the queue.
        Delaying {
            #[pin]
            sleep: tokio::time::Sleep,
            inner: Option<S>,
            req: Option<Request<ReqBody>>,
            admitted: Option<Admitted>,
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

/// An admitted request: what its response's headers say, and what to do
/// with its charge once the status is known.
pub(crate) struct Admitted {
    decisions: Decisions,
    at: SystemTime,
    answer: Arc<Answer>,
    settle: Option<Settle>,
}

impl Admitted {
    fn finish(self, parts: &mut http::response::Parts) {
        write_headers_at(
            self.answer.style,
            &Answer::reports(&self.decisions),
            self.at,
            &mut parts.headers,
        );
        if let Some(settle) = self.settle {
            settle(
                parts.status,
                parts.extensions.get::<RateLimited>().is_some(),
            );
        }
    }
}

const POLLED_AFTER_DONE: &str = "ResponseFuture polled after completion";

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn done(response: Response<Bytes>) -> Self {
        Self {
            state: State::Done {
                response: Some(response),
            },
        }
    }

    pub(crate) fn deciding(
        decision: DecisionFuture,
        inner: S,
        req: Request<ReqBody>,
        answer: Arc<Answer>,
        settle: Option<Settle>,
    ) -> Self {
        Self {
            state: State::Deciding {
                decision,
                inner: Some(inner),
                req: Some(req),
                answer,
                settle,
            },
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<RateLimitBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Deciding {
                    decision,
                    inner,
                    req,
                    answer,
                    settle,
                } => {
                    let result = ready!(decision.as_mut().poll(cx));
                    let req = req.take().expect(POLLED_AFTER_DONE);
                    let decisions = match result {
                        Ok(d) => d,
                        Err(e) => {
                            tracing::warn!(error = %e, limiter = %answer.name, "rate-limit decision failed; answering 503");
                            let response = answer
                                .reject(Reason::Unavailable { retry_after: None }, req.headers());
                            state.set(State::Done {
                                response: Some(response),
                            });
                            continue;
                        }
                    };
                    let decision = decisions.combined;
                    if !decision.allowed {
                        if answer.shadow {
                            tracing::info!(limiter = %answer.name, "shadow mode: request over the limit served anyway");
                        } else {
                            let response = if decision.degraded {
                                let reason = Reason::Unavailable {
                                    retry_after: decision.retry_after,
                                };
                                answer.reject(reason, req.headers())
                            } else {
                                let reports = Answer::reports(&decisions);
                                answer.reject(Reason::Limited { reports: &reports }, req.headers())
                            };
                            state.set(State::Done {
                                response: Some(response),
                            });
                            continue;
                        }
                    }
                    let admitted = Admitted {
                        decisions,
                        at: SystemTime::now(),
                        answer: answer.clone(),
                        // Shadow mode charged nothing to give back for a denial.
                        settle: if decision.allowed {
                            settle.take()
                        } else {
                            None
                        },
                    };
                    let inner = inner.take().expect(POLLED_AFTER_DONE);
                    if decision.allowed && !decision.delay.is_zero() {
                        state.set(State::Delaying {
                            sleep: tokio::time::sleep(decision.delay),
                            inner: Some(inner),
                            req: Some(req),
                            admitted: Some(admitted),
                        });
                    } else {
                        let mut inner = inner;
                        state.set(State::Calling {
                            fut: inner.call(req),
                            admitted: Some(admitted),
                        });
                    }
                }
                StateProj::Delaying {
                    sleep,
                    inner,
                    req,
                    admitted,
                } => {
                    ready!(sleep.poll(cx));
                    let mut inner = inner.take().expect(POLLED_AFTER_DONE);
                    let req = req.take().expect(POLLED_AFTER_DONE);
                    let admitted = admitted.take().expect(POLLED_AFTER_DONE);
                    state.set(State::Calling {
                        fut: inner.call(req),
                        admitted: Some(admitted),
                    });
                }
                StateProj::Calling { fut, admitted } => {
                    let response = ready!(fut.poll(cx))?;
                    let (mut parts, body) = response.into_parts();
                    admitted.take().expect(POLLED_AFTER_DONE).finish(&mut parts);
                    return Poll::Ready(Ok(Response::from_parts(
                        parts,
                        RateLimitBody::Inner { body },
                    )));
                }
                StateProj::Done { response } => {
                    let response = response.take().expect(POLLED_AFTER_DONE);
                    return Poll::Ready(Ok(response.map(RateLimitBody::full)));
                }
            }
        }
    }
}
