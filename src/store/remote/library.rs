//! floodgate's Redis code and how it is called: the function library and
//! its script forms (built from `lua/` by `build.rs`), the command of a
//! batch, and the reading of its reply.

use crate::algorithm::{Reply, Spec};
use crate::store::key::{storage_key, with_storage_key, StackStr};
use crate::store::{Batch, Mode, Replies, StoreError, StoreErrorKind};
use redis::{Cmd, Script, Value};
use std::sync::LazyLock;

/// The code shared by the library and the scripts: every algorithm, the
/// leases, and `floodgate(KEYS, ARGV)`, the loop that decides several keys
/// all or nothing, joined by `build.rs` in the order of `lua/files.txt`.
/// Only definitions: nothing runs until a function is called.
const SHARED_SOURCE: &str = include_str!(concat!(env!("OUT_DIR"), "/shared.lua"));

/// One entry point of the code: the library's function, and the same code
/// as a script for servers without functions (Redis before 7.0, or a user
/// not allowed them), where Redis runs the whole body, definitions
/// included, on every call.
pub(super) struct Function {
    /// The name to `FCALL`.
    pub(super) name: String,
    /// Its calls must run in the order they were sent: a lease's release
    /// after its acquire.
    pub(super) ordered: bool,
    /// The script form, with its SHA1 for `EVALSHA`.
    pub(super) script: Script,
    /// The script form's source, for `EVAL`.
    pub(super) source: String,
}

fn function(entry: &str, name: String, ordered: bool) -> Function {
    let source = format!("{SHARED_SOURCE}return {entry}(KEYS, ARGV)\n");
    Function {
        name,
        ordered,
        script: Script::new(&source),
        source,
    }
}

/// The library's name: `floodgate_` and the start of the decision
/// script's SHA1. Functions outlive restarts and deploys (they are saved
/// and replicated), so a new version of the code must not find an old one
/// under the same name.
static NAME: LazyLock<String> = LazyLock::new(|| {
    let decide = format!("{SHARED_SOURCE}return floodgate(KEYS, ARGV)\n");
    format!("floodgate_{}", &Script::new(&decide).get_hash()[..16])
});

/// Decisions: `floodgate(KEYS, ARGV)` (see `lua/prelude.lua` for ARGV).
pub(super) static DECIDE: LazyLock<Function> =
    LazyLock::new(|| function("floodgate", NAME.clone(), false));

/// Many decisions in one call: `many(KEYS, ARGV)` (see `lua/main.lua`).
pub(super) static MANY: LazyLock<Function> =
    LazyLock::new(|| function("many", format!("{}_many", *NAME), false));

/// Leases: `lease(KEYS, ARGV)` (see `lua/concurrency.lua`).
pub(super) static LEASE: LazyLock<Function> =
    LazyLock::new(|| function("lease", format!("{}_lease", *NAME), true));

/// The `FUNCTION LOAD` payload: the shared code runs once when the library
/// is loaded, a call runs only its function.
pub(super) static LIBRARY: LazyLock<String> = LazyLock::new(|| {
    let name = &*NAME;
    format!(
        "#!lua name={name}\n{SHARED_SOURCE}\
         redis.register_function('{name}', floodgate)\n\
         redis.register_function('{name}_lease', lease)\n\
         redis.register_function('{name}_many', many)\n"
    )
});

/// `FUNCTION LOAD` of the library. Without `REPLACE`: when many calls found
/// it missing at once, the loads after the first are refused before any
/// compiling (the name says the version: same name, same code).
pub(super) fn load_library() -> Cmd {
    let mut cmd = redis::cmd("FUNCTION");
    cmd.arg("LOAD").arg(&*LIBRARY);
    cmd
}

/// One call of floodgate's code.
pub(super) struct ScriptCall {
    pub(super) function: &'static Function,
    /// The `FCALL`.
    pub(super) cmd: Cmd,
    /// For a lease's acquire, the release that undoes it: sent when the
    /// caller gave up on the acquire, which may still run.
    pub(super) undo: Option<Cmd>,
}

