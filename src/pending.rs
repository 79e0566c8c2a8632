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
    state: Progress<T>,
}

/// Flat, so that a ready result is moved out as it was written.
enum Progress<T> {
    Ready(T),
    Failed(Error),
    Later(LaterFuture<T>),
    /// Taken by a poll: never ready again, as a fused future.
    Taken,
}

impl<T> Pending<T> {
    #[inline(always)]
    pub(crate) fn ready(result: Result<T, Error>) -> Self {
        Self {
            state: match result {
                Ok(t) => Progress::Ready(t),
                Err(e) => Progress::Failed(e),
            },
        }
    }

    pub(crate) fn later(future: LaterFuture<T>) -> Self {
        Self {
            state: Progress::Later(future),
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
        let Progress::Later(future) = future.state else {
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
        let state = match self.state {
            Progress::Ready(t) => Progress::Ready(f(t)),
            Progress::Failed(e) => Progress::Failed(e),
            Progress::Later(future) => {
                Progress::Later(Box::pin(async move { future.await.map(f) }))
            }
            Progress::Taken => Progress::Taken,
        };
        Pending { state }
    }

    /// `read` of the result where it lies, if it is ready and a success;
    /// else the pending decision back.
    // Once read, the `Pending` is forgotten rather than dropped: dropping it
    // was a call of its own on every memory-store decision (17 of ~725
    // instructions, callgrind). Forgetting it leaks nothing: it holds
    // `Ready(t)` (matched below) and `T: Copy`, which has no drop glue.
    // (`mem::forget` is never unsound; here it does not even leak.)
    #[inline(always)]
    pub(crate) fn read_ready<U>(self, read: impl FnOnce(&T) -> U) -> Result<U, Self>
    where
        T: Copy,
    {
        match &self.state {
            Progress::Ready(t) => {
                let read = read(t);
                std::mem::forget(self);
                Ok(read)
            }
            _ => Err(self),
        }
    }

    /// The result if it is ready, else the pending decision back.
    #[inline(always)]
    pub(crate) fn now(self) -> Result<Result<T, Error>, Self> {
        match self.state {
            Progress::Ready(t) => Ok(Ok(t)),
            Progress::Failed(e) => Ok(Err(e)),
            state => Err(Self { state }),
        }
    }
}

impl<T: Unpin> Future for Pending<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let state = &mut self.get_mut().state;
        if let Progress::Later(future) = state {
            return future.as_mut().poll(cx);
        }
        match std::mem::replace(state, Progress::Taken) {
            Progress::Ready(t) => Poll::Ready(Ok(t)),
            Progress::Failed(e) => Poll::Ready(Err(e)),
            // Taken already (a `Later` returned above).
            Progress::Later(_) | Progress::Taken => Poll::Pending,
        }
    }
}
