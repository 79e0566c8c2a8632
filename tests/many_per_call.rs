//! Many decisions per call, on a real Redis and a real Cluster: requests
//! waiting at the same moment go out as one call, and decide exactly as one
//! call each would (same traffic, same clock, same order); one request's
//! denial or error neither charges nor denies its neighbours; a call never
//! carries more than the bound. Reservations ride in the same calls.
//!
//! Requests are started in order on a current-thread runtime (each spawned
//! task makes its call when first polled, before the store's own task takes
//! the queue), so the order inside a call is the order of the list.

mod common;

use common::cluster::RedisCluster;
use common::{RedisServer, T0};
use floodgate::algorithm::{FixedWindow, Gcra, SlidingLog, TokenBucket};
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::{RedisClusterStore, RedisStore, Store, StoreErrorKind};
use floodgate::{Decision, Limiter};
use proptest::prelude::*;
use std::num::NonZeroUsize;
use std::time::Duration;

fn limiter<A: floodgate::algorithm::Algorithm>(
    store: impl Into<Store>,
    alg: A,
    prefix: &str,
) -> Limiter<A> {
    Limiter::builder(store, alg)
        .prefix(prefix)
        .clock(ManualClock::new(T0))
        .timeout(Duration::from_secs(5))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap()
}

/// One request: its key, its cost, and for a reservation its longest
/// wait in ms (else a check).
type Req = (String, u64, Option<u64>);

/// A request's decision (a reservation's, granted or not).
async fn decide<A: floodgate::algorithm::Algorithm>(
    l: &Limiter<A>,
    (k, c, wait): &Req,
) -> Result<Decision, floodgate::Error> {
    match wait {
        None => l.check(k, *c).await,
        Some(ms) => {
            let r = l.reserve(k, *c, Duration::from_millis(*ms)).await?;
            Ok(*r.decision())
        }
    }
}

/// Every request started at once, in order: each one's decision (or its
/// error's kind).
async fn at_once<A: floodgate::algorithm::Algorithm>(
    limiter: &Limiter<A>,
    requests: &[Req],
) -> Vec<Result<Decision, StoreErrorKind>> {
    let tasks: Vec<_> = requests
        .iter()
        .map(|r| {
            let (l, r) = (limiter.clone(), r.clone());
            tokio::spawn(async move { decide(&l, &r).await })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap().map_err(kind));
    }
    out
}

/// The same, one call each, one after the other.
async fn one_by_one<A: floodgate::algorithm::Algorithm>(
    limiter: &Limiter<A>,
    requests: &[Req],
) -> Vec<Result<Decision, StoreErrorKind>> {
    let mut out = Vec::new();
    for r in requests {
        out.push(decide(limiter, r).await.map_err(kind));
    }
    out
}

/// The kind of a store's error.
fn kind(e: floodgate::Error) -> StoreErrorKind {
    match e {
        floodgate::Error::Store(e) => e.kind(),
        other => panic!("{other}"),
    }
}

/// `FCALL` calls Redis has run (decisions alone and many at once alike).
fn fcalls(server: &RedisServer) -> u64 {
    server.command_calls("fcall").unwrap_or(0)
}

/// At most one call's worth (32, the default bound): calls sent at once go
/// over different connections, in no set order, as separate decisions do.
/// Some are reservations of up to 3 s.
fn requests() -> impl Strategy<Value = Vec<Req>> {
    let wait = prop::option::weighted(0.3, 0..3000u64);
    prop::collection::vec((0..4u8, 0..4u64, wait), 2..=32).prop_map(|v| {
        v.into_iter()
            .map(|(k, c, w)| (format!("k{k}"), c, w))
            .collect()
    })
}

