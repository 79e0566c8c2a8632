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
use crate::store::{StoreError, StoreErrorKind};
use redis::cluster_routing::Slot;
use redis::{Cmd, Value};
use std::collections::HashMap;
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
    /// Its hash slot, on a cluster.
    slot: Option<Slot>,
    reply: oneshot::Sender<Result<Value, StoreError>>,
}

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

    /// Whether calls carry more than one decision.
    pub(super) fn enabled(&self) -> bool {
        self.max > 1
    }

    /// `cmd` (a decision's `FCALL`), sent with what else is waiting. `None`
    /// when it cannot be queued (no Tokio runtime): the caller sends it.
    pub(super) fn join<T: Transport>(
        &self,
        remote: &Remote<T>,
        cmd: Cmd,
    ) -> Option<oneshot::Receiver<Result<Value, StoreError>>> {
        let slot = if self.cluster {
            super::library::first_key(&cmd).map(Slot::for_key)
        } else {
            None
        };
        let (reply, answer) = oneshot::channel();
        let mut waiting = Waiting { cmd, slot, reply };
        let mut queue = self
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The task ends with its runtime: a new one on this call's.
        for _ in 0..2 {
            if let Some(tx) = queue.as_ref() {
                match tx.send(waiting) {
                    Ok(()) => return Some(answer),
                    Err(mpsc::error::SendError(back)) => waiting = back,
                }
            }
            let rt = tokio::runtime::Handle::try_current().ok()?;
            let (tx, rx) = mpsc::unbounded_channel();
            drop(rt.spawn(run(remote.downgrade(), rx, self.max)));
            *queue = Some(tx);
        }
        None
    }
}

