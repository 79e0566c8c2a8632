//! The connections of a [`RedisStore`](super::RedisStore): a few
//! multiplexed connections shared round-robin by all calls.
//!
//! A multiplexed connection pipelines concurrent calls by itself, so a
//! decision costs exactly one round trip: no checkout, no `PING` to recycle
//! a connection. Connections are made lazily, in the background, one
//! attempt per slot at a time and at most one every 100 ms; a connection
//! that breaks is dropped and replaced, and one on which every call has
//! been given up for 2 s (a peer that vanished without closing it) too.

use super::invoke::Transport;
use super::library::load_library;
use super::NO_RUNTIME;
use crate::store::StoreError;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, RedisError, Value};
use std::fmt;
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

/// The connections to one Redis server. Cheap to clone.
#[derive(Clone)]
pub(super) struct Connections {
    shared: Arc<Shared>,
}

struct Shared {
    client: Client,
    slots: Box<[Slot]>,
    next: AtomicUsize,
    connect_timeout: Duration,
    epoch: Instant,
}

struct Slot {
    state: Mutex<SlotState>,
    /// Wakes callers waiting for a connection attempt to end.
    notify: Notify,
    /// `Shared::now_ms` of the first call given up on since the last answer
    /// on this slot's connection; 0 while it answers.
    stalled_since: AtomicU64,
}

#[derive(Default)]
struct SlotState {
    live: Option<(MultiplexedConnection, u64)>,
    /// A background task is making this slot's connection.
    connecting: bool,
    /// When the last attempt failed, and why.
    failed: Option<(Instant, String)>,
    generation: u64,
}

impl Connections {
    pub(super) fn new(client: Client, n: usize, connect_timeout: Duration) -> Self {
        let slots = (0..n.max(1))
            .map(|_| Slot {
                state: Mutex::new(SlotState::default()),
                notify: Notify::new(),
                stalled_since: AtomicU64::new(0),
            })
            .collect();
        Self {
            shared: Arc::new(Shared {
                client,
                slots,
                next: AtomicUsize::new(0),
                connect_timeout,
                epoch: Instant::now(),
            }),
        }
    }

    /// The same server with other settings, and connections of its own.
    pub(super) fn with(&self, n: usize, connect_timeout: Duration) -> Self {
        Self::new(self.shared.client.clone(), n, connect_timeout)
    }

    pub(super) fn count(&self) -> usize {
        self.shared.slots.len()
    }

    pub(super) fn connect_timeout(&self) -> Duration {
        self.shared.connect_timeout
    }
}

impl Transport for Connections {
    /// `cmd` on a shared connection (`ordered`: always the first one). A
    /// connection found broken (reset, closed, killed) is replaced, and the
    /// call repeated once on its replacement: if Redis had run it before the
    /// connection broke, the request is charged twice (strict, never loose).
    async fn send(&self, cmd: &Cmd, ordered: bool) -> Result<Value, StoreError> {
        let shared = &self.shared;
        let mut i = if ordered { 0 } else { shared.pick() };
        let mut retried = false;
        loop {
            let (mut conn, slot, generation) = Shared::connection(shared, i, retried || ordered)
                .await
                .map_err(StoreError::Unavailable)?;
            let watch = Watch {
                shared,
                slot,
                generation,
                answered: false,
            };
            let result = conn
                .send_packed_command(cmd)
                .await
                .and_then(Value::extract_error);
            watch.answered();
            match result {
                Err(e) if broken(&e) && !retried => {
                    shared.detach(slot, generation);
                    retried = true;
                    i = slot;
                }
                Err(e) => {
                    if broken(&e) {
                        shared.detach(slot, generation);
                    }
                    return Err(e.into());
                }
                Ok(v) => return Ok(v),
            }
        }
    }

    async fn load(&self, _key: Option<&[u8]>) -> Result<(), StoreError> {
        self.send(&load_library(), false).await.map(drop)
    }
}

impl Shared {
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
    ) -> Result<(MultiplexedConnection, usize, u64), String> {
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
                            Err(_) => failed = Some(NO_RUNTIME.to_owned()),
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
    fn any_live(&self, but: usize) -> Option<(MultiplexedConnection, usize, u64)> {
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
            result: Some(Err("connection attempt abandoned".into())),
        };
        // No response timeout of redis-rs' own: every call is bounded by its
        // limiter's timeout, and a stalled connection is replaced (`Watch`).
        let config = AsyncConnectionConfig::new()
            .set_response_timeout(None)
            .set_connection_timeout(None);
        let connect = this
            .client
            .get_multiplexed_async_connection_with_config(&config);
        let result = match tokio::time::timeout(this.connect_timeout, connect).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(format!("cannot connect to redis: {e}")),
            Err(_) => Err(format!(
                "cannot connect to redis within {:?}",
                this.connect_timeout
            )),
        };
        attempt.result = Some(result);
    }

    fn install(&self, i: usize, result: Result<MultiplexedConnection, String>) {
        let slot = &self.slots[i];
        let mut st = lock(&slot.state);
        st.connecting = false;
        match result {
            Ok(conn) => {
                st.generation += 1;
                st.live = Some((conn, st.generation));
                st.failed = None;
                slot.stalled_since.store(0, Ordering::Relaxed);
            }
            Err(why) => st.failed = Some((Instant::now(), why)),
        }
        drop(st);
        slot.notify.notify_waiters();
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

/// The end of a connection attempt, also when its task is dropped.
struct Attempt<'a> {
    shared: &'a Shared,
    slot: usize,
    result: Option<Result<MultiplexedConnection, String>>,
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if let Some(result) = self.result.take() {
            self.shared.install(self.slot, result);
        }
    }
}

/// Notices calls given up on (their future dropped, i.e. timed out) with no
/// answer from the connection, and replaces a connection that stalled.
struct Watch<'a> {
    shared: &'a Shared,
    slot: usize,
    generation: u64,
    answered: bool,
}

impl Watch<'_> {
    fn answered(mut self) {
        self.answered = true;
        let since = &self.shared.slots[self.slot].stalled_since;
        if since.load(Ordering::Relaxed) != 0 {
            since.store(0, Ordering::Relaxed);
        }
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let since = &self.shared.slots[self.slot].stalled_since;
        let now = self.shared.now_ms();
        match since.load(Ordering::Relaxed) {
            0 => {
                let _ = since.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
            }
            t if now.saturating_sub(t) >= STALL_LIMIT_MS => {
                since.store(0, Ordering::Relaxed);
                self.shared.detach(self.slot, self.generation);
            }
            _ => {}
        }
    }
}

/// The connection cannot be used again.
fn broken(e: &RedisError) -> bool {
    e.is_connection_dropped() || e.is_unrecoverable_error()
}

/// A poisoned slot only means a thread panicked while holding it; the state
/// is still consistent.
fn lock(m: &Mutex<SlotState>) -> MutexGuard<'_, SlotState> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl fmt::Debug for Connections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.shared;
        let connected = s
            .slots
            .iter()
            .filter(|x| lock(&x.state).live.is_some())
            .count();
        f.debug_struct("RedisStore")
            .field("connections", &s.slots.len())
            .field("connected", &connected)
            .field("connect_timeout", &s.connect_timeout)
            .finish()
    }
}
