//! Changing a running limiter's limits (`Limiter::set_algorithm`), on memory
//! and on a real Redis: the next decision is under the new limits, a
//! decision in flight keeps the limits it started with, and a key keeps its
//! counters where the documentation says it does.

mod common;

use common::RedisServer;
use floodgate::algorithm::{
    Algorithm, FixedWindow, Gcra, Limits, SlidingLog, SlidingWindow, TokenBucket,
};
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{HotKeys, Limiter};
use std::num::NonZeroUsize;
use std::time::Duration;

const MINUTE: Duration = Duration::from_secs(60);

/// Both stores: memory, and a Redis of its own (kept alive with it).
fn stores() -> Vec<(&'static str, Store, Option<RedisServer>)> {
    let server = RedisServer::start();
    let redis = RedisStore::from_url(&server.url()).expect("redis store");
    vec![
        ("memory", MemoryStore::new().into(), None),
        ("redis", redis.into(), Some(server)),
    ]
}

fn limiter<A: Algorithm>(store: &Store, alg: A, clock: &ManualClock) -> Limiter<A> {
    Limiter::builder(store.clone(), alg)
        .name("change")
        .clock(clock.clone())
        .on_store_failure(FailurePolicy::ReturnError)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("valid")
}

/// `n` admitted checks of cost 1 for `key`.
async fn spend<A: Algorithm>(l: &Limiter<A>, key: &str, n: u64) {
    for i in 0..n {
        let d = l.check(key, 1).await.expect("decided");
        assert!(d.allowed(), "check {i} of {n}: {d:?}");
    }
}

#[tokio::test]
async fn a_new_limit_applies_to_the_next_decision_and_keeps_the_count() {
    for (store_name, store, _server) in stores() {
        let clock = ManualClock::new(1_000_000);
        let l = limiter(&store, FixedWindow::new(3, MINUTE), &clock);
        spend(&l, "ana", 3).await;
        assert!(l.check("ana", 1).await.unwrap().denied(), "{store_name}");

        // Raised: the next decision is under 5, with the 3 used kept.
        l.set_algorithm(FixedWindow::new(5, MINUTE)).unwrap();
        assert_eq!(l.algorithm(), &FixedWindow::new(5, MINUTE));
        assert_eq!(l.quotas().next().unwrap().1.units, 5);
        let d = l.check("ana", 1).await.unwrap();
        assert!(d.allowed(), "{store_name}: {d:?}");
        assert_eq!((d.limit(), d.remaining()), (5, 1), "{store_name}");

        // Lowered below what was used: denied until the window ends.
        l.set_algorithm(FixedWindow::new(2, MINUTE)).unwrap();
        let d = l.check("ana", 1).await.unwrap();
        assert!(d.denied(), "{store_name}: {d:?}");
        assert_eq!((d.limit(), d.remaining()), (2, 0), "{store_name}");
        // Another key starts under the new limit.
        spend(&l, "bob", 2).await;
        assert!(l.check("bob", 1).await.unwrap().denied(), "{store_name}");
        clock.advance(MINUTE);
        spend(&l, "ana", 2).await;
    }
}

#[tokio::test]
async fn a_clone_and_the_same_limits_again() {
    let clock = ManualClock::new(0);
    let l = limiter(
        &MemoryStore::new().into(),
        FixedWindow::new(1, MINUTE),
        &clock,
    );
    let clone = l.clone();
    l.set_algorithm(FixedWindow::new(2, MINUTE)).unwrap();
    assert_eq!(
        clone.check("k", 1).await.unwrap().limit(),
        2,
        "clones share"
    );
    assert_eq!(l.versions_kept(), 2);
    // The limits it has already: nothing changes, nothing more is kept.
    clone.set_algorithm(FixedWindow::new(2, MINUTE)).unwrap();
    assert_eq!(l.versions_kept(), 2);
}

