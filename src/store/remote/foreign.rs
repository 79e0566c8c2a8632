//! A key that holds data floodgate did not write (a list where floodgate
//! keeps a string, text where it keeps digits): found when floodgate's code
//! fails on it, and named in the error, instead of a Lua line number.

use super::invoke::Transport;
use crate::store::{StoreError, StoreErrorKind};
use redis::{Cmd, Value};

/// How much of a foreign string value an error shows.
const SHOWN: usize = 40;

/// Whether floodgate's code may have failed on a key's data: Redis refused
/// a command on a key of another type (`WRONGTYPE`), or the code met a
/// value it cannot compute with (a Lua runtime error: "attempt to ...").
pub(super) fn suspect(e: &StoreError) -> bool {
    e.redis().is_some_and(|r| {
        r.code() == Some("WRONGTYPE")
            || r.detail()
                .is_some_and(|d| d.contains("attempt to") || d.contains("WRONGTYPE"))
    })
}

/// The keys of `cmd` (an `FCALL`, `EVALSHA` or `EVAL`: name, number of
/// keys, keys, arguments), each with the type floodgate keeps there.
pub(super) fn keys(cmd: &Cmd, zset: &[bool]) -> Vec<(Vec<u8>, &'static str)> {
    let mut args = cmd.args_iter().skip(2);
    let n: usize = match args.next() {
        Some(redis::Arg::Simple(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    };
    args.take(n)
        .zip(zset.iter().chain(std::iter::repeat(&false)))
        .filter_map(|(a, z)| match a {
            redis::Arg::Simple(b) => Some((b.to_vec(), if *z { "zset" } else { "string" })),
            _ => None,
        })
        .collect()
}

/// `e`, or when one of `keys` holds data floodgate did not write, an error
/// of kind [`ForeignData`](StoreErrorKind::ForeignData) that names the key
/// and says what is there (its type, or the start of its value).
pub(super) async fn diagnose<T: Transport>(
    transport: &T,
    keys: &[(Vec<u8>, &'static str)],
    e: StoreError,
) -> StoreError {
    for (key, expected) in keys {
        let name = String::from_utf8_lossy(key);
        let mut ty = redis::cmd("TYPE");
        ty.arg(key);
        let found = match transport.send(&ty, false).await {
            Ok(Value::SimpleString(s)) => s,
            Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
            _ => continue,
        };
        if found == "none" {
            continue;
        }
        if found != *expected {
            return StoreError::new(
                StoreErrorKind::ForeignData,
                format!(
                    "key `{name}` holds a {found}, which floodgate did not write (it keeps a \
                     {expected} there): {e}"
                ),
            );
        }
        if found == "string" {
            let mut get = redis::cmd("GETRANGE");
            get.arg(key).arg(0).arg(SHOWN - 1);
            if let Ok(Value::BulkString(v)) = transport.send(&get, false).await {
                return StoreError::new(
                    StoreErrorKind::ForeignData,
                    format!(
                        "key `{name}` holds {:?}, which floodgate did not write: {e}",
                        String::from_utf8_lossy(&v)
                    ),
                );
            }
        }
    }
    e
}