#[test]
fn many_per_call_decide_as_one_call_each_on_redis() {
    let server = RedisServer::start();
    let cases = std::sync::atomic::AtomicU64::new(0);
    common::twins::runner(100)
        .run(&requests(), |requests| {
            let case = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let joined = RedisStore::from_url(&server.url()).unwrap();
                let alone = RedisStore::builder(&server.url())
                    .max_decisions_per_call(NonZeroUsize::MIN)
                    .build()
                    .unwrap();
                let algs = (
                    TokenBucket::new(5, 1.0),
                    Gcra::new(4, Duration::from_secs(1)),
                    SlidingLog::new(6, Duration::from_secs(10)),
                );
                let a = limiter(joined.clone(), algs.0, &format!("j{case}"));
                let b = limiter(alone.clone(), algs.0, &format!("a{case}"));
                prop_assert_eq!(
                    at_once(&a, &requests).await,
                    one_by_one(&b, &requests).await
                );
                let a = limiter(joined.clone(), algs.1, &format!("j{case}"));
                let b = limiter(alone.clone(), algs.1, &format!("a{case}"));
                prop_assert_eq!(
                    at_once(&a, &requests).await,
                    one_by_one(&b, &requests).await
                );
                let a = limiter(joined, algs.2, &format!("j{case}"));
                let b = limiter(alone, algs.2, &format!("a{case}"));
                prop_assert_eq!(
                    at_once(&a, &requests).await,
                    one_by_one(&b, &requests).await
                );
                Ok(())
            })
        })
        .unwrap();
}

#[tokio::test]
async fn requests_at_once_share_calls_within_the_bound() {
    let server = RedisServer::start();
    let store = RedisStore::builder(&server.url())
        .max_decisions_per_call(NonZeroUsize::new(4).unwrap())
        .build()
        .unwrap();
    let fixed = limiter(
        store,
        FixedWindow::new(1_000, Duration::from_secs(60)),
        "bound",
    );
    // Loads the library: every later call is an FCALL.
    fixed.check("warm", 1).await.unwrap();
    let before = fcalls(&server);
    let requests: Vec<Req> = (0..40).map(|i| (format!("c{i}"), 1, None)).collect();
    let decided = at_once(&fixed, &requests).await;
    assert!(decided
        .iter()
        .all(|d| d.as_ref().is_ok_and(Decision::allowed)));
    let calls = fcalls(&server) - before;
    // 40 requests, at most 4 a call: at least 10 calls, and fewer than 40.
    assert!(
        (10..40).contains(&calls),
        "{calls} calls for 40 requests at once"
    );
}

#[tokio::test]
async fn a_denial_or_an_error_stays_with_its_request() {
    let server = RedisServer::start();
    let store = RedisStore::from_url(&server.url()).unwrap();
    let fixed = limiter(store, FixedWindow::new(3, Duration::from_secs(60)), "apart");
    fixed.check("warm", 1).await.unwrap();
    // A key holding data floodgate did not write.
    let _: () = redis::cmd("RPUSH")
        .arg("apart:default:fw:{broken}")
        .arg("x")
        .query(&mut server.conn())
        .unwrap();
    let before = fcalls(&server);
    let requests = [
        ("ana".to_owned(), 5, None),    // over the limit: denied, charges nothing
        ("broken".to_owned(), 1, None), // an error, for this request alone
        ("ana".to_owned(), 3, None),    // fits: ana's quota is untouched
        ("bob".to_owned(), 1, None),
    ];
    let decided = at_once(&fixed, &requests).await;
    assert_eq!(
        fcalls(&server) - before,
        1,
        "one call for the four: {decided:?}"
    );
    assert!(!decided[0].as_ref().unwrap().allowed());
    assert_eq!(decided[1], Err(StoreErrorKind::ForeignData));
    let ana = decided[2].as_ref().unwrap();
    assert!(ana.allowed() && ana.remaining() == 0, "{ana:?}");
    assert!(decided[3].as_ref().unwrap().allowed());
}

#[test]
fn many_per_call_decide_as_one_call_each_on_a_cluster() {
    let cluster = RedisCluster::shared();
    let cases = std::sync::atomic::AtomicU64::new(0);
    common::twins::runner(50)
        .run(&requests(), |requests| {
            let case = cases.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let joined = RedisClusterStore::from_nodes(cluster.urls()).unwrap();
                let alone = RedisClusterStore::builder(cluster.urls())
                    .max_decisions_per_call(NonZeroUsize::MIN)
                    .build()
                    .unwrap();
                let alg = Gcra::new(4, Duration::from_secs(1));
                let a = limiter(joined, alg, &format!("cj{case}"));
                let b = limiter(alone, alg, &format!("ca{case}"));
                prop_assert_eq!(
                    at_once(&a, &requests).await,
                    one_by_one(&b, &requests).await
                );
                Ok(())
            })
        })
        .unwrap();
}
