use super::error::OutboundError;
use super::layer::OutboundConfig;
use super::pause::pause;
use crate::algorithm::Algorithm;
use crate::{Decision, Error};
use http::{Request, Response};
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tower_service::Service;

/// The wait for a booked time: `Limiter::until_ready`, owning what it
/// needs (dropped, it gives the reservation back).
type Booking = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send>>;

pin_project! {
    /// Response future of [`OutboundLimit`](super::OutboundLimit): waits
    /// for the request's booked time, then sends it; dropped while it
    /// waits, it gives its reservation back.
    pub struct OutboundFuture<S, ReqBody, A>
    where
        S: Service<Request<ReqBody>>,
    {
        config: Arc<OutboundConfig<A>>,
        key: String,
        cost: u64,
        #[pin]
        delivery: Delivery<S, ReqBody>,
    }
}

pin_project! {
    /// Where a request is: waiting for its booked time, or being sent.
    #[project = DeliveryProj]
    enum Delivery<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Waiting {
            booking: Booking,
            request: Option<(S, Request<ReqBody>)>,
        },
        Sending {
            #[pin]
            fut: S::Future,
        },
    }
}

impl<S, ReqBody, A> OutboundFuture<S, ReqBody, A>
where
    S: Service<Request<ReqBody>>,
    A: Algorithm,
{
    pub(crate) fn new(
        config: Arc<OutboundConfig<A>>,
        key: String,
        cost: u64,
        inner: S,
        req: Request<ReqBody>,
    ) -> Self {
        let (limiter, k, max_wait) = (config.limiter.clone(), key.clone(), config.max_wait);
        let booking: Booking =
            Box::pin(async move { limiter.until_ready(&k, cost, max_wait).await });
        Self {
            config,
            key,
            cost,
            delivery: Delivery::Waiting {
                booking,
                request: Some((inner, req)),
            },
        }
    }
}

const POLLED_AFTER_DONE: &str = "an outbound limit's future polled after completion";

impl<S, ReqBody, ResBody, A> Future for OutboundFuture<S, ReqBody, A>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    A: Algorithm,
{
    type Output = Result<Response<ResBody>, OutboundError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.delivery.as_mut().project() {
                DeliveryProj::Waiting { booking, request } => {
                    let decision = match ready!(booking.as_mut().poll(cx)) {
                        Ok(d) => d,
                        Err(e) => return Poll::Ready(Err(OutboundError::Limiter(e))),
                    };
                    if !decision.allowed() {
                        return Poll::Ready(Err(OutboundError::Limited(decision)));
                    }
                    let (mut inner, req) = request.take().expect(POLLED_AFTER_DONE);
                    let fut = inner.call(req);
                    this.delivery.set(Delivery::Sending { fut });
                }
                DeliveryProj::Sending { fut } => {
                    let response = ready!(fut.poll(cx)).map_err(OutboundError::Inner)?;
                    after(this.config, this.key, *this.cost, &response);
                    return Poll::Ready(Ok(response));
                }
            }
        }
    }
}

/// What the partner's answer changes, in the background: a pause for
/// every worker, and the cost it says the request used.
fn after<A: Algorithm, B>(
    config: &OutboundConfig<A>,
    key: &str,
    cost: u64,
    response: &Response<B>,
) {
    let pause = pause(response.status(), response.headers()).filter(|_| config.obey);
    let actual = config
        .actual_cost
        .as_ref()
        .and_then(|a| a.read(response.headers(), response.extensions()))
        .filter(|actual| *actual != cost);
    if pause.is_none() && actual.is_none() {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            "floodgate: no Tokio runtime to pause or settle an outbound key on; skipped"
        );
        return;
    };
    let (limiter, key) = (config.limiter.clone(), key.to_owned());
    drop(rt.spawn(async move {
        if let Some(actual) = actual {
            if let Err(e) = limiter.settle(&key, cost, actual).await {
                tracing::warn!(error = %e, "floodgate: settling an outbound cost failed");
            }
        }
        if let Some(pause) = pause {
            tracing::info!(
                key,
                ?pause,
                "floodgate: the partner asked to pause; pausing the key for every worker"
            );
            if let Err(e) = limiter.block(&key, pause).await {
                tracing::warn!(error = %e, "floodgate: pausing an outbound key failed");
            }
        }
    }));
}
