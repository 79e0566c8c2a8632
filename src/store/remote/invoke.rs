//! Calling floodgate's code on Redis: one implementation for one server and
//! for a cluster, over the [`Transport`] that carries a command to where its
//! key lives.
//!
//! A call is an `FCALL` of the library. When the server answers that the
//! function is not found (a fresh server, `FUNCTION FLUSH`, a new floodgate
//! version; the call did not run), this call is sent as `EVAL` of the same
//! code, which works anywhere, and the library is loaded where the key
//! lives in the background, one load at a time: the next calls are
//! `FCALL`s again. Where functions cannot be used at all (no `FCALL` before
//! Redis 7, or an ACL that forbids them), every call is `EVALSHA` of the
//! script form, and on `NOSCRIPT` (the script cache was emptied; the call
//! did not run) `EVAL`, which runs it and caches it. No retry here repeats
//! a call that may have run.

use super::joined::Joiner;
use super::library::{first_key, reform, replies, Function, ScriptCall};
use crate::algorithm::Spec;
use crate::store::{Answer, Backend, Batch, Namespace, StoreError, StoreErrorKind};
use redis::{Cmd, ErrorKind, RedisError, ServerErrorKind, Value};
use smallvec::SmallVec;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// The longest a background load of the library may take.
const LOAD_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest the release undoing an abandoned acquire is waited for (it
/// stays queued on its connection after that).
const UNDO_TIMEOUT: Duration = Duration::from_secs(5);

/// What carries commands to Redis: one server's connections, or a cluster's.
pub(super) trait Transport: Send + Sync + fmt::Debug + 'static {
    /// Send `cmd`, to the node that owns its first key where that matters;
    /// `ordered` calls run in the order they were sent (on one connection).
    fn send(
        &self,
        cmd: &Cmd,
        ordered: bool,
    ) -> impl Future<Output = Result<Value, StoreError>> + Send;
    /// Load the library on the node that owns `key` (any node without one).
    fn load(&self, key: Option<&[u8]>) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Where the calls go, for messages: `redis at host:port`, `the redis
    /// cluster`, `the app's redis pool`.
    fn place(&self) -> String;
}

/// A store on Redis: a transport, and what it learned of the server's
/// functions. Cheap to clone.
pub(super) struct Remote<T> {
    shared: Arc<RemoteShared<T>>,
}

impl<T> Clone for Remote<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

pub(super) struct RemoteShared<T> {
    transport: T,
    /// Functions cannot be used here: every call is a script.
    no_functions: AtomicBool,
    /// A task is loading the library.
    loading: AtomicBool,
    /// Decisions waiting at the same moment, sent as one call.
    joiner: Joiner,
}

impl<T: Transport> Remote<T> {
    /// A store over `transport`, whose calls carry up to `joiner`'s
    /// maximum of decisions each.
    pub(super) fn new(transport: T, joiner: Joiner) -> Self {
        Self {
            shared: Arc::new(RemoteShared {
                transport,
                no_functions: AtomicBool::new(false),
                loading: AtomicBool::new(false),
                joiner,
            }),
        }
    }

    /// The most decisions one call carries.
    pub(super) fn max_per_call(&self) -> usize {
        self.shared.joiner.max()
    }

    /// A handle that does not keep the store alive (the joiner's task).
    pub(super) fn downgrade(&self) -> Weak<RemoteShared<T>> {
        Arc::downgrade(&self.shared)
    }

    /// The store, if it is still there.
    pub(super) fn upgrade(weak: &Weak<RemoteShared<T>>) -> Option<Self> {
        weak.upgrade().map(|shared| Self { shared })
    }

    pub(super) fn transport(&self) -> &T {
        &self.shared.transport
    }

    /// Whether calls are `FCALL`s (until one found that functions cannot
    /// be used here).
    pub(super) fn uses_functions(&self) -> bool {
        !self.shared.no_functions.load(Ordering::Relaxed)
    }

