//! Reservations (`Limiter::reserve`, `until_ready`): four app servers
//! (four stores on one Redis, one Cluster, or four limiters on one memory
//! store) booking one key at once, on a manual clock. The admission times
//! (the decision's time plus its wait) follow the algorithm's schedule
//! exactly, no wait exceeds the longest asked, and a reservation given
//! back (cancelled, or its `until_ready` dropped) frees its place.

mod common;

use common::cluster::RedisCluster;
use common::{runtime, RedisServer};
use floodgate::algorithm::{Algorithm, FixedWindow, Gcra, LeakyBucket, Limits, TokenBucket};
use floodgate::clock::{Clock, ManualClock};
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::{MemoryStore, RedisClusterStore, RedisStore, Store};
use floodgate::{HotKeys, Limiter};
use std::time::Duration;

const T0: u64 = 1_700_000_000_000;
const SERVERS: usize = 4;
const PER_SERVER: usize = 10;

/// A limiter of `alg` over `store` on `clock`, strict about store errors.
fn limiter<A: Algorithm>(store: impl Into<Store>, alg: A, clock: &ManualClock) -> Limiter<A> {
    Limiter::builder(store, alg)
        .prefix("reserve")
        .clock(clock.clone())
        .timeout(Duration::from_secs(10))
        .on_store_failure(FailurePolicy::ReturnError)
        .circuit_breaker(CircuitBreaker::disabled())
        .build()
        .unwrap()
}

/// Each server's limiter books `PER_SERVER` reservations of `cost` on one
/// key at once, at the clock's time; returns every granted one's
/// admission time (ms), sorted, and how many were denied. Checks that no
/// wait exceeds `max_wait` and that a denial says when to come back.
async fn book_all<A: Algorithm>(
    servers: &[Limiter<A>],
    clock: &ManualClock,
    cost: u64,
    max_wait: Duration,
) -> (Vec<u64>, usize) {
    let now = clock.now_ms();
    let mut tasks = Vec::new();
    for limiter in servers {
        let limiter = limiter.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for _ in 0..PER_SERVER {
                let r = limiter.reserve("shared", cost, max_wait).await.unwrap();
                out.push(*r.decision());
            }
            out
        }));
    }
    let (mut admitted, mut denied) = (Vec::new(), 0);
    for t in tasks {
        for d in t.await.unwrap() {
            if d.allowed() {
                assert!(
                    d.delay() <= max_wait,
                    "waited {:?} > {max_wait:?}",
                    d.delay()
                );
                admitted.push(now + d.delay().as_millis() as u64);
            } else {
                assert!(d.retry_after().unwrap() > Duration::ZERO, "{d:?}");
                denied += 1;
            }
        }
    }
    admitted.sort_unstable();
    (admitted, denied)
}

/// Checks `times` against the schedule of a virtual-schedule limit from
/// rest at `T0`: `burst` units at once, then one every `interval_ms`, while
/// within `max_wait_ms` (each time as the decisions say it, rounded up to
/// the ms: within 1 ms of the exact one). Returns how many that is.
fn follows_schedule(times: &[u64], burst: u64, interval_ms: f64, max_wait_ms: u64) -> usize {
    let mut expected = vec![0.0; burst as usize];
    let mut k = 1.0;
    while k * interval_ms <= max_wait_ms as f64 + 1e-6 {
        expected.push(k * interval_ms);
        k += 1.0;
    }
    assert_eq!(
        times.len(),
        expected.len().min(SERVERS * PER_SERVER),
        "{times:?}"
    );
    for (t, e) in times.iter().zip(&expected) {
        let at = (t - T0) as f64;
        assert!(
            at >= *e - 1e-6 && at <= e + 1.0,
            "{at} ms, not {e}: {times:?}"
        );
    }
    times.len()
}