#[tokio::test]
async fn counters_per_algorithm_as_documented() {
    for (store_name, store, _server) in stores() {
        let clock = ManualClock::new(1_000_000);
        let at = |what: &str| format!("{store_name}: {what}");

        // Fixed and sliding window: a new window starts the count over.
        let fw = limiter(&store, FixedWindow::new(4, MINUTE), &clock);
        spend(&fw, "k", 3).await;
        fw.set_algorithm(FixedWindow::new(4, 2 * MINUTE)).unwrap();
        let d = fw.check("k", 0).await.unwrap();
        assert_eq!(d.remaining(), 4, "{}", at("fixed window, new window"));

        let sw = Limiter::builder(store.clone(), SlidingWindow::new(4, MINUTE))
            .name("sw")
            .clock(clock.clone())
            .build()
            .unwrap();
        spend(&sw, "k", 3).await;
        sw.set_algorithm(SlidingWindow::new(8, MINUTE)).unwrap();
        assert_eq!(
            sw.check("k", 0).await.unwrap().remaining(),
            5,
            "{}",
            at("sw, limit")
        );
        sw.set_algorithm(SlidingWindow::new(8, 3 * MINUTE)).unwrap();
        assert_eq!(
            sw.check("k", 0).await.unwrap().remaining(),
            8,
            "{}",
            at("sw, window")
        );

        // Sliding log: the same entries, counted over the new window.
        let sl = Limiter::builder(store.clone(), SlidingLog::new(5, MINUTE))
            .name("sl")
            .clock(clock.clone())
            .build()
            .unwrap();
        spend(&sl, "k", 2).await;
        clock.advance(Duration::from_secs(40));
        spend(&sl, "k", 1).await;
        sl.set_algorithm(SlidingLog::new(6, MINUTE)).unwrap();
        assert_eq!(
            sl.check("k", 0).await.unwrap().remaining(),
            3,
            "{}",
            at("log, limit")
        );
        // 30 s: only the newest entry is inside it.
        sl.set_algorithm(SlidingLog::new(6, Duration::from_secs(30)))
            .unwrap();
        assert_eq!(
            sl.check("k", 0).await.unwrap().remaining(),
            5,
            "{}",
            at("log, window")
        );

        // Token bucket: a new capacity keeps the units used; a new rate
        // keeps the backlog's time (5 used at 1/s are 10 at 2/s).
        let tb = Limiter::builder(store.clone(), TokenBucket::new(10, 1.0))
            .name("tb")
            .clock(clock.clone())
            .build()
            .unwrap();
        spend(&tb, "k", 5).await;
        tb.set_algorithm(TokenBucket::new(20, 1.0)).unwrap();
        assert_eq!(
            tb.check("k", 0).await.unwrap().remaining(),
            15,
            "{}",
            at("tb, capacity")
        );
        tb.set_algorithm(TokenBucket::new(20, 2.0)).unwrap();
        assert_eq!(
            tb.check("k", 0).await.unwrap().remaining(),
            10,
            "{}",
            at("tb, rate")
        );

        // GCRA: a new burst keeps the units used.
        let g = Limiter::builder(store.clone(), Gcra::new(10, MINUTE))
            .name("gcra")
            .clock(clock.clone())
            .build()
            .unwrap();
        spend(&g, "k", 4).await;
        g.set_algorithm(Gcra::new(10, MINUTE).try_burst(20).unwrap())
            .unwrap();
        assert_eq!(
            g.check("k", 0).await.unwrap().remaining(),
            16,
            "{}",
            at("gcra, burst")
        );
    }
}

#[tokio::test]
async fn another_algorithm_starts_empty_and_going_back_finds_the_count() {
    for (store_name, store, _server) in stores() {
        let clock = ManualClock::new(1_000_000);
        let fw = Limits::new("api", FixedWindow::new(3, MINUTE));
        let l = limiter(&store, fw.clone(), &clock);
        spend(&l, "k", 3).await;
        assert!(l.check("k", 1).await.unwrap().denied(), "{store_name}");

        l.set_algorithm(Limits::new("api", Gcra::new(3, MINUTE)))
            .unwrap();
        spend(&l, "k", 3).await;

        l.set_algorithm(fw).unwrap();
        assert!(
            l.check("k", 1).await.unwrap().denied(),
            "{store_name}: back"
        );
        // A limit of another name is another state too.
        l.set_algorithm(Limits::new("web", FixedWindow::new(3, MINUTE)))
            .unwrap();
        spend(&l, "k", 3).await;
    }
}

