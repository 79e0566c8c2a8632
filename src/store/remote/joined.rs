//! Many decisions per call. Decisions that wait for Redis at the same moment
//! go out as one call of floodgate's `many` (`lua/main.lua`), which decides
//! each request in turn: each all or nothing by itself, apart from the
//! others. A call never waits to fill: a task of the store's takes what is
//! already queued (at most `max`), sends it, and while up to
//! [`IN_FLIGHT`] calls are out, what arrives meanwhile queues for the next.
//! An idle service sends each decision alone, as a plain `FCALL`. On a
//! cluster, one call holds the requests of one hash slot only (a script's
//! keys must share a slot).
//!
//! ("Batch", in `store/`, is the keys of one request; here a call carries
//! several requests, each its own batch.)

use super::invoke::{Remote, Transport};
use super::library::{DECIDE, MANY};
use crate::store::{Replies, StoreError, StoreErrorKind};
use redis::cluster_routing::Slot;
use redis::{Cmd, Value};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Decisions in one call, at most (the default of
/// [`RedisStoreBuilder::max_decisions_per_call`](super::RedisStoreBuilder::max_decisions_per_call)).
pub(super) const DEFAULT_MAX: usize = 32;

/// Calls of many decisions out at once per store: the connections pipeline
/// them, and requests arriving meanwhile queue for the next.
const IN_FLIGHT: usize = 4;

/// One request waiting for its call.
struct Waiting {
    /// Its own `FCALL` of `floodgate` (name, number of keys, keys, ARGV).
    cmd: Cmd,
    /// How many limits it decides: its reply is six integers each.
    limits: usize,
    /// Its hash slot, on a cluster.
    slot: Option<Slot>,
    reply: oneshot::Sender<Answered>,
}

/// What a request that waited gets: its replies, or its error with its
/// command back (to name a key in it that holds foreign data).
pub(super) type Answered = Result<Replies, (StoreError, Cmd)>;

/// The queue of a store, and the task that empties it.
pub(super) struct Joiner {
    max: usize,
    cluster: bool,
    queue: Mutex<Option<mpsc::UnboundedSender<Waiting>>>,
}

impl Joiner {
    pub(super) fn new(max: usize, cluster: bool) -> Self {
        Self {
            max,
            cluster,
            queue: Mutex::new(None),
        }
    }

    /// The most decisions one call carries.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// Whether the store is a cluster (a call's keys share a slot).
    pub(super) fn cluster(&self) -> bool {
        self.cluster
    }

    /// Whether calls carry more than one decision.
    pub(super) fn enabled(&self) -> bool {
        self.max > 1
    }

    /// `cmd` (a decision's `FCALL`, of `limits` limits), sent with what
    /// else is waiting. Given back when it cannot be queued (no Tokio
    /// runtime): the caller sends it.
    pub(super) fn join<T: Transport>(
        &self,
        remote: &Remote<T>,
        cmd: Cmd,
        limits: usize,
    ) -> Result<oneshot::Receiver<Answered>, Cmd> {
        let slot = if self.cluster {
            super::library::first_key(&cmd).map(Slot::for_key)
        } else {
            None
        };
        let (reply, answer) = oneshot::channel();
        let mut waiting = Waiting {
            cmd,
            limits,
            slot,
            reply,
        };
        let mut queue = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The task ends with its runtime: a new one on this call's.
        for _ in 0..2 {
            if let Some(tx) = queue.as_ref() {
                match tx.send(waiting) {
                    Ok(()) => return Ok(answer),
                    Err(mpsc::error::SendError(back)) => waiting = back,
                }
            }
            let Ok(rt) = tokio::runtime::Handle::try_current() else {
                break;
            };
            let (tx, rx) = mpsc::unbounded_channel();
            drop(rt.spawn(run(remote.downgrade(), rx, self.max)));
            *queue = Some(tx);
        }
        Err(waiting.cmd)
    }
}

/// The store's task: until the store is dropped, take what is queued and
/// send it, at most `IN_FLIGHT` calls out at once.
async fn run<T: Transport>(
    remote: std::sync::Weak<super::invoke::RemoteShared<T>>,
    mut rx: mpsc::UnboundedReceiver<Waiting>,
    max: usize,
) {
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT));
    // Waits for a free call first: what arrives meanwhile joins the next.
    while let Ok(permit) = in_flight.clone().acquire_owned().await {
        let Some(first) = rx.recv().await else {
            return;
        };
        let mut by_slot: HashMap<Option<Slot>, Vec<Waiting>> = HashMap::new();
        let mut taken = 1;
        by_slot.entry(first.slot).or_default().push(first);
        while taken < max {
            let Ok(w) = rx.try_recv() else { break };
            by_slot.entry(w.slot).or_default().push(w);
            taken += 1;
        }
        let Some(remote) = Remote::upgrade(&remote) else {
            return;
        };
        // One call per hash slot (one on a single server).
        let mut permit = Some(permit);
        for group in by_slot.into_values() {
            let permit = match permit.take() {
                Some(p) => p,
                None => match in_flight.clone().acquire_owned().await {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            let remote = remote.clone();
            drop(tokio::spawn(async move {
                send(&remote, group).await;
                drop(permit);
            }));
        }
    }
}

/// One call for `group`: a plain `FCALL` for one request, else `many`; each
/// request gets its own replies (or error). Given up when every request of
/// it was (each caller's own timeout): as a call made alone would be, so
/// that the connection's watch sees it, and a store that stopped answering
/// holds no call of this task's.
async fn send<T: Transport>(remote: &Remote<T>, group: Vec<Waiting>) {
    let mut cmds = Vec::with_capacity(group.len());
    let mut limits = Vec::with_capacity(group.len());
    let mut waiting = Vec::with_capacity(group.len());
    for w in group {
        cmds.push(w.cmd);
        limits.push(w.limits);
        waiting.push(w.reply);
    }
    let call = async {
        if let ([cmd], [n]) = (cmds.as_slice(), limits.as_slice()) {
            let v = remote.invoke(&DECIDE, cmd).await?;
            return Ok(vec![answer(v, *n)]);
        }
        let v = remote.invoke(&MANY, &many(&cmds)).await?;
        split(v, &limits)
    };
    let answered = tokio::select! {
        answered = call => answered,
        () = all_gave_up(&mut waiting) => return,
    };
    match answered {
        Ok(answers) => {
            for ((reply, cmd), answer) in waiting.into_iter().zip(cmds).zip(answers) {
                let _ = reply.send(answer.map_err(|e| (e, cmd)));
            }
        }
        Err(e) => {
            for (reply, cmd) in waiting.into_iter().zip(cmds) {
                let _ = reply.send(Err((e.clone(), cmd)));
            }
        }
    }
}

/// Ends when every request of a group was given up.
async fn all_gave_up(waiting: &mut [oneshot::Sender<Answered>]) {
    for w in waiting {
        w.closed().await;
    }
}

/// One request's reply `v` (of `n` limits) as its replies, or its error.
fn answer(v: Value, n: usize) -> Result<Replies, StoreError> {
    super::library::replies(&super::library::top_error(v)?, n)
}

/// Each request's replies, out of the one array `many` answers: six
/// integers a limit, or one error, for each request in turn (`limits`: how
/// many limits each has).
fn split(v: Value, limits: &[usize]) -> Result<Vec<Result<Replies, StoreError>>, StoreError> {
    let unexpected = |what: &str| {
        StoreError::new(
            StoreErrorKind::Protocol,
            format!(
                "unexpected reply to {} decisions in one call: {what}",
                limits.len()
            ),
        )
    };
    let Value::Array(items) = v else {
        return Err(unexpected(&format!("{v:?}")));
    };
    let mut at = 0;
    let mut answers = Vec::with_capacity(limits.len());
    for &n in limits {
        // Every request has a limit (`Limits` is never empty): with none,
        // an error that follows it would be read as its own.
        debug_assert!(n > 0, "a request with no limit joined a call");
        if let Some(Value::ServerError(e)) = items.get(at) {
            answers.push(Err(StoreError::from(redis::RedisError::from(e.clone()))));
            at += 1;
            continue;
        }
        let part = items
            .get(at..at + 6 * n)
            .ok_or_else(|| unexpected("too short"))?;
        answers.push(super::library::replies_of(part, n).ok_or_else(|| unexpected("not integers")));
        at += 6 * n;
    }
    if at == items.len() {
        Ok(answers)
    } else {
        Err(unexpected("too long"))
    }
}

/// The `FCALL` of `many` for requests given by their own `FCALL`s of
/// `floodgate` (`cmds`): `FCALL name_many K keys... m u (na args...)...
/// (index)...`, each distinct ARGV once (the requests of one limiter at
/// one moment share theirs) and, when there are several, each request
/// naming its own.
fn many(cmds: &[Cmd]) -> Cmd {
    // Every request's keys and ARGV in one list, and where each one's are.
    let mut all: Vec<&[u8]> = Vec::with_capacity(8 * cmds.len());
    let mut spans: Vec<(Range<usize>, Range<usize>)> = Vec::with_capacity(cmds.len());
    for cmd in cmds {
        let mut own = cmd.args_iter().skip(2).filter_map(|a| match a {
            redis::Arg::Simple(b) => Some(b),
            _ => None,
        });
        let n: usize = own
            .next()
            .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
            .unwrap_or(0);
        let start = all.len();
        all.extend(own);
        let keys = start..(start + n).min(all.len());
        spans.push((keys.clone(), keys.end..all.len()));
    }
    // The distinct ARGV, and each request's (1-based, as Lua counts).
    let mut distinct: Vec<&[&[u8]]> = Vec::new();
    let mut index = Vec::with_capacity(spans.len());
    for (_, argv) in &spans {
        let argv = &all[argv.clone()];
        let i = if let Some(i) = distinct.iter().position(|d| *d == argv) {
            i
        } else {
            distinct.push(argv);
            distinct.len() - 1
        };
        index.push(i + 1);
    }
    let several = distinct.len() > 1;
    let keys: usize = spans.iter().map(|(k, _)| k.len()).sum();
    let bytes: usize = all.iter().map(|a| a.len() + 16).sum();
    let mut cmd = Cmd::with_capacity(all.len() + index.len() + 8, bytes + 16 * index.len() + 64);
    cmd.arg("FCALL").arg(&MANY.name).arg(keys);
    for (k, _) in &spans {
        for key in &all[k.clone()] {
            cmd.arg(*key);
        }
    }
    cmd.arg(spans.len()).arg(distinct.len());
    for argv in distinct {
        cmd.arg(argv.len());
        for arg in argv {
            cmd.arg(*arg);
        }
    }
    // With one ARGV for all, no request needs to name it.
    if several {
        for i in index {
            cmd.arg(i);
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fcall(key: &str, cost: u64) -> Cmd {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&DECIDE.name).arg(1).arg(key);
        cmd.arg("")
            .arg("check")
            .arg(cost)
            .arg("gcra")
            .arg(10)
            .arg(100);
        cmd
    }

    #[test]
    fn each_distinct_argv_goes_once_and_each_request_names_its_own() {
        let mut want = redis::cmd("FCALL");
        want.arg(&MANY.name).arg(3).arg("a").arg("b").arg("c");
        want.arg(3).arg(2);
        for cost in [1, 2] {
            want.arg(6).arg("").arg("check").arg(cost);
            want.arg("gcra").arg(10).arg(100);
        }
        want.arg(1).arg(2).arg(1);
        let cmds = [fcall("a", 1), fcall("b", 2), fcall("c", 1)];
        assert_eq!(many(&cmds).get_packed_command(), want.get_packed_command());
        // One ARGV for all: no request names it.
        let mut want = redis::cmd("FCALL");
        want.arg(&MANY.name).arg(2).arg("a").arg("b").arg(2).arg(1);
        want.arg(6).arg("").arg("check").arg(1);
        want.arg("gcra").arg(10).arg(100);
        let cmds = [fcall("a", 1), fcall("b", 1)];
        assert_eq!(many(&cmds).get_packed_command(), want.get_packed_command());
    }

    #[test]
    fn the_one_array_splits_into_each_requests_replies() {
        // allowed, limit, remaining, reset, retry, delay: one limit each.
        let reply = |remaining: i64| [1, 10, remaining, 100, -1, 0].map(Value::Int);
        let error = || redis::parse_redis_value(b"-ERR boom\r\n").unwrap();
        let mut flat = reply(9).to_vec();
        flat.push(error());
        flat.extend(reply(8));
        flat.extend(reply(7));
        let answers = split(Value::Array(flat.clone()), &[1, 1, 2]).unwrap();
        assert_eq!(answers[0].as_ref().unwrap()[0].remaining, 9);
        assert!(answers[1].is_err());
        let both = answers[2].as_ref().unwrap();
        assert_eq!((both[0].remaining, both[1].remaining), (8, 7));
        assert!(split(Value::Array(flat.clone()), &[1, 1, 3]).is_err());
        assert!(split(Value::Array(flat), &[1, 1, 1]).is_err());
        assert!(split(Value::Nil, &[1]).is_err());
    }
}