/// Every pair of admissions (sorted times, cost 1 each): the units in
/// `[a_i, a_j]` are at most `burst` + what the rate adds in between (1 ms
/// of slack: times are rounded up to the ms).
fn conforms(times: &[u64], burst: u64, interval_ms: f64) {
    for i in 0..times.len() {
        for j in i..times.len() {
            let units = (j - i + 1) as f64;
            let span = (times[j] - times[i]) as f64 + 1.0;
            assert!(
                units <= burst as f64 + (span / interval_ms).floor(),
                "{units} admitted in {span} ms: {times:?}"
            );
        }
    }
}

/// The four "servers": four stores on one Redis, or four limiters on one
/// memory store.
enum Stores {
    Redis(RedisServer),
    Cluster(std::sync::Arc<RedisCluster>),
    Memory(MemoryStore),
}

impl Stores {
    fn limiters<A: Algorithm>(&self, alg: A, clock: &ManualClock) -> Vec<Limiter<A>> {
        (0..SERVERS)
            .map(|_| match self {
                Stores::Redis(r) => {
                    limiter(RedisStore::from_url(&r.url()).unwrap(), alg.clone(), clock)
                }
                Stores::Cluster(c) => limiter(
                    RedisClusterStore::from_nodes(c.urls()).unwrap(),
                    alg.clone(),
                    clock,
                ),
                Stores::Memory(m) => limiter(m.clone(), alg.clone(), clock),
            })
            .collect()
    }
}

fn on_each_store(test: impl Fn(&Stores)) {
    test(&Stores::Memory(MemoryStore::new()));
    test(&Stores::Redis(RedisServer::start()));
    test(&Stores::Cluster(RedisCluster::shared()));
}

#[test]
fn gcra_reservations_of_four_servers_follow_its_schedule_exactly() {
    on_each_store(|stores| {
        runtime().block_on(async {
            // 10 a second (one every 100 ms), 3 at once.
            let clock = ManualClock::new(T0);
            let gcra = Gcra::new(10, Duration::from_secs(1)).try_burst(3).unwrap();
            let servers = stores.limiters(gcra, &clock);
            let max_wait = Duration::from_secs(2);
            let (times, denied) = book_all(&servers, &clock, 1, max_wait).await;
            // 3 now, then one every 100 ms up to 2 s: 23 of the 40.
            assert_eq!(follows_schedule(&times, 3, 100.0, 2000), 23);
            assert_eq!(denied, 40 - 23);
            // Time passes; more bookings: the whole run keeps to the rate.
            let mut all = times;
            for step in [250, 1000, 30] {
                clock.advance(Duration::from_millis(step));
                let (times, _) = book_all(&servers, &clock, 1, max_wait).await;
                all.extend(times);
            }
            all.sort_unstable();
            conforms(&all, 3, 100.0);
        });
    });
}

#[test]
fn token_bucket_reservations_of_four_servers_follow_its_schedule_exactly() {
    on_each_store(|stores| {
        runtime().block_on(async {
            // 5 tokens, 3 a second: one every 333.3 ms.
            let clock = ManualClock::new(T0);
            let servers = stores.limiters(TokenBucket::new(5, 3.0), &clock);
            let max_wait = Duration::from_secs(5);
            let (times, denied) = book_all(&servers, &clock, 1, max_wait).await;
            // 5 now, then one every 333.3 ms up to 5 s: 20 of the 40.
            assert_eq!(follows_schedule(&times, 5, 1000.0 / 3.0, 5000), 20);
            assert_eq!(denied, 20);
            conforms(&times, 5, 1000.0 / 3.0);
        });
    });
}