/// The store's task: until the store is dropped, take what is queued and
/// send it, at most `IN_FLIGHT` calls out at once.
async fn run<T: Transport>(
    remote: std::sync::Weak<super::invoke::Shared<T>>,
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
/// request gets its own reply (or error). Given up when every request of it
/// was (each caller's own timeout): as a call made alone would be, so that
/// the connection's watch sees it, and a store that stopped answering holds
/// no call of this task's.
async fn send<T: Transport>(remote: &Remote<T>, mut group: Vec<Waiting>) {
    let (function, cmd, keys) = if let [one] = group.as_mut_slice() {
        (&*DECIDE, std::mem::replace(&mut one.cmd, Cmd::new()), None)
    } else {
        let (cmd, keys) = many(&group);
        (&*MANY, cmd, Some(keys))
    };
    let call = async {
        let v = remote.invoke(function, &cmd).await?;
        let Some(keys) = &keys else {
            return Ok(vec![v]);
        };
        split(v, keys)
    };
    let answered = tokio::select! {
        answered = call => answered,
        () = all_gave_up(&mut group) => return,
    };
    match answered {
        Ok(replies) => {
            for (w, v) in group.into_iter().zip(replies) {
                let _ = w
                    .reply
                    .send(super::library::top_error(v).map_err(StoreError::from));
            }
        }
        Err(e) => {
            for w in group {
                let _ = w.reply.send(Err(e.clone()));
            }
        }
    }
}

/// Ends when every request of `group` was given up.
async fn all_gave_up(group: &mut [Waiting]) {
    for w in group {
        w.reply.closed().await;
    }
}

/// One request's keys and ARGV.
type KeysAndArgs<'a> = (Vec<&'a [u8]>, Vec<&'a [u8]>);

/// Each request's reply, out of the one array `many` answers: six integers
/// a key, or one error, for each request in turn (`keys`: how many keys
/// each has).
fn split(v: Value, keys: &[usize]) -> Result<Vec<Value>, StoreError> {
    let unexpected = |what: &str| {
        StoreError::new(
            StoreErrorKind::Protocol,
            format!(
                "unexpected reply to {} decisions in one call: {what}",
                keys.len()
            ),
        )
    };
    let Value::Array(items) = v else {
        return Err(unexpected(&format!("{v:?}")));
    };
    let mut items = items.into_iter();
    let mut replies = Vec::with_capacity(keys.len());
    for &n in keys {
        if n == 0 {
            replies.push(Value::Array(Vec::new()));
            continue;
        }
        match items.next() {
            Some(e @ Value::ServerError(_)) => replies.push(e),
            Some(first) => {
                let mut ints = Vec::with_capacity(6 * n);
                ints.push(first);
                ints.extend(items.by_ref().take(6 * n - 1));
                if ints.len() != 6 * n {
                    return Err(unexpected("too short"));
                }
                replies.push(Value::Array(ints));
            }
            None => return Err(unexpected("too short")),
        }
    }
    match items.next() {
        None => Ok(replies),
        Some(_) => Err(unexpected("too long")),
    }
}

/// The `FCALL` of `many` for the requests of `group`, each given by its own
/// `FCALL` of `floodgate`: `FCALL name_many K keys... m u (na args...)...
/// (index)...`, each distinct ARGV once (the requests of one limiter at
/// one moment share theirs) and each request naming its own (when there
/// are several); and how many keys each request has.
fn many(group: &[Waiting]) -> (Cmd, Vec<usize>) {
    let parts: Vec<KeysAndArgs<'_>> = group
        .iter()
        .map(|w| {
            let mut args = w.cmd.args_iter().skip(2).filter_map(|a| match a {
                redis::Arg::Simple(b) => Some(b),
                _ => None,
            });
            let n: usize = args
                .next()
                .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
                .unwrap_or(0);
            let keys: Vec<&[u8]> = args.by_ref().take(n).collect();
            (keys, args.collect())
        })
        .collect();
    // The distinct ARGV, and each request's (1-based, as Lua counts).
    let mut distinct: Vec<&[&[u8]]> = Vec::new();
    let mut index = Vec::with_capacity(parts.len());
    for (_, args) in &parts {
        let i = if let Some(i) = distinct.iter().position(|d| *d == args.as_slice()) {
            i
        } else {
            distinct.push(args);
            distinct.len() - 1
        };
        index.push(i + 1);
    }
    let keys: usize = parts.iter().map(|(k, _)| k.len()).sum();
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(&MANY.name).arg(keys);
    for (k, _) in &parts {
        for key in k {
            cmd.arg(*key);
        }
    }
    let several = distinct.len() > 1;
    cmd.arg(group.len()).arg(distinct.len());
    for args in distinct {
        cmd.arg(args.len());
        for arg in args {
            cmd.arg(*arg);
        }
    }
    // With one ARGV for all, no request needs to name it.
    if several {
        for i in index {
            cmd.arg(i);
        }
    }
    (cmd, parts.iter().map(|(k, _)| k.len()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(key: &str, cost: u64) -> Waiting {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(&DECIDE.name).arg(1).arg(key);
        cmd.arg("")
            .arg("check")
            .arg(cost)
            .arg("gcra")
            .arg(10)
            .arg(100);
        Waiting {
            cmd,
            slot: None,
            reply: oneshot::channel().0,
        }
    }

    #[test]
    fn each_distinct_argv_goes_once_and_each_request_names_its_own() {
        let group = [waiting("a", 1), waiting("b", 2), waiting("c", 1)];
        let mut want = redis::cmd("FCALL");
        want.arg(&MANY.name).arg(3).arg("a").arg("b").arg("c");
        want.arg(3).arg(2);
        for cost in [1, 2] {
            want.arg(6).arg("").arg("check").arg(cost);
            want.arg("gcra").arg(10).arg(100);
        }
        want.arg(1).arg(2).arg(1);
        let (cmd, keys) = many(&group);
        assert_eq!(cmd.get_packed_command(), want.get_packed_command());
        assert_eq!(keys, [1, 1, 1]);
        // One ARGV for all: no request names it.
        let group = [waiting("a", 1), waiting("b", 1)];
        let mut want = redis::cmd("FCALL");
        want.arg(&MANY.name).arg(2).arg("a").arg("b").arg(2).arg(1);
        want.arg(6)
            .arg("")
            .arg("check")
            .arg(1)
            .arg("gcra")
            .arg(10)
            .arg(100);
        assert_eq!(
            many(&group).0.get_packed_command(),
            want.get_packed_command()
        );
    }

    #[test]
    fn the_one_array_splits_into_each_requests_reply() {
        let ints = |from: i64, n: i64| (from..from + n).map(Value::Int).collect::<Vec<_>>();
        let error = || redis::parse_redis_value(b"-ERR boom\r\n").unwrap();
        let mut flat = ints(0, 6);
        flat.push(error());
        flat.extend(ints(6, 12));
        let replies = split(Value::Array(flat.clone()), &[1, 1, 2]).unwrap();
        assert_eq!(replies[0], Value::Array(ints(0, 6)));
        assert!(matches!(replies[1], Value::ServerError(_)));
        assert_eq!(replies[2], Value::Array(ints(6, 12)));
        assert!(split(Value::Array(flat.clone()), &[1, 1, 3]).is_err());
        assert!(split(Value::Array(flat), &[1, 1, 1]).is_err());
        assert!(split(Value::Nil, &[1]).is_err());
    }
}
