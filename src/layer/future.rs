use super::body::RateLimitBody;
use super::rejection::{Reason, Rejection};
use crate::algorithm::Policy;
use crate::headers::{write_headers_at, HeaderStyle, PolicyReport};
use crate::{Decision, Error};
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
pub(crate) type DecisionFuture = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send>>;

/// How the layer answers: what the response future needs, free of the
/// layer's key and algorithm types.
#[derive(Clone)]
pub(crate) struct Answer {
    pub(crate) name: Arc<str>,
    pub(crate) policy: Policy,
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
        match &self.on_rejection {
            Some(f) => f(&rejection),
            None => rejection.default_response(),
        }
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
            admitted: Admitted,
        },
        /// The layer answered by itself.
        Done {
            response: Option<Response<Bytes>>,
        },
    }
}

/// What the headers of an admitted request's response say.
pub(crate) struct Admitted {
    decision: Decision,
    at: SystemTime,
    answer: Arc<Answer>,
}

impl Admitted {
    fn write(&self, headers: &mut HeaderMap) {
        let report = PolicyReport::new(&self.answer.name, self.answer.policy, &self.decision);
        write_headers_at(self.answer.style, &[report], self.at, headers);
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
    ) -> Self {
        Self {
            state: State::Deciding {
                decision,
                inner: Some(inner),
                req: Some(req),
                answer,
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
                } => {
                    let result = ready!(decision.as_mut().poll(cx));
                    let req = req.take().expect(POLLED_AFTER_DONE);
                    let decision = match result {
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
                                let reports =
                                    [PolicyReport::new(&answer.name, answer.policy, &decision)];
                                answer.reject(Reason::Limited { reports: &reports }, req.headers())
                            };
                            state.set(State::Done {
                                response: Some(response),
                            });
                            continue;
                        }
                    }
                    let admitted = Admitted {
                        decision,
                        at: SystemTime::now(),
                        answer: answer.clone(),
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
                            admitted,
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
                        admitted,
                    });
                }
                StateProj::Calling { fut, admitted } => {
                    let mut response = ready!(fut.poll(cx))?;
                    admitted.write(response.headers_mut());
                    return Poll::Ready(Ok(response.map(|body| RateLimitBody::Inner { body })));
                }
                StateProj::Done { response } => {
                    let response = response.take().expect(POLLED_AFTER_DONE);
                    return Poll::Ready(Ok(response.map(RateLimitBody::full)));
                }
            }
        }
    }
}