#[tokio::test]
async fn an_in_flight_decision_keeps_its_limits_on_redis() {
    let server = RedisServer::start();
    let store: Store = RedisStore::from_url(&server.url()).unwrap().into();
    let clock = ManualClock::new(1_000_000);
    let two = Limits::new("a", FixedWindow::new(10, MINUTE))
        .try_with("b", Gcra::new(20, MINUTE))
        .unwrap();
    let l = limiter(&store, two, &clock);
    spend(&l, "warm", 1).await; // The library is loaded.

    server.pause();
    let mut in_flight = Box::pin(l.check_all("k", 1));
    // Polled: it has read its limits and waits for Redis.
    let waited = tokio::time::timeout(Duration::from_millis(100), &mut in_flight).await;
    assert!(waited.is_err(), "Redis is paused: the decision waits");

    let changed = Limits::new("a", FixedWindow::new(30, MINUTE))
        .try_with("b", Gcra::new(40, MINUTE))
        .unwrap();
    l.set_algorithm(changed).unwrap();
    server.resume();

    let d = in_flight.await.unwrap();
    let limits: Vec<_> = d.each().iter().map(|e| e.decision().limit()).collect();
    assert_eq!(
        limits,
        [10, 20],
        "decided and reported under its own limits"
    );
    let units: Vec<_> = d.each().iter().map(|e| e.quota().units).collect();
    assert_eq!(units, [10, 20]);
    assert_eq!(d.overall().remaining(), 9);

    let next = l.check_all("k", 1).await.unwrap();
    let limits: Vec<_> = next.each().iter().map(|e| e.decision().limit()).collect();
    assert_eq!(
        limits,
        [30, 40],
        "the next decision is under the new limits"
    );
    assert_eq!(next.each()[0].decision().remaining(), 28, "counters kept");
}

#[test]
fn decisions_on_memory_see_one_version_whole_while_it_changes() {
    let versions = [(5, 7), (50, 70)];
    let make = |(a, b): (u64, u64)| {
        Limits::new("a", FixedWindow::new(a, MINUTE))
            .try_with("b", TokenBucket::new(b, 1.0))
            .unwrap()
    };
    let clock = ManualClock::new(0);
    let l = limiter(&MemoryStore::new().into(), make(versions[0]), &clock);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=2_000 {
                l.set_algorithm(make(versions[i % 2])).unwrap();
            }
        });
        for t in 0..2 {
            let l = &l;
            s.spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                for i in 0..20_000 {
                    let d = runtime
                        .block_on(l.check_all(&format!("k{t}-{}", i % 64), 0))
                        .unwrap();
                    let seen = (d.each()[0].quota().units, d.each()[1].quota().units);
                    assert!(versions.contains(&seen), "a torn version: {seen:?}");
                    let limits = (
                        d.each()[0].decision().limit(),
                        d.each()[1].decision().limit(),
                    );
                    assert_eq!(limits, seen, "numbers and quotas of one version");
                }
            });
        }
    });
    // 2 000 changes between two limits: each change is a version kept.
    assert_eq!(l.versions_kept(), 2_001);
}

#[tokio::test]
async fn the_deny_cache_forgets_denials_made_under_the_old_limits() {
    let clock = ManualClock::new(1_000_000);
    let l = Limiter::builder(MemoryStore::new(), FixedWindow::new(2, MINUTE))
        .clock(clock.clone())
        .deny_cache(NonZeroUsize::new(100).unwrap())
        .build()
        .unwrap();
    spend(&l, "k", 2).await;
    assert!(l.check("k", 1).await.unwrap().denied());
    // Remembered: answered without the store now.
    assert!(l.check("k", 1).await.unwrap().denied());
    l.set_algorithm(FixedWindow::new(4, MINUTE)).unwrap();
    let d = l.check("k", 1).await.unwrap();
    assert!(
        d.allowed(),
        "a denial under 2 is an admission under 4: {d:?}"
    );
    assert_eq!(d.remaining(), 1);
}

#[tokio::test]
async fn hot_keys_take_slices_of_the_new_limits() {
    let clock = ManualClock::new(1_000_000);
    let l = Limiter::builder(MemoryStore::new(), FixedWindow::new(100, MINUTE))
        .clock(clock.clone())
        .hot_keys(HotKeys::new(1).threshold(1))
        .build()
        .unwrap();
    // Hot at once: decided from a slice of 10.
    spend(&l, "hot", 5).await;
    l.set_algorithm(FixedWindow::new(1000, MINUTE)).unwrap();
    let d = l.check("hot", 1).await.unwrap();
    assert_eq!(d.limit(), 1000, "{d:?}");
    // The store counts 11 (5 decided, 6 left of the old slice: not
    // given back, a window's units expire with it), and now the request
    // and a slice of the new limit's size (100), which this server holds:
    // 1000 - 11 - 1 - 100 left in the store, + 100 held.
    assert_eq!(d.remaining(), 1000 - 12, "{d:?}");
    for _ in 0..150 {
        assert_eq!(l.check("hot", 1).await.unwrap().limit(), 1000);
    }
}

