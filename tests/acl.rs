//! Least privilege, on a real `redis-server`: a user with exactly the ACL
//! the guide documents (read from `src/guide/deploying.rs`, so the two
//! cannot drift apart) passes every entry; a user whose key pattern leaves
//! out the prefix gets a `probe()` error naming the pattern; a `NOPERM` at
//! decision time is a permission error, for the caller and the failure hook.

mod common;

use common::RedisServer;
use floodgate::algorithm::{FixedWindow, Gcra, Limits, TokenBucket};
use floodgate::concurrency::ConcurrencyLimiter;
use floodgate::failure::{FailureKind, FailurePolicy};
use floodgate::store::{RedisStore, StoreErrorKind};
use floodgate::{Error, Limiter};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const GUIDE: &str = include_str!("../src/guide/deploying.rs");

/// The guide's `ACL SETUSER floodgate ...` lines, as argument lists, for
/// user `name` with `password`. `CLIENT SETINFO` exists from Redis 7.2 on:
/// the guide says to leave it out before.
fn documented_acl(name: &str, password: &str, version: (u32, u32)) -> Vec<Vec<String>> {
    let lines: Vec<Vec<String>> = GUIDE
        .lines()
        .filter_map(|l| l.strip_prefix("//! ACL SETUSER floodgate "))
        .map(|rules| {
            let mut args = vec!["SETUSER".to_owned(), name.to_owned()];
            for rule in rules.split_whitespace() {
                if rule == "+client|setinfo" && version < (7, 2) {
                    continue;
                }
                args.push(rule.replace(">PASSWORD", &format!(">{password}")));
            }
            args
        })
        .collect();
    assert!(lines.len() >= 3, "the guide's ACL lines were not found");
    lines
}

fn version(server: &RedisServer) -> (u32, u32) {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut server.conn())
        .unwrap();
    let v = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .expect("redis_version in INFO");
    let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn set_acl(server: &RedisServer, lines: &[Vec<String>]) {
    let mut admin = server.conn();
    for args in lines {
        let mut cmd = redis::cmd("ACL");
        for a in args {
            cmd.arg(a);
        }
        let r: redis::RedisResult<()> = cmd.query(&mut admin);
        r.unwrap_or_else(|e| panic!("ACL {args:?} refused: {e}"));
    }
}

fn url(server: &RedisServer, user: &str, password: &str) -> String {
    format!("redis://{user}:{password}@127.0.0.1:{}", server.port())
}