/// The call that decides `batch`: its `FCALL`, written straight into one
/// buffer with numbers formatted in place.
pub(super) fn command(batch: &Batch<'_>) -> ScriptCall {
    if let [target] = batch.targets {
        if let Spec::Concurrency { max, lease_ms } = target.spec {
            let key = storage_key(&target.ns.head, batch.key);
            let lease = |mode: Mode| {
                let mut cmd = Cmd::with_capacity(9, 128 + key.len());
                cmd.arg("FCALL").arg(&LEASE.name).arg(1).arg(&key);
                now_arg(&mut cmd, batch.now);
                cmd.arg(mode.as_str())
                    .arg(batch.lease)
                    .arg(max)
                    .arg(lease_ms);
                cmd
            };
            return ScriptCall {
                function: &LEASE,
                cmd: lease(batch.mode),
                undo: (batch.mode == Mode::Check).then(|| lease(Mode::Refund)),
            };
        }
    }
    let n = batch.targets.len();
    let heads: usize = batch.targets.iter().map(|t| t.ns.head.len()).sum();
    let keys: usize = (0..n).map(|i| batch.key_of(i).len()).sum();
    let mut cmd = Cmd::with_capacity(
        6 + 4 * n,
        DECIDE.name.len() + heads + keys + 2 * n + 48 * (1 + n),
    );
    cmd.arg("FCALL").arg(&DECIDE.name).arg(n);
    for (i, target) in batch.targets.iter().enumerate() {
        with_storage_key(&target.ns.head, batch.key_of(i), |key| {
            cmd.arg(key);
        });
    }
    now_arg(&mut cmd, batch.now);
    // A reservation's mode on the wire is its longest wait in ms, a
    // block's `block:` and its time in ms.
    match batch.mode {
        Mode::Reserve { max_wait_ms } => cmd.arg(max_wait_ms),
        Mode::Block { ms } => cmd.arg(format!("block:{ms}")),
        mode => cmd.arg(mode.as_str()),
    };
    cmd.arg(batch.cost);
    for (i, target) in batch.targets.iter().enumerate() {
        let spec = target.spec;
        cmd.arg(if target.shadow {
            spec.shadow_tag()
        } else {
            spec.tag()
        });
        match spec {
            Spec::FixedWindow {
                limit, window_ms, ..
            }
            | Spec::SlidingLog { limit, window_ms }
            | Spec::SlidingWindow {
                limit, window_ms, ..
            } => {
                cmd.arg(limit).arg(window_ms);
                // A jittered window's third parameter: the key's offset,
                // computed here as the memory twin computes it.
                if let Some(offset) = spec.offset(batch.key_of(i)) {
                    cmd.arg(offset);
                }
            }
            // The time a unit takes, as the twin computes it (the buckets'
            // 1000 / rate): the code needs no division of its own.
            Spec::TokenBucket {
                capacity,
                interval_ms,
                ..
            }
            | Spec::LeakyBucket {
                capacity,
                interval_ms,
                ..
            } => {
                cmd.arg(capacity);
                arg_f64(&mut cmd, interval_ms);
            }
            Spec::Gcra {
                burst, interval_ms, ..
            } => {
                cmd.arg(burst);
                arg_f64(&mut cmd, interval_ms);
            }
            // Never with other targets (see `Batch::targets`); the code
            // would answer that it knows no algorithm `cc`.
            Spec::Concurrency { max, lease_ms } => {
                cmd.arg(max).arg(lease_ms);
            }
        }
    }
    ScriptCall {
        function: &DECIDE,
        cmd,
        undo: None,
    }
}

/// `now`, or `''` for the server's clock.
fn now_arg(cmd: &mut Cmd, now: Option<u64>) {
    match now {
        Some(now) => cmd.arg(now),
        None => cmd.arg(""),
    };
}

/// The same call under another `verb` and `script` (`EVALSHA <sha>`,
/// `EVAL <source>`): the arguments after the first two are the same.
pub(super) fn reform(cmd: &Cmd, verb: &str, script: &str) -> Cmd {
    let mut out = redis::cmd(verb);
    out.arg(script);
    for arg in cmd.args_iter().skip(2) {
        if let redis::Arg::Simple(bytes) = arg {
            out.arg(bytes);
        }
    }
    out
}

/// `v`, or its error when Redis answered one: only at the top, where one
/// call's error is (the call of many decisions answers an array that holds
/// one request's error beside the others' replies).
pub(super) fn top_error(v: Value) -> redis::RedisResult<Value> {
    match v {
        Value::ServerError(e) => Err(e.into()),
        v => Ok(v),
    }
}

/// The first key of a call (what routes it in a cluster).
pub(super) fn first_key(cmd: &Cmd) -> Option<Vec<u8>> {
    match cmd.args_iter().nth(3)? {
        redis::Arg::Simple(bytes) => Some(bytes.to_vec()),
        _ => None,
    }
}

/// `x` as its `Display` form, the shortest string that parses back to the
/// same double, formatted on the stack.
fn arg_f64(cmd: &mut Cmd, x: f64) {
    use std::fmt::Write;
    let mut buf = StackStr::<64>::new();
    if write!(buf, "{x}").is_ok() {
        cmd.arg(buf.as_bytes());
    } else {
        cmd.arg(x.to_string());
    }
}

/// The replies of a call deciding `n` keys: six integers each, read
/// without collecting them first; anything else is a protocol error that
/// shows what came.
pub(super) fn replies(v: &Value, n: usize) -> Result<Replies, StoreError> {
    match v {
        Value::Array(items) => replies_of(items, n),
        _ => None,
    }
    .ok_or_else(|| StoreError::new(StoreErrorKind::Protocol, format!("unexpected reply {v:?}")))
}

/// [`replies`] from the integers themselves (a part of the one array a
/// call of many decisions answers).
pub(super) fn replies_of(items: &[Value], n: usize) -> Option<Replies> {
    if items.len() != 6 * n {
        return None;
    }
    items
        .chunks_exact(6)
        .map(|r| match *r {
            [Value::Int(allowed), Value::Int(limit), Value::Int(remaining), Value::Int(reset_ms), Value::Int(retry_ms), Value::Int(delay_ms)] => {
                Some(Reply { reason: crate::Reason::of(allowed == 1, retry_ms), limit, remaining, reset_ms, retry_ms, delay_ms })
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests;