    /// `cmd` (an `FCALL` of `function`), as the module documentation says.
    pub(super) async fn invoke(
        &self,
        function: &'static Function,
        cmd: &Cmd,
    ) -> Result<Value, StoreError> {
        let shared = &*self.shared;
        let ordered = function.ordered;
        if !shared.no_functions.load(Ordering::Relaxed) {
            match shared.transport.send(cmd, ordered).await {
                Err(e) if e.redis().is_some_and(no_function_here) => {
                    shared.no_functions.store(true, Ordering::Relaxed);
                }
                Err(e) if e.redis().is_some_and(function_missing) => {
                    self.load_in_background(cmd);
                    let eval = reform(cmd, "EVAL", &function.source);
                    return shared
                        .transport
                        .send(&eval, ordered)
                        .await
                        .map_err(scripting);
                }
                other => return other,
            }
        }
        let evalsha = reform(cmd, "EVALSHA", function.script.get_hash());
        match shared.transport.send(&evalsha, ordered).await {
            Err(e)
                if e.redis()
                    .is_some_and(|e| e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)) =>
            {
                let eval = reform(cmd, "EVAL", &function.source);
                shared
                    .transport
                    .send(&eval, ordered)
                    .await
                    .map_err(scripting)
            }
            other => other.map_err(scripting),
        }
    }

    /// Load the library where `cmd`'s key lives, in a task of its own, one
    /// load at a time.
    fn load_in_background(&self, cmd: &Cmd) {
        /// Ends the load, also when its task is dropped.
        struct Done<T>(Arc<RemoteShared<T>>);
        impl<T> Drop for Done<T> {
            fn drop(&mut self) {
                self.0.loading.store(false, Ordering::Release);
            }
        }
        let shared = &self.shared;
        if shared.loading.swap(true, Ordering::AcqRel) {
            return;
        }
        let done = Done(shared.clone());
        let key = first_key(cmd);
        let work = async move {
            let shared = &done.0;
            let load = shared.transport.load(key.as_deref());
            match tokio::time::timeout(LOAD_TIMEOUT, load).await {
                Ok(Err(e)) if e.redis().is_some_and(no_function_here) => {
                    shared.no_functions.store(true, Ordering::Relaxed);
                }
                Ok(Err(e)) if e.redis().is_some_and(already_loaded) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "floodgate: loading the function library failed; calls go on as EVAL");
                }
                _ => {}
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn(work)),
            Err(_) => drop(work),
        }
    }
}

impl<T: Transport> Backend for Remote<T> {
    /// Keys are named by their head: nothing to look up.
    fn namespace(&self, head: &str) -> Namespace {
        Namespace {
            id: 0,
            head: head.into(),
        }
    }

    fn place(&self) -> String {
        self.shared.transport.place()
    }

    fn decide(&self, batch: &Batch<'_>) -> Answer {
        // Keys on several slots of a cluster: one call per slot.
        if self.shared.joiner.cluster() {
            if let Some(slots) = super::split::slots(batch) {
                return super::split::decide(self, batch, &slots);
            }
        }
        let ScriptCall {
            function,
            cmd,
            undo,
        } = super::library::command(batch);
        let n = batch.targets.len();
        // Which keys hold a sorted set: to say what a foreign key should hold.
        let zset: SmallVec<[bool; 1]> = batch
            .targets
            .iter()
            .map(|t| matches!(t.spec, Spec::SlidingLog { .. } | Spec::Concurrency { .. }))
            .collect();
        let this = self.clone();
        // Joined with what else waits at this moment, in the order of the
        // calls (a lease's acquire and release are sent on their own).
        let sent = if !function.ordered && self.shared.joiner.enabled() {
            // Only ordered calls (a lease's acquire and release) carry an
            // undo, so a joined call, answered below before the undo is
            // disarmed, leaves nothing to undo.
            debug_assert!(undo.is_none(), "a call with an undo is joined");
            match self.shared.joiner.join(self, cmd, n) {
                Ok(answer) => Sent::Joined(answer),
                Err(cmd) => Sent::Alone(cmd),
            }
        } else {
            Sent::Alone(cmd)
        };
        Answer::Later(Box::pin(async move {
            let mut undo = Undo {
                remote: &this,
                function,
                cmd: undo,
            };
            let (answered, cmd) = match sent {
                Sent::Joined(answer) => match answer.await {
                    Ok(Ok(replies)) => return Ok(replies),
                    Ok(Err((e, cmd))) => (Err(e), cmd),
                    Err(_) => {
                        return Err(StoreError::unavailable(
                            "the store's call ended with its runtime",
                        ))
                    }
                },
                Sent::Alone(cmd) => (this.invoke(function, &cmd).await, cmd),
            };
            // Only a broken connection leaves it unknown whether the call ran.
            if !matches!(&answered, Err(e) if e.is_connection()) {
                undo.cmd = None;
            }
            let v = match answered {
                Err(e) if super::foreign::suspect(&e) => {
                    let keys = super::foreign::keys(&cmd, &zset);
                    return Err(super::foreign::diagnose(this.transport(), &keys, e).await);
                }
                v => v?,
            };
            replies(&v, n)
        }))
    }
}

