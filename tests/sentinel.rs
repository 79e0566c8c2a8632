//! Redis Sentinel, for real: a primary, a replica and three
//! `redis-server --sentinel` processes (`tests/common/sentinel.rs`; down
//! after 1 s). Decisions through a `redis+sentinel://` URL; and under load
//! (64 tasks, many keys) the primary is killed: every call answers within
//! the limiter's timeout plus a margin, by its failure policy, during the
//! gap; limiting resumes on the promoted replica by itself, within the
//! failover plus a second; afterwards the keys are read back through the
//! sentinels with a fresh limiter, and no key admitted more than its limit.
//!
//! Redis replicates asynchronously: the writes the primary acknowledged but
//! had not sent to the replica when it was killed are lost. The test counts
//! them (admissions the promoted replica does not remember) and prints the
//! count; it fails if a key admitted more than its limit.

mod common;

use common::load::Load;
use common::sentinel::SentinelSet;
use common::T0;
use floodgate::algorithm::FixedWindow;
use floodgate::clock::ManualClock;
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::{RedisStore, StoreErrorKind};
use floodgate::Limiter;
use std::time::{Duration, Instant};

/// The limiters' timeout (the default).
const TIMEOUT: Duration = Duration::from_millis(100);
/// What a loaded 2-core machine may add to it.
const MARGIN: Duration = Duration::from_millis(250);
/// Per key; a fixed window of an hour on a stopped clock never refills.
const LIMIT: u64 = 30;