#[test]
fn a_leaky_bucket_grants_a_reservation_only_when_its_delay_fits() {
    on_each_store(|stores| {
        runtime().block_on(async {
            // A queue of 10 draining 10 a second: the n-th waits (n-1) × 100 ms.
            let clock = ManualClock::new(T0);
            let servers = stores.limiters(LeakyBucket::new(10, 10.0), &clock);
            let (times, denied) = book_all(&servers, &clock, 1, Duration::from_millis(450)).await;
            // Delays 0, 100, ..., 400 fit; the queue has room for more, but
            // their delay would not fit.
            let expected: Vec<u64> = (0..5).map(|k| T0 + 100 * k).collect();
            assert_eq!(times, expected);
            assert_eq!(denied, 35);
            // A check still queues up to the capacity (its delay unbounded).
            let d = servers[0].check("shared", 1).await.unwrap();
            assert!(d.allowed());
            assert_eq!(d.delay(), Duration::from_millis(500));
        });
    });
}

#[test]
fn windows_book_nothing_ahead_and_neither_do_limits_holding_one() {
    on_each_store(|stores| {
        runtime().block_on(async {
            let clock = ManualClock::new(T0);
            let window = FixedWindow::new(5, Duration::from_secs(1));
            let servers = stores.limiters(window, &clock);
            let (times, denied) = book_all(&servers, &clock, 1, Duration::from_secs(60)).await;
            assert_eq!(times, vec![T0; 5], "as checks, at once");
            assert_eq!(denied, 35);
            // GCRA with a window: the window keeps the whole plan from
            // booking ahead.
            let limits = Limits::new("rate", Gcra::new(1, Duration::from_secs(1)))
                .try_with("day", FixedWindow::new(100, Duration::from_secs(86_400)))
                .unwrap();
            let mixed = stores.limiters(limits, &clock);
            let first = mixed[0]
                .reserve("m", 1, Duration::from_secs(60))
                .await
                .unwrap();
            assert!(first.is_granted());
            let second = mixed[1]
                .reserve("m", 1, Duration::from_secs(60))
                .await
                .unwrap();
            assert!(!second.is_granted(), "{:?}", second.decision());
        });
    });
}

#[test]
fn several_limits_are_booked_at_the_longest_wait_and_charged_from_then() {
    on_each_store(|stores| {
        runtime().block_on(async {
            let clock = ManualClock::new(T0);
            // 2 a second (500 ms apart, no burst) and 20 a minute in
            // bursts of 2.
            let fast = Gcra::new(2, Duration::from_secs(1)).try_burst(1).unwrap();
            let limits = Limits::new("fast", fast)
                .try_with(
                    "slow",
                    Gcra::new(20, Duration::from_secs(60)).try_burst(2).unwrap(),
                )
                .unwrap();
            let servers = stores.limiters(limits, &clock);
            let wait = Duration::from_secs(30);
            let mut times = Vec::new();
            for i in 0..6 {
                let r = servers[i % SERVERS].reserve("u", 1, wait).await.unwrap();
                assert!(r.is_granted());
                times.push(r.wait().as_millis() as u64);
            }
            // "slow" spaces them 3 s apart after its burst of 2, and "fast"
            // 500 ms: the second waits for "fast", the rest for "slow".
            assert_eq!(times, [0, 500, 3000, 6000, 9000, 12000]);
            // Each limit's own schedule holds at the booked times.
            conforms(&times, 2, 3000.0);
            conforms(&times, 1, 500.0);
        });
    });
}