fn strict<A: floodgate::algorithm::Algorithm>(store: &RedisStore, name: &str, a: A) -> Limiter<A> {
    Limiter::builder(store.clone(), a)
        .name(name)
        .timeout(Duration::from_secs(2))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_acl_passes_every_entry() {
    let server = RedisServer::start();
    set_acl(
        &server,
        &documented_acl("floodgate", "s3cret", version(&server)),
    );
    let store = RedisStore::from_url(&url(&server, "floodgate", "s3cret")).unwrap();

    let report = store.probe().await.expect("probe with the documented ACL");
    assert!(report.functions(), "{report:?}");
    assert_eq!(report.nodes().len(), 1);
    assert_eq!(report.nodes()[0].server(), "redis");
    // `+info` is in the documented ACL: the eviction policy is known.
    assert!(report.nodes()[0].maxmemory_policy().is_some(), "{report:?}");

    let fixed = strict(
        &store,
        "fixed",
        FixedWindow::new(3, Duration::from_secs(60)),
    );
    for _ in 0..3 {
        assert!(fixed.check("ana", 1).await.unwrap().allowed());
    }
    assert!(!fixed.check("ana", 1).await.unwrap().allowed());
    assert_eq!(fixed.peek("ana").await.unwrap().remaining(), 0);
    fixed.refund("ana", 1).await.unwrap();
    assert_eq!(fixed.peek("ana").await.unwrap().remaining(), 1);
    // Other parameters for one call.
    let wider = FixedWindow::new(10, Duration::from_secs(60));
    assert!(fixed
        .check_with("ana", 1, &wider)
        .await
        .unwrap()
        .overall()
        .allowed());
    fixed.refund_with("ana", 1, &wider).await.unwrap();
    // Several limits, all or nothing, in one call.
    let limits = Limits::new("fixed", FixedWindow::new(3, Duration::from_secs(60)))
        .try_with("bucket", TokenBucket::new(3, 1.0))
        .unwrap();
    let several = strict(&store, "several", limits);
    let both = several.check_all("bob", 1).await.unwrap();
    assert!(
        both.overall().allowed() && both.each().len() == 2,
        "{both:?}"
    );
    several.refund("bob", 1).await.unwrap();

    let leases = ConcurrencyLimiter::builder(store.clone(), 1)
        .name("leases")
        .timeout(Duration::from_secs(2))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    let lease = leases.acquire("ana").await.unwrap().expect("a free slot");
    assert!(
        leases.acquire("ana").await.unwrap().is_err(),
        "the one slot is held"
    );
    assert_eq!(leases.in_flight("ana").await.unwrap(), 1);
    lease.release().await;
    assert_eq!(leases.in_flight("ana").await.unwrap(), 0);

    // Everything ran as functions: the user may FCALL (and FUNCTION LOAD).
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.conn())
        .unwrap();
    assert!(stats.contains("cmdstat_fcall:"), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_pattern_without_the_prefix_is_named_by_probe_and_is_a_permission_error() {
    let server = RedisServer::start();
    let mut lines = documented_acl("other", "pw", version(&server));
    // Another prefix's keys only.
    for l in &mut lines {
        for a in l.iter_mut() {
            if a == "~floodgate:*" {
                *a = "~elsewhere:*".into();
            }
        }
    }
    set_acl(&server, &lines);
    let store = RedisStore::from_url(&url(&server, "other", "pw")).unwrap();

    let e = store
        .probe()
        .await
        .expect_err("the prefix is outside the user's keys");
    assert_eq!(e.kind(), StoreErrorKind::Permission, "{e}");
    assert!(e.to_string().contains("~floodgate:*"), "{e}");
    // With the prefix the user has, the same store works.
    store
        .probe_prefix("elsewhere")
        .await
        .expect("the user's own prefix");

    let seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = seen.clone();
    let limiter = Limiter::builder(store.clone(), Gcra::new(10, Duration::from_secs(1)))
        .name("api")
        .timeout(Duration::from_secs(2))
        .on_store_failure(FailurePolicy::ReturnError)
        .failure_hook(move |event| hook_seen.lock().unwrap().push(event.kind))
        .build()
        .unwrap();
    match limiter.check("ana", 1).await {
        Err(Error::Store(e)) => {
            assert_eq!(e.kind(), StoreErrorKind::Permission, "{e}");
            assert!(
                e.to_string().contains("NOPERM") || e.to_string().contains("permission"),
                "{e}"
            );
        }
        other => panic!("expected a permission error, got {other:?}"),
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [FailureKind::Store(StoreErrorKind::Permission)]
    );

    // Under the default policy (fail open) the request is admitted, and
    // the failure is still reported as a permission error.
    let open_seen = Arc::new(Mutex::new(Vec::new()));
    let hook_seen = open_seen.clone();
    let open = Limiter::builder(store, Gcra::new(10, Duration::from_secs(1)))
        .name("open")
        .timeout(Duration::from_secs(2))
        .failure_hook(move |event| hook_seen.lock().unwrap().push(event.kind))
        .build()
        .unwrap();
    let d = open.check("ana", 1).await.unwrap();
    assert!(d.allowed() && d.is_degraded(), "{d:?}");
    assert_eq!(
        *open_seen.lock().unwrap(),
        [FailureKind::Store(StoreErrorKind::Permission)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_command_is_named() {
    let server = RedisServer::start();
    let mut lines = documented_acl("nozadd", "pw", version(&server));
    lines.push(vec!["SETUSER".into(), "nozadd".into(), "-zadd".into()]);
    set_acl(&server, &lines);
    let store = RedisStore::from_url(&url(&server, "nozadd", "pw")).unwrap();
    // The probe tries each command floodgate's code runs, and names the
    // one the user lacks.
    let e = store.probe().await.expect_err("ZADD is missing");
    assert_eq!(e.kind(), StoreErrorKind::Permission, "{e}");
    assert!(e.to_string().contains("+zadd"), "{e}");
    // A decision that needs it is a permission error.
    let log = strict(
        &store,
        "log",
        floodgate::algorithm::SlidingLog::new(3, Duration::from_secs(60)),
    );
    match log.check("ana", 1).await {
        Err(Error::Store(e)) => {
            assert_eq!(e.kind(), StoreErrorKind::Permission, "{e}");
        }
        other => panic!("expected a permission error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_permission_error() {
    let server = RedisServer::start();
    set_acl(
        &server,
        &documented_acl("floodgate", "right", version(&server)),
    );
    let store = RedisStore::from_url(&url(&server, "floodgate", "wrong")).unwrap();
    let e = store.probe().await.expect_err("wrong password");
    assert_eq!(e.kind(), StoreErrorKind::Permission, "{e}");
}