fn frozen() -> FixedWindow {
    FixedWindow::new(LIMIT, Duration::from_secs(3600))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_through_the_sentinels() {
    let set = tokio::task::block_in_place(SentinelSet::start);
    let store = RedisStore::from_url(&set.url()).unwrap();
    let report = store.probe().await.expect("probe through the sentinels");
    assert_eq!(report.nodes()[0].role(), "master", "{report:?}");
    // The primary the sentinels named, as the server says it was reached.
    assert_eq!(
        report.nodes()[0].address(),
        format!("127.0.0.1:{}", set.primary_port()),
        "{report:?}"
    );
    let limiter = Limiter::builder(store, FixedWindow::new(2, Duration::from_secs(60)))
        .timeout(Duration::from_secs(2))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    assert!(limiter.check("ana", 1).await.unwrap().allowed());
    assert!(limiter.check("ana", 1).await.unwrap().allowed());
    assert!(!limiter.check("ana", 1).await.unwrap().allowed());
    // The state is on the primary the sentinels name.
    let keys: Vec<String> = set.cmd_on(set.primary_port(), &["KEYS", "floodgate:default:*"]);
    assert_eq!(keys, ["floodgate:default:fw:{ana}"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_on_the_data_nodes() {
    let set = tokio::task::block_in_place(|| SentinelSet::start_with(Some("pw")));
    RedisStore::from_url(&set.url_with_password("pw"))
        .unwrap()
        .probe()
        .await
        .expect("with the password");
    let e = RedisStore::from_url(&set.url_with_password("nope"))
        .unwrap()
        .probe()
        .await
        .unwrap_err();
    assert!(
        matches!(
            e.kind(),
            StoreErrorKind::Permission | StoreErrorKind::Unavailable
        ),
        "{e}"
    );
}

/// Sentinels with a password of their own (`requirepass` on the sentinel
/// processes): given with `sentinel_password`, the URL's password staying
/// the data nodes'. Without it, the sentinels refuse, and that is the error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_on_the_sentinels() {
    let set = tokio::task::block_in_place(|| SentinelSet::start_full(None, Some("spw")));
    let url = set.url();
    let store = RedisStore::builder(&url)
        .sentinel_password("spw")
        .build()
        .unwrap();
    store.probe().await.expect("with the sentinels' password");
    let limiter = Limiter::builder(store, frozen()).build().unwrap();
    assert!(limiter.check("k", 1).await.unwrap().allowed());
    let e = RedisStore::from_url(&url)
        .unwrap()
        .probe()
        .await
        .unwrap_err();
    assert!(
        matches!(
            e.kind(),
            StoreErrorKind::Permission | StoreErrorKind::Unavailable | StoreErrorKind::Connection
        ),
        "{e}"
    );
}

#[test]
fn malformed_sentinel_urls_name_the_field() {
    for url in [
        "redis+sentinel://127.0.0.1:26379",
        "redis+sentinel://127.0.0.1:26379/",
        "redis+sentinel://127.0.0.1/mymaster",
        "redis+sentinel://127.0.0.1:x/mymaster",
        "redis+sentinel://:26379/mymaster",
        "redis+sentinel://127.0.0.1:26379/mymaster/notadb",
    ] {
        let e = RedisStore::from_url(url).unwrap_err();
        assert_eq!(e.field(), "url", "{url}: {e}");
    }
    RedisStore::from_url("redis+sentinel://u:p@10.0.0.1:26379,10.0.0.2:26379/mymaster/2")
        .expect("a well-formed URL");
    let e = RedisStore::builder("redis://127.0.0.1:6379")
        .sentinel_password("pw")
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "sentinel_password", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_a_failover_keeps_the_limit_and_resumes_by_itself() {
    let mut set = tokio::task::block_in_place(SentinelSet::start);
    let store = RedisStore::from_url(&set.url()).unwrap();
    // What production would run: the default timeout and circuit breaker;
    // fail closed, so that degraded decisions admit nothing.
    let limiter = Limiter::builder(store.clone(), frozen())
        .prefix("failover")
        .clock(ManualClock::new(T0))
        .timeout(TIMEOUT)
        .on_store_failure(FailurePolicy::FailClosed)
        .build()
        .unwrap();
    // Enough keys that most are still filling when the primary dies.
    let keys: Vec<String> = (0..2_000).map(|i| format!("client-{i}")).collect();
    let load = Load::new(keys);
    let tasks = load.spawn(&limiter, 64);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let before = load.counts();
    let slowest_before = load.slowest();

    let killed_at = Instant::now();
    tokio::task::block_in_place(|| set.kill_primary());
    let promoted = tokio::task::block_in_place(|| set.wait_for_failover(Duration::from_secs(20)));
    let failover = killed_at.elapsed();
    let at_promotion = load.counts();
    let slowest_in_gap = load.slowest();
    // Resumes by itself: within a second of the promotion, no call is
    // degraded any more.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let resumed = load.counts();
    tokio::time::sleep(Duration::from_secs(1)).await;
    load.stop(tasks).await;
    let end = load.counts();
    let late = (end.calls - resumed.calls, end.degraded - resumed.degraded);

    let truth = Limiter::builder(RedisStore::from_url(&set.url()).unwrap(), frozen())
        .prefix("failover")
        .clock(ManualClock::new(T0))
        .timeout(Duration::from_secs(5))
        .on_store_failure(FailurePolicy::ReturnError)
        .circuit_breaker(CircuitBreaker::disabled())
        .build()
        .unwrap();
    let audit = load.check_against(&truth, LIMIT).await;
    eprintln!(
        "sentinel failover to {promoted} in {failover:?}; before the kill {before:?} \
         (slowest call {slowest_before:?}); at the promotion {at_promotion:?} (slowest call \
         {slowest_in_gap:?}); at the end {end:?}; last second {} degraded of {}; {audit:?} \
         ({} admissions forgotten by the promoted replica: lost writes)",
        late.1, late.0, audit.forgotten
    );
    assert_eq!(end.errors, 0, "errors: {:?}", load.seen.lock().unwrap());
    assert_eq!(before.degraded, 0, "degraded before the kill");
    assert!(at_promotion.degraded > 0, "the outage was not seen");
    assert!(
        slowest_in_gap <= TIMEOUT + MARGIN,
        "a call took {slowest_in_gap:?} during the failover"
    );
    assert!(
        late.0 > 100,
        "too little traffic after the failover: {late:?}"
    );
    assert_eq!(late.1, 0, "still degraded a second after the failover");
    assert!(
        audit.most_admitted <= LIMIT,
        "a key admitted more than its limit of {LIMIT}: {audit:?}"
    );
}