#[test]
fn a_cancelled_reservation_and_a_dropped_wait_give_their_place_back() {
    on_each_store(|stores| {
        runtime().block_on(async {
            let clock = ManualClock::new(T0);
            let gcra = Gcra::new(10, Duration::from_secs(1)).try_burst(1).unwrap();
            let servers = stores.limiters(gcra, &clock);
            let wait = Duration::from_secs(1);
            let first = servers[0].reserve("k", 1, wait).await.unwrap();
            assert_eq!(first.wait(), Duration::ZERO);
            let second = servers[1].reserve("k", 1, wait).await.unwrap();
            assert_eq!(second.wait(), Duration::from_millis(100));
            second.cancel().await.unwrap();
            let third = servers[2].reserve("k", 1, wait).await.unwrap();
            assert_eq!(
                third.wait(),
                Duration::from_millis(100),
                "the cancelled place"
            );
            // until_ready waits on Tokio's clock for 200 ms; given up
            // after 20 ms, its reservation goes back.
            let gave_up = tokio::time::timeout(
                Duration::from_millis(20),
                servers[3].until_ready("k", 1, wait),
            )
            .await;
            assert!(gave_up.is_err(), "it was still waiting");
            common::http::eventually(async || {
                let r = servers[0].reserve("k", 0, wait).await.unwrap();
                r.decision().reset_after() == Duration::from_millis(200)
            })
            .await;
            let fourth = servers[0].reserve("k", 1, wait).await.unwrap();
            assert_eq!(
                fourth.wait(),
                Duration::from_millis(200),
                "the dropped wait's place"
            );
            // Waited out: the decision after the wait.
            let started = std::time::Instant::now();
            let d = servers[1].until_ready("k", 1, wait).await.unwrap();
            assert!(d.allowed());
            assert_eq!(d.delay(), Duration::from_millis(300));
            assert!(started.elapsed() >= Duration::from_millis(300));
        });
    });
}

#[test]
fn reservations_with_hot_keys_are_booked_after_every_servers_slices() {
    on_each_store(|stores| {
        runtime().block_on(async {
            let clock = ManualClock::new(T0);
            // 800 a second, one every 1.25 ms: slices of 20 for 4 servers.
            let gcra = Gcra::new(800, Duration::from_secs(1));
            let servers: Vec<_> = (0..SERVERS)
                .map(|_| {
                    let store: Store = match stores {
                        Stores::Redis(r) => RedisStore::from_url(&r.url()).unwrap().into(),
                        Stores::Cluster(c) => {
                            RedisClusterStore::from_nodes(c.urls()).unwrap().into()
                        }
                        Stores::Memory(m) => m.clone().into(),
                    };
                    Limiter::builder(store, gcra)
                        .prefix("reserve-hot")
                        .clock(clock.clone())
                        .timeout(Duration::from_secs(10))
                        .on_store_failure(FailurePolicy::ReturnError)
                        .hot_keys(HotKeys::new(SERVERS as u32).threshold(1))
                        .build()
                        .unwrap()
                })
                .collect();
            // Checks make the key hot (each server takes slices) and spend
            // the burst.
            let mut now = 0;
            for limiter in &servers {
                for _ in 0..250 {
                    now += u64::from(limiter.check("shared", 1).await.unwrap().allowed());
                }
            }
            let (mut times, _) = book_all(&servers, &clock, 1, Duration::from_secs(1)).await;
            // The burst is spent: every reservation waits.
            assert!(
                now > 0 && !times.is_empty() && times[0] > T0,
                "{now} {times:?}"
            );
            // Admitted by checks at T0 (from the store or a slice): at most
            // the burst, and the reservations come after all of them.
            times.extend(std::iter::repeat_n(T0, now as usize));
            times.sort_unstable();
            conforms(&times, 800, 1.25);
        });
    });
}

#[test]
fn partial_grants_of_four_servers_add_up_to_the_limit_and_never_more() {
    on_each_store(|stores| {
        runtime().block_on(async {
            let clock = ManualClock::new(T0);
            let servers = stores.limiters(TokenBucket::new(100, 1.0), &clock);
            let mut tasks = Vec::new();
            for limiter in servers {
                tasks.push(tokio::spawn(async move {
                    let mut granted = 0;
                    for _ in 0..10 {
                        granted += limiter.check_at_most("batch", 7).await.unwrap().granted();
                    }
                    granted
                }));
            }
            let mut total = 0;
            for t in tasks {
                total += t.await.unwrap();
            }
            // 4 × 10 asks of 7 = 280 wanted; the bucket holds 100, and no
            // time passes: exactly 100 granted, however they interleave
            // (an ask that finds 3 left is granted 3).
            assert_eq!(total, 100);
        });
    });
}
