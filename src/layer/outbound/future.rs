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
use std::time::{Duration, Instant};
use tower_service::Service;

/// The wait for a booked time: `Limiter::until_ready`, owning what it
/// needs (dropped, it gives the reservation back).
type Booking = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send>>;

/// The read of the key's pause, before a request booked earlier goes.
type PauseCheck = Pin<Box<dyn Future<Output = Result<Option<Duration>, Error>> + Send>>;

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
        // When the request came: its waits add up to at most `max_wait`.
        came: Instant,
        #[pin]
        delivery: Delivery<S, ReqBody>,
    }
}

pin_project! {
    /// Where a request is: waiting for its booked time, making sure the
    /// key was not paused meanwhile, or being sent.
    #[project = DeliveryProj]
    enum Delivery<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        Waiting {
            booking: Booking,
            request: Option<(S, Request<ReqBody>)>,
        },
        Checking {
            check: PauseCheck,
            booked: Decision,
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
        let booking = book(&config, &key, cost, Duration::ZERO, config.max_wait);
        Self {
            config,
            key,
            cost,
            came: Instant::now(),
            delivery: Delivery::Waiting {
                booking,
                request: Some((inner, req)),
            },
        }
    }
}

/// Book `cost` of `key` after `pause`, waiting at most `max_wait` in all.
fn book<A: Algorithm>(
    config: &OutboundConfig<A>,
    key: &str,
    cost: u64,
    pause: Duration,
    max_wait: Duration,
) -> Booking {
    let (limiter, key) = (config.limiter.clone(), key.to_owned());
    Box::pin(async move {
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        limiter.until_ready(&key, cost, max_wait).await
    })
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
                    let booked = match ready!(booking.as_mut().poll(cx)) {
                        Ok(d) => d,
                        Err(e) => return Poll::Ready(Err(OutboundError::Limiter(e))),
                    };
                    if !booked.allowed() {
                        return Poll::Ready(Err(OutboundError::Limited(booked)));
                    }
                    let request = request.take();
                    // A request that waited, or whose limits keep no
                    // schedule a pause could push, reads the pause first.
                    let config = &**this.config;
                    if !booked.delay().is_zero() || !config.limiter.books_ahead() {
                        let (limiter, key) = (config.limiter.clone(), this.key.clone());
                        let pauses = config.pauses.clone();
                        let check: PauseCheck =
                            Box::pin(async move { limiter.paused_for(&pauses, &key).await });
                        this.delivery.set(Delivery::Checking {
                            check,
                            booked,
                            request,
                        });
                        continue;
                    }
                    let (mut inner, req) = request.expect(POLLED_AFTER_DONE);
                    let fut = inner.call(req);
                    this.delivery.set(Delivery::Sending { fut });
                }
                DeliveryProj::Checking {
                    check,
                    booked,
                    request,
                } => {
                    let paused = ready!(check.as_mut().poll(cx)).map_err(OutboundError::Limiter)?;
                    let request = request.take();
                    if let Some(pause) = paused {
                        // Paused since it was booked: its time goes back,
                        // and it books again after the pause, within what
                        // is left of its wait.
                        let config = &**this.config;
                        give_back(config, this.key, *this.cost);
                        let left = config.max_wait.saturating_sub(this.came.elapsed());
                        if pause > left {
                            let wait = pause.max(booked.retry_after().unwrap_or_default());
                            let refused = Decision::over_limit(booked.limit(), 0, wait, wait);
                            return Poll::Ready(Err(OutboundError::Limited(refused)));
                        }
                        let booking = book(
                            config,
                            this.key,
                            *this.cost,
                            pause,
                            left.saturating_sub(pause),
                        );
                        this.delivery.set(Delivery::Waiting { booking, request });
                        continue;
                    }
                    let (mut inner, req) = request.expect(POLLED_AFTER_DONE);
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

/// Give back the charge of a request that will not go at its booked
/// time, in the background.
fn give_back<A: Algorithm>(config: &OutboundConfig<A>, key: &str, cost: u64) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (limiter, key) = (config.limiter.clone(), key.to_owned());
    drop(rt.spawn(async move {
        if let Err(e) = limiter.refund(&key, cost).await {
            tracing::warn!(error = %e, "floodgate: giving back a paused outbound booking failed");
        }
    }));
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
    let (limiter, key, pauses) = (
        config.limiter.clone(),
        key.to_owned(),
        config.pauses.clone(),
    );
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
            // The marker first: requests booked earlier read it before
            // they go. Then the key's schedule, which new bookings see,
            // where its limits keep one.
            if let Err(e) = limiter.pause(&pauses, &key, pause).await {
                tracing::warn!(error = %e, "floodgate: pausing an outbound key failed");
            }
            if limiter.books_ahead() {
                if let Err(e) = limiter.block(&key, pause).await {
                    tracing::warn!(error = %e, "floodgate: pausing an outbound key failed");
                }
            }
        }
    }));
}
