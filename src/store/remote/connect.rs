//! The one connect machinery of the Redis stores: a few shared, multiplexed
//! connections ([`Links`]) made by a [`Connector`] (one server over TCP or
//! TLS, the primary the sentinels name, a cluster), used round-robin. Made
//! lazily in the background, one attempt per slot at a time; after a failed
//! attempt, calls fail at once for 100 ms. Replaced when broken, stalled
//! (every call given up for 2 s), or `READONLY` (a demoted primary).

mod guards;

use self::guards::{Attempt, Watch};
use super::invoke::Transport;
use super::NO_RUNTIME;
use crate::store::StoreError;
use redis::{Cmd, RedisError, Value};
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// After a failed connection attempt, calls that need that connection fail at
/// once for this long instead of trying again: no storm of reconnects against
/// a Redis that is down.
const RECONNECT_INTERVAL: Duration = Duration::from_millis(100);

/// A connection on which every call has been given up (timed out) for this
/// long, with no answer in between, is replaced.
const STALL_LIMIT_MS: u64 = 2_000;

/// Makes connections: to one server, to the primary the sentinels name,
/// or to a cluster.
pub(super) trait Connector: Send + Sync + fmt::Debug + 'static {
    /// One connection, shared by concurrent calls (multiplexed).
    type Conn: Clone + Send + Sync + 'static;
    /// A connection that breaks is replaced only when it is at least this
    /// old: a connection to many nodes, one of them down, breaks on every
    /// call to that node, and is not remade for each.
    const MIN_LIFETIME: Duration = Duration::ZERO;
    /// Make a connection (bounded by the caller).
    fn connect(&self) -> impl Future<Output = Result<Self::Conn, StoreError>> + Send;
    /// The error for a connection attempt that did not finish within
    /// `within`: that the store is unavailable, unless the connector can
    /// tell more.
    fn no_connection(&self, within: Duration) -> impl Future<Output = StoreError> + Send {
        let e = StoreError::unavailable(format!(
            "no connection to {self:?} within {within:?}: is it running and reachable?"
        ));
        async move { e }
    }
    /// Send `cmd` on `conn`.
    fn send(
        conn: &mut Self::Conn,
        cmd: &Cmd,
    ) -> impl Future<Output = Result<Value, RedisError>> + Send;
    /// Load floodgate's library where `key` lives (anywhere without one).
    fn load(
        conn: &mut Self::Conn,
        key: Option<&[u8]>,
    ) -> impl Future<Output = Result<Value, RedisError>> + Send;
}

/// A few shared connections made by one connector. Cheap to clone.
pub(super) struct Links<C: Connector> {
    shared: Arc<LinksShared<C>>,
}

impl<C: Connector> Clone for Links<C> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

struct LinksShared<C: Connector> {
    connector: Arc<C>,
    slots: Box<[LinkSlot<C::Conn>]>,
    next: AtomicUsize,
    connect_timeout: Duration,
    epoch: Instant,
}

struct LinkSlot<T> {
    state: Mutex<LinkSlotState<T>>,
    /// Wakes callers waiting for a connection attempt to end.
    notify: Notify,
    /// `LinksShared::now_ms` of the first call given up on since the last answer
    /// on this slot's connection; 0 while it answers.
    stalled_since: AtomicU64,
}

struct LinkSlotState<T> {
    live: Option<(T, u64)>,
    /// A background task is making this slot's connection.
    connecting: bool,
    /// When the last attempt failed, and why.
    failed: Option<(Instant, StoreError)>,
    /// When the live connection was made.
    installed: Option<Instant>,
    generation: u64,
}

impl<T> Default for LinkSlotState<T> {
    fn default() -> Self {
        Self {
            live: None,
            connecting: false,
            failed: None,
            installed: None,
            generation: 0,
        }
    }
}

impl<C: Connector> Links<C> {
    pub(super) fn new(connector: C, n: usize, connect_timeout: Duration) -> Self {
        Self::shared(Arc::new(connector), n, connect_timeout)
    }

