use super::body::ConcurrencyBody;
use super::layer::Config;
use super::limiter::Permit;
use super::service::reject_full;
use crate::Error;
use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tower_service::Service;

type AcquireFuture = Pin<Box<dyn Future<Output = Result<Option<Permit>, Error>> + Send>>;

/// What the layer needs of its configuration, free of the key type.
trait Full: Send + Sync {
    fn reject_full(&self, request: &http::HeaderMap) -> Response<Bytes>;
}

impl<K: Send + Sync> Full for Config<K> {
    fn reject_full(&self, request: &http::HeaderMap) -> Response<Bytes> {
        reject_full(self, request)
    }
}

pin_project! {
    /// Response future of [`ConcurrencyLimit`](super::ConcurrencyLimit).
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
        Acquiring {
            acquire: AcquireFuture,
            inner: Option<S>,
            req: Option<Request<ReqBody>>,
            config: Arc<dyn Full>,
        },
        Calling {
            #[pin]
            fut: S::Future,
            permit: Option<Permit>,
        },
        Done {
            response: Option<Response<Bytes>>,
        },
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

    pub(crate) fn acquiring<K: Send + Sync + 'static>(
        acquire: AcquireFuture,
        inner: S,
        req: Request<ReqBody>,
        config: Arc<Config<K>>,
    ) -> Self {
        Self {
            state: State::Acquiring {
                acquire,
                inner: Some(inner),
                req: Some(req),
                config,
            },
        }
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ConcurrencyBody<ResBody>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        loop {
            match state.as_mut().project() {
                StateProj::Acquiring {
                    acquire,
                    inner,
                    req,
                    config,
                } => {
                    let acquired = ready!(acquire.as_mut().poll(cx));
                    let req = req.take().expect(POLLED_AFTER_DONE);
                    let permit = match acquired {
                        Ok(Some(permit)) => Some(permit),
                        Ok(None) => {
                            let response = config.reject_full(req.headers());
                            state.set(State::Done {
                                response: Some(response),
                            });
                            continue;
                        }
                        Err(e) => {
                            // No store, no slots: serve rather than become the outage.
                            tracing::warn!(error = %e, "floodgate: concurrency limit unavailable; request served without a slot");
                            None
                        }
                    };
                    let mut inner = inner.take().expect(POLLED_AFTER_DONE);
                    state.set(State::Calling {
                        fut: inner.call(req),
                        permit,
                    });
                }
                StateProj::Calling { fut, permit } => {
                    let response = ready!(fut.poll(cx))?;
                    let permit = permit.take();
                    return Poll::Ready(Ok(
                        response.map(|body| ConcurrencyBody::Leased { body, permit })
                    ));
                }
                StateProj::Done { response } => {
                    let response = response.take().expect(POLLED_AFTER_DONE);
                    return Poll::Ready(Ok(response.map(|data| ConcurrencyBody::Full {
                        data: (!data.is_empty()).then_some(data),
                    })));
                }
            }
        }
    }
}