/// How a decision's call went out: with others (its answer to come), or
/// on its own.
enum Sent {
    Joined(tokio::sync::oneshot::Receiver<super::joined::Answered>),
    Alone(Cmd),
}

/// A lease's acquire given up on (its future dropped: the limiter's timeout
/// passed) or cut off: it may still run when Redis catches up, and would
/// hold its slot until the lease expires. Its release is sent after it, on
/// the same connection, so that it runs after it: in the background, for at
/// most `UNDO_TIMEOUT`.
struct Undo<'a, T: Transport> {
    remote: &'a Remote<T>,
    function: &'static Function,
    cmd: Option<Cmd>,
}

impl<T: Transport> Drop for Undo<'_, T> {
    fn drop(&mut self) {
        let Some(cmd) = self.cmd.take() else {
            return;
        };
        let (remote, function) = (self.remote.clone(), self.function);
        let undo = async move {
            let _ = tokio::time::timeout(UNDO_TIMEOUT, remote.invoke(function, &cmd)).await;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            drop(rt.spawn(undo));
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Remote<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.shared.transport.fmt(f)
    }
}

/// The answer to loading a library that another call loaded first.
fn already_loaded(e: &RedisError) -> bool {
    e.detail().is_some_and(|d| d.contains("already exists"))
}

/// `FCALL` of a function the server does not have.
fn function_missing(e: &RedisError) -> bool {
    e.code() == Some("ERR")
        && e.detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// A script that cannot run because the server runs no scripts at all
/// (`unknown command` for `EVALSHA` and `EVAL`: Lua left out, or renamed
/// away) is [`StoreErrorKind::Scripting`].
fn scripting(e: StoreError) -> StoreError {
    let unknown = e.redis().is_some_and(|r| {
        r.code() == Some("ERR") && r.detail().is_some_and(|d| d.starts_with("unknown command"))
    });
    if unknown {
        let why = "the server runs neither functions nor Lua scripts (FCALL, EVALSHA, EVAL)";
        StoreError::new(StoreErrorKind::Scripting, why)
    } else {
        e
    }
}

/// Functions cannot be used here: no `FCALL` (before Redis 7), or `FCALL`
/// or `FUNCTION LOAD` not allowed to this user (ACL). Scripts may still be.
fn no_function_here(e: &RedisError) -> bool {
    let unknown =
        e.code() == Some("ERR") && e.detail().is_some_and(|d| d.starts_with("unknown command"));
    // "NOPERM User u has no permissions to run the 'fcall' command"; a key
    // outside the user's patterns is another NOPERM, which scripts meet too.
    let forbidden = e.code() == Some("NOPERM")
        && e.detail()
            .is_some_and(|d| d.contains("'fcall'") || d.contains("'function"));
    unknown || forbidden
}
