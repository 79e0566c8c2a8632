use super::body::RateLimitBody;
use super::rejection::{Reason, Rejection};
use super::settle::{RateLimited, Settle};
use crate::algorithm::Policy;
use crate::headers::{write_with_policy, HeaderStyle, PolicyReport, ResetUnit};
use crate::{Decision, Decisions, Error};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, SystemTime};
use tower_service::Service;

pub(crate) type OnRejection = Arc<dyn Fn(&Rejection<'_>) -> Response<Bytes> + Send + Sync>;

/// The decision in flight, and what to do with the charge afterwards.
/// Boxed: it wraps the store's I/O future (redis-rs boxes its own), and
/// this keeps the layer's types nameable.
pub(crate) type DecisionFuture =
    Pin<Box<dyn Future<Output = (Result<Verdict, Error>, Option<Settle>)> + Send>>;

/// What the limiter decided for a request.
pub(crate) enum Verdict {
    /// The decision of the limiter's only policy (see [`Answer::single`]).
    One(Decision),
    /// Each policy's decision; `own` when under the limiter's own quota.
    All { decisions: Decisions, own: bool },
}

impl Verdict {
    fn combined(&self) -> Decision {
        match self {
            Verdict::One(d) => *d,
            Verdict::All { decisions, .. } => decisions.combined,
        }
    }

    /// `f` of the reports of each policy's decision.
    fn with_reports<R>(&self, answer: &Answer, f: impl FnOnce(&[PolicyReport<'_>]) -> R) -> R {
        match self {
            Verdict::One(d) => {
                let (name, policy) = answer
                    .single
                    .as_ref()
                    .expect("only a one-policy limiter decides a Verdict::One");
                f(&[PolicyReport::new(name, *policy, d)])
            }
            Verdict::All { decisions, .. } => {
                let reports: Vec<_> = decisions
                    .each
                    .iter()
                    .map(|p| PolicyReport::new(&p.name, p.policy, &p.decision))
                    .collect();
                f(&reports)
            }
        }
    }

    /// Whether the reports are the limiter's own policies, whose
    /// `RateLimit-Policy` the layer built once.
    fn own(&self) -> bool {
        match self {
            Verdict::One(_) => true,
            Verdict::All { own, .. } => *own,
        }
    }
}

/// How the layer answers: what the response future needs, free of the
/// layer's key and algorithm types.
#[derive(Clone)]
pub(crate) struct Answer {
    pub(crate) name: Arc<str>,
    pub(crate) style: HeaderStyle,
    pub(crate) on_rejection: Option<OnRejection>,
    pub(crate) shadow: bool,
    /// The limiter's policy, when it has exactly one: name and quota.
    pub(crate) single: Option<(Arc<str>, Policy)>,
    /// `RateLimit-Policy` for the limiter's own policies: it only changes
    /// with the quota, so it is built once.
    pub(crate) policy_field: Option<HeaderValue>,
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
        /// Waiting for the store's decision. What waits is boxed (as in
        /// `Delaying`): the state the memory store's requests go through,
        /// `Calling`, stays small to move.
        Deciding {
            decision: DecisionFuture,
            waiting: Option<Box<(S, Request<ReqBody>)>>,
            answer: Arc<Answer>,
        },
        /// Admitted by the leaky bucket, waiting for its place in the queue.
        Delaying {
            sleep: Pin<Box<tokio::time::Sleep>>,
            waiting: Option<Box<(S, Request<ReqBody>, Admitted)>>,
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

impl<S, ReqBody> State<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn delaying(delay: Duration, inner: S, req: Request<ReqBody>, admitted: Admitted) -> Self {
        State::Delaying {
            sleep: Box::pin(tokio::time::sleep(delay)),
            waiting: Some(Box::new((inner, req, admitted))),
        }
    }
}

/// An admitted request: what its response's headers say, and what to do
/// with its charge once the status is known.
pub(crate) struct Admitted {
    verdict: Verdict,
    /// When it was decided, for epoch resets only (a clock read saved
    /// otherwise).
    at: Option<SystemTime>,
    answer: Arc<Answer>,
    settle: Option<Settle>,
}

impl Admitted {
    fn finish(self, parts: &mut http::response::Parts) {
        let answer = &*self.answer;
        let policy = answer.policy_field.as_ref().filter(|_| self.verdict.own());
        let at = self.at.unwrap_or(SystemTime::UNIX_EPOCH);
        self.verdict.with_reports(answer, |reports| {
            write_with_policy(answer.style, reports, at, &mut parts.headers, policy);
        });
        if let Some(settle) = self.settle {
            settle.run(
                parts.status,
                parts.extensions.get::<RateLimited>().is_some(),
            );
        }
    }
}

/// What a decision leads to.
pub(crate) enum Next {
    /// The layer answers by itself.
    Reject(Response<Bytes>),
    /// The inner service is called now.
    Call(Admitted),
    /// The inner service is called after the leaky bucket's delay.
    Delay(Duration, Admitted),
}

impl Next {
    /// `headers` are the request's (the request itself stays where it is:
    /// it is large to move).
    pub(crate) fn of(
        result: Result<Verdict, Error>,
        settle: Option<Settle>,
        answer: &Arc<Answer>,
        headers: &HeaderMap,
    ) -> Self {
        let verdict = match result {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, limiter = %answer.name, "rate-limit decision failed; answering 503");
                let reason = Reason::Unavailable { retry_after: None };
                return Next::Reject(answer.reject(reason, headers));
            }
        };
        let decision = verdict.combined();
        if !decision.allowed {
            if answer.shadow {
                tracing::info!(limiter = %answer.name, "shadow mode: request over the limit served anyway");
            } else {
                return Next::Reject(if decision.degraded {
                    let reason = Reason::Unavailable {
                        retry_after: decision.retry_after,
                    };
                    answer.reject(reason, headers)
                } else {
                    verdict.with_reports(answer, |reports| {
                        answer.reject(Reason::Limited { reports }, headers)
                    })
                });
            }
        }
        let epoch = matches!(
            answer.style,
            HeaderStyle::Legacy {
                reset: ResetUnit::EpochSeconds
            }
        );
        let admitted = Admitted {
            verdict,
            at: epoch.then(SystemTime::now),
            answer: answer.clone(),
            // Shadow mode charged nothing to give back for a denial.
            settle: settle.filter(|_| decision.allowed),
        };
        if decision.allowed && !decision.delay.is_zero() {
            Next::Delay(decision.delay, admitted)
        } else {
            Next::Call(admitted)
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

    pub(crate) fn calling(fut: S::Future, admitted: Admitted) -> Self {
        Self {
            state: State::Calling {
                fut,
                admitted: Some(admitted),
            },
        }
    }

    pub(crate) fn delaying(
        delay: Duration,
        inner: S,
        req: Request<ReqBody>,
        admitted: Admitted,
    ) -> Self {
        Self {
            state: State::delaying(delay, inner, req, admitted),
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
                waiting: Some(Box::new((inner, req))),
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
                    waiting,
                    answer,
                } => {
                    let (result, settle) = ready!(decision.as_mut().poll(cx));
                    let (inner, req) = *waiting.take().expect(POLLED_AFTER_DONE);
                    let next = match Next::of(result, settle, answer, req.headers()) {
                        Next::Reject(response) => State::Done {
                            response: Some(response),
                        },
                        Next::Call(admitted) => {
                            let mut inner = inner;
                            State::Calling {
                                fut: inner.call(req),
                                admitted: Some(admitted),
                            }
                        }
                        Next::Delay(delay, admitted) => {
                            State::delaying(delay, inner, req, admitted)
                        }
                    };
                    state.set(next);
                }
                StateProj::Delaying { sleep, waiting } => {
                    ready!(sleep.as_mut().poll(cx));
                    let (mut inner, req, admitted) = *waiting.take().expect(POLLED_AFTER_DONE);
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
