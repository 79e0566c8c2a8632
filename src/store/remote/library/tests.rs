//! The commands and replies of `library.rs`.

use super::*;
use crate::algorithm::sealed::Sealed;
use crate::algorithm::*;
use crate::store::{MemoryStore, Store, Target};
use std::time::Duration;

/// The parameters of `spec` for user key "ana" as plain strings:
/// `f64`'s `Display` is the shortest string that parses back to the
/// same double; a jittered window's offset last.
fn params(spec: &Spec) -> Vec<String> {
    let mut out = two_params(spec).to_vec();
    out.extend(spec.offset("ana").map(|o| o.to_string()));
    out
}

fn two_params(spec: &Spec) -> [String; 2] {
    match *spec {
        Spec::FixedWindow {
            limit, window_ms, ..
        }
        | Spec::SlidingLog { limit, window_ms }
        | Spec::SlidingWindow {
            limit, window_ms, ..
        } => [limit.to_string(), window_ms.to_string()],
        Spec::TokenBucket {
            capacity,
            interval_ms,
            ..
        }
        | Spec::LeakyBucket {
            capacity,
            interval_ms,
            ..
        } => [capacity.to_string(), interval_ms.to_string()],
        Spec::Gcra {
            burst, interval_ms, ..
        } => [burst.to_string(), interval_ms.to_string()],
        Spec::Concurrency { max, lease_ms } => [max.to_string(), lease_ms.to_string()],
    }
}

#[test]
fn the_command_sends_what_the_string_args_say() {
    let store = Store::from(MemoryStore::new());
    let targets: Vec<Target> = [
        FixedWindow::new(10, Duration::from_secs(1)).parts(),
        SlidingLog::new(1 << 16, Duration::from_millis(1)).parts(),
        SlidingWindow::new(7, Duration::from_millis(1 << 40)).parts(),
        FixedWindow::new(10, Duration::from_secs(60))
            .jittered()
            .parts(),
        SlidingWindow::new(7, Duration::from_millis(1 << 40))
            .jittered()
            .parts(),
        TokenBucket::new(10, 0.1).parts(),
        TokenBucket::new(1, 1e-9).parts(),
        LeakyBucket::new(1 << 40, 1e15).parts(),
        Gcra::new(3, Duration::from_secs(1)).parts(),
        Gcra::new(1 << 40, Duration::from_millis(1)).parts(),
    ]
    .into_iter()
    .flatten()
    .enumerate()
    .map(|(i, (_, spec))| Target {
        ns: store.namespace("rl", &format!("x{i}"), spec.tag()),
        spec,
        shadow: false,
    })
    .collect();
    for (now, mode) in [
        (None, Mode::Check),
        (Some(1_791_860_000_123), Mode::Peek),
        (Some(7), Mode::Refund),
    ] {
        for n in [1, targets.len()] {
            let batch = Batch {
                targets: &targets[..n],
                key: "ana",
                keys: &[],
                now,
                mode,
                cost: 4,
                lease: "",
            };
            let ours = command(&batch).cmd;
            let mut theirs = redis::cmd("FCALL");
            theirs.arg(&DECIDE.name).arg(n);
            for (i, t) in targets[..n].iter().enumerate() {
                theirs.arg(format!("rl:x{i}:{}:{{ana}}", t.spec.tag()));
            }
            theirs.arg(now.map(|n| n.to_string()).unwrap_or_default());
            // A reservation's mode is its longest wait.
            match mode {
                Mode::Reserve { max_wait_ms } => theirs.arg(max_wait_ms.to_string()),
                mode => theirs.arg(mode.as_str()),
            };
            theirs.arg("4");
            for t in &targets[..n] {
                theirs.arg(t.spec.tag());
                for p in params(&t.spec) {
                    theirs.arg(p);
                }
            }
            assert_eq!(ours.get_packed_command(), theirs.get_packed_command());
            let sha = DECIDE.script.get_hash();
            assert_eq!(
                reform(&ours, "EVALSHA", sha).get_packed_command(),
                reform(&theirs, "EVALSHA", sha).get_packed_command()
            );
            assert_eq!(first_key(&ours).as_deref(), Some(&b"rl:x0:fw:{ana}"[..]));
        }
    }
}

#[test]
fn replies_parse() {
    let ints = |v: &[i64]| Value::Array(v.iter().map(|&n| Value::Int(n)).collect());
    let r = replies(&ints(&[1, 10, 9, 100, -1, 0, 0, 5, 0, 30, 30, 0]), 2).unwrap();
    assert!(r[0].allowed() && !r[1].allowed());
    assert_eq!((r[1].limit, r[1].retry_ms), (5, 30));
    assert!(replies(&ints(&[1, 2, 3]), 1).is_err());
    assert!(replies(&Value::Nil, 1).is_err());
}

#[test]
fn the_library_registers_both_functions_under_its_versioned_name() {
    assert!(LIBRARY.starts_with(&format!("#!lua name={}\n", DECIDE.name)));
    assert!(LIBRARY.contains(&format!("register_function('{}', lease)", LEASE.name)));
    assert_eq!(
        Script::new(&DECIDE.source).get_hash(),
        DECIDE.script.get_hash()
    );
    assert!(DECIDE.name.starts_with("floodgate_") && DECIDE.name.len() == 26);
}