    fn shared(connector: Arc<C>, n: usize, connect_timeout: Duration) -> Self {
        let slots = (0..n.max(1))
            .map(|_| LinkSlot {
                state: Mutex::new(LinkSlotState::default()),
                notify: Notify::new(),
                stalled_since: AtomicU64::new(0),
            })
            .collect();
        Self {
            shared: Arc::new(LinksShared {
                connector,
                slots,
                next: AtomicUsize::new(0),
                connect_timeout,
                epoch: Instant::now(),
            }),
        }
    }

    /// The same connector with other settings, and connections of its own.
    pub(super) fn with(&self, n: usize, connect_timeout: Duration) -> Self {
        Self::shared(self.shared.connector.clone(), n, connect_timeout)
    }

    pub(super) fn connector(&self) -> &C {
        &self.shared.connector
    }

    /// A connection, as a call gets one (made now if need be).
    pub(super) async fn get(&self) -> Result<C::Conn, StoreError> {
        let shared = &self.shared;
        LinksShared::connection(shared, shared.pick(), false)
            .await
            .map(|(conn, _, _)| conn)
    }

    pub(super) fn count(&self) -> usize {
        self.shared.slots.len()
    }

    pub(super) fn connect_timeout(&self) -> Duration {
        self.shared.connect_timeout
    }
}

impl<C: Connector> Transport for Links<C> {
    /// `cmd` on a shared connection (`ordered`: always the first one). A
    /// connection found broken (reset, closed, killed) is replaced, and the
    /// call repeated once on its replacement: if Redis had run it before the
    /// connection broke, the request is charged twice (strict, never loose).
    /// A connection that answers `READONLY` (to a primary since demoted;
    /// the call did not run) is replaced too, and the call repeated once.
    async fn send(&self, cmd: &Cmd, ordered: bool) -> Result<Value, StoreError> {
        let shared = &self.shared;
        let mut i = if ordered { 0 } else { shared.pick() };
        let mut retried = false;
        loop {
            let (mut conn, slot, generation) =
                LinksShared::connection(shared, i, retried || ordered).await?;
            let watch = Watch {
                shared,
                slot,
                generation,
                answered: false,
            };
            let result = C::send(&mut conn, cmd)
                .await
                .and_then(super::library::top_error);
            watch.answered();
            match result {
                Err(e) if replace(&e) && shared.old_enough(slot) && !retried => {
                    shared.detach(slot, generation);
                    retried = true;
                    i = slot;
                }
                Err(e) => {
                    if replace(&e) && shared.old_enough(slot) {
                        shared.detach(slot, generation);
                    }
                    return Err(e.into());
                }
                Ok(v) => return Ok(v),
            }
        }
    }

    async fn load(&self, key: Option<&[u8]>) -> Result<(), StoreError> {
        let mut conn = self.get().await?;
        C::load(&mut conn, key).await?;
        Ok(())
    }

    fn place(&self) -> String {
        format!("{:?}", self.shared.connector)
    }
}

impl<C: Connector> LinksShared<C> {
    fn pick(&self) -> usize {
        match self.slots.len() {
            1 => 0,
            n => self.next.fetch_add(1, Ordering::Relaxed) % n,
        }
    }

    fn now_ms(&self) -> u64 {
        crate::clock::millis(self.epoch.elapsed()) + 1
    }

