//! A decision that is either made already or under way.

use crate::Error;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future a decision under way is.
pub(crate) type LaterFuture<T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>;

/// The result of starting a decision: ready at once when the store never
/// waits (or the deny cache answered), else a future that owns what it
/// needs. A future itself; [`now`](Self::now) takes a ready result without
/// polling, which is how the layers serve memory-store decisions without a
/// future of their own.
#[must_use = "a decision under way does nothing unless awaited"]
pub(crate) struct Pending<T> {
    state: State<T>,
}

enum State<T> {
    Ready(Option<Result<T, Error>>),
    Later(LaterFuture<T>),
}

impl<T> Pending<T> {
    pub(crate) fn ready(result: Result<T, Error>) -> Self {
        Self {
            state: State::Ready(Some(result)),
        }
    }

    pub(crate) fn later(future: LaterFuture<T>) -> Self {
        Self {
            state: State::Later(future),
        }
    }

    /// Let the decision finish on its own: at once if it is ready, else on
    /// the current Tokio runtime, without anyone waiting for it (a
    /// settlement after a response, a release on drop). Its error, if any,
    /// is logged with `what`.
    pub(crate) fn detach(self, what: &'static str)
    where
        T: Send + 'static,
    {
        let future = match self.now() {
            Ok(Ok(_)) => return,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "floodgate: {what} failed");
                return;
            }
            Err(pending) => pending,
        };
        let State::Later(future) = future.state else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("floodgate: no Tokio runtime to finish a {what} on; skipped");
            return;
        };
        drop(rt.spawn(async move {
            if let Err(e) = future.await {
                tracing::warn!(error = %e, "floodgate: {what} failed");
            }
        }));
    }

    /// The result, changed by `f`: at once if it is ready.
    pub(crate) fn map<U: 'static>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Pending<U>
    where
        T: 'static,
    {
        match self.state {
            State::Ready(Some(result)) => Pending::ready(result.map(f)),
            // Already taken: stays so.
            State::Ready(None) => Pending {
                state: State::Ready(None),
            },
            State::Later(future) => Pending::later(Box::pin(async move { future.await.map(f) })),
        }
    }

    /// The result if it is ready, else the pending decision back.
    pub(crate) fn now(self) -> Result<Result<T, Error>, Self> {
        match self.state {
            State::Ready(Some(result)) => Ok(result),
            state => Err(Self { state }),
        }
    }
}

impl<T: Unpin> Future for Pending<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().state {
            State::Ready(result) => match result.take() {
                Some(result) => Poll::Ready(result),
                // Polled after it completed: never ready again, as a fused
                // future.
                None => Poll::Pending,
            },
            State::Later(future) => future.as_mut().poll(cx),
        }
    }
}