#[tokio::test]
async fn limits_build_refuses_are_refused_with_the_same_error() {
    let clock = ManualClock::new(0);
    let build = |alg: Limits| {
        Limiter::builder(MemoryStore::new(), alg)
            .clock(clock.clone())
            .hot_keys(HotKeys::new(4))
            .build()
    };
    let ok = Limits::new("a", FixedWindow::new(1000, MINUTE));
    let l = build(ok.clone()).unwrap();
    for bad in [
        Limits::new("a", FixedWindow::new(10, MINUTE)), // too small to share
        Limits::new("a", SlidingLog::new(1000, MINUTE)), // a log is not shared
        // A limit in shadow mode is decided by the store on every request.
        Limits::new("a", FixedWindow::new(1000, MINUTE))
            .shadow("a")
            .unwrap(),
    ] {
        let at_build = build(bad.clone()).unwrap_err();
        let at_change = l.set_algorithm(bad).unwrap_err();
        assert_eq!(at_change, at_build);
        assert_eq!(at_change.field(), "hot_keys");
    }
    assert_eq!(l.algorithm(), &ok, "a refused change changes nothing");
    assert_eq!(l.versions_kept(), 1);
}

#[tokio::test]
async fn a_change_into_and_out_of_shadow_mode() {
    let clock = ManualClock::new(0);
    for (label, store, _server) in stores() {
        let strict = Limits::new("strict", FixedWindow::new(1, MINUTE));
        let l = limiter(&store, strict.clone(), &clock);
        assert!(l.check("k", 1).await.unwrap().allowed(), "{label}");
        assert!(l.check("k", 1).await.unwrap().denied(), "{label}");
        // In shadow mode: decided and charged, never denying.
        l.set_algorithm(strict.clone().shadow("strict").unwrap())
            .unwrap();
        let all = l.check_all("k", 1).await.unwrap();
        assert!(all.overall().allowed(), "{label}: shadowed");
        assert!(all.each()[0].decision().denied(), "{label}: its own");
        // Out of it again: the count was kept, and denies.
        l.set_algorithm(strict).unwrap();
        assert!(l.check("k", 1).await.unwrap().denied(), "{label}");
    }
}

#[tokio::test]
async fn the_layer_reports_a_request_in_flight_under_its_own_limits() {
    use floodgate::{key::Header, layer::RateLimitLayer};
    let server = RedisServer::start();
    let store: Store = RedisStore::from_url(&server.url()).unwrap().into();
    let clock = ManualClock::new(1_000_000);
    let l = limiter(&store, FixedWindow::new(10, MINUTE), &clock);
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "hi" }))
        .layer(RateLimitLayer::new(
            l.clone(),
            Header::new(http::HeaderName::from_static("x-key")),
        ));
    let url = common::http::serve(app).await;
    let client = reqwest::Client::new();
    let get = |key: &'static str| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let r = client.get(&url).header("x-key", key).send().await.unwrap();
            let field = |name: &str| r.headers()[name].to_str().unwrap().to_owned();
            (
                r.status().as_u16(),
                field("ratelimit-policy"),
                field("ratelimit"),
            )
        }
    };
    let (status, policy, _) = get("k").await;
    assert_eq!((status, policy.contains("q=10")), (200, true), "{policy}");

    server.pause();
    let in_flight = tokio::spawn(get("k"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    l.set_algorithm(FixedWindow::new(30, MINUTE)).unwrap();
    server.resume();

    let (status, policy, limit) = in_flight.await.unwrap();
    assert_eq!(status, 200);
    assert!(policy.contains("q=10"), "started under 10: {policy}");
    assert!(limit.contains("r=8"), "{limit}");
    let (_, policy, limit) = get("k").await;
    assert!(policy.contains("q=30"), "the next one under 30: {policy}");
    assert!(limit.contains("r=27"), "counters kept: {limit}");
}