    /// A connection for a call that picked slot `i`: slot `i`'s, or while
    /// that one is being made (or could not be), any other live one; `fresh`
    /// (a repeat after a broken connection) insists on slot `i`'s next one.
    /// Returns the connection, the slot it belongs to, and its generation.
    async fn connection(
        this: &Arc<Self>,
        i: usize,
        fresh: bool,
    ) -> Result<(C::Conn, usize, u64), StoreError> {
        let slot = &this.slots[i];
        if let Some((conn, generation)) = &lock(&slot.state).live {
            return Ok((conn.clone(), i, *generation));
        }
        loop {
            // Registered before looking, so the end of an attempt is not missed.
            let notified = slot.notify.notified();
            let failed = {
                let mut st = lock(&slot.state);
                if let Some((conn, generation)) = &st.live {
                    return Ok((conn.clone(), i, *generation));
                }
                let mut failed = None;
                if !st.connecting {
                    match &st.failed {
                        Some((at, why)) if at.elapsed() < RECONNECT_INTERVAL => {
                            failed = Some(why.clone());
                        }
                        _ => match tokio::runtime::Handle::try_current() {
                            Ok(rt) => {
                                st.connecting = true;
                                drop(rt.spawn(Self::connect(this.clone(), i)));
                            }
                            Err(_) => {
                                failed = Some(StoreError::unavailable(NO_RUNTIME));
                            }
                        },
                    }
                }
                failed
            };
            if !fresh {
                if let Some(other) = this.any_live(i) {
                    return Ok(other);
                }
            }
            if let Some(why) = failed {
                return Err(why);
            }
            notified.await;
        }
    }

    /// Another slot's live connection, if any.
    fn any_live(&self, but: usize) -> Option<(C::Conn, usize, u64)> {
        let n = self.slots.len();
        (1..n).map(|k| (but + k) % n).find_map(|j| {
            let st = lock(&self.slots[j].state);
            st.live.as_ref().map(|(c, g)| (c.clone(), j, *g))
        })
    }

    /// Make slot `i`'s connection (one attempt, bounded), then wake whoever
    /// waits for it.
    async fn connect(this: Arc<Self>, i: usize) {
        let mut attempt = Attempt {
            shared: &this,
            slot: i,
            result: Some(Err(StoreError::unavailable("connection attempt abandoned"))),
        };
        let connect = this.connector.connect();
        let result = match tokio::time::timeout(this.connect_timeout, connect).await {
            Ok(result) => result,
            Err(_) => Err(this.connector.no_connection(this.connect_timeout).await),
        };
        attempt.result = Some(result);
    }

    fn install(&self, i: usize, result: Result<C::Conn, StoreError>) {
        let slot = &self.slots[i];
        let mut st = lock(&slot.state);
        st.connecting = false;
        match result {
            Ok(conn) => {
                st.generation += 1;
                st.live = Some((conn, st.generation));
                st.installed = Some(Instant::now());
                st.failed = None;
                slot.stalled_since.store(0, Ordering::Relaxed);
            }
            Err(why) => st.failed = Some((Instant::now(), why)),
        }
        drop(st);
        slot.notify.notify_waiters();
    }

    /// Whether slot `i`'s connection has lived long enough to be replaced
    /// ([`Connector::MIN_LIFETIME`]).
    fn old_enough(&self, i: usize) -> bool {
        let st = lock(&self.slots[i].state);
        st.installed
            .is_none_or(|at| at.elapsed() >= C::MIN_LIFETIME)
    }

    /// Drop slot `i`'s connection if it is still `generation`: the next
    /// call makes a new one.
    fn detach(&self, i: usize, generation: u64) {
        let mut st = lock(&self.slots[i].state);
        if st.live.as_ref().is_some_and(|(_, g)| *g == generation) {
            st.live = None;
        }
    }
}

/// The connection cannot be used again: it broke, or its server is a
/// replica now (`READONLY`: a primary that a failover demoted).
fn replace(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_unrecoverable_error() || e.code() == Some("READONLY")
}

/// A poisoned slot only means a thread panicked while holding it; the state
/// is still consistent.
fn lock<T>(m: &Mutex<LinkSlotState<T>>) -> MutexGuard<'_, LinkSlotState<T>> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<C: Connector> fmt::Debug for Links<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        let connected = s
            .slots
            .iter()
            .filter(|x| lock(&x.state).live.is_some())
            .count();
        f.debug_struct("Connections")
            .field("to", &s.connector)
            .field("connections", &s.slots.len())
            .field("connected", &connected)
            .field("connect_timeout", &s.connect_timeout)
            .finish()
    }
}
