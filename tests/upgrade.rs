//! A rolling upgrade: app servers of the previous release and of this one
//! decide on the same keys of one Redis at the same time. The previous
//! release's function library is a fixture (`tests/fixtures/previous_library.lua`,
//! built from commit 10a7f7a); each version's library has a name of its own
//! (`floodgate_` and its code's hash), so both are loaded side by side, and
//! they share the state format: no error, no reset (the two together admit
//! exactly what one version alone would), no fail-open.
//!
//! When a later change alters what floodgate keeps in Redis, this test is
//! where it shows: refresh the fixture from the release being replaced.

mod common;

use common::{RedisServer, T0};
use floodgate::algorithm::{Algorithm, FixedWindow, Gcra};
use floodgate::clock::ManualClock;
use floodgate::failure::FailurePolicy;
use floodgate::store::RedisStore;
use floodgate::Limiter;
use std::time::Duration;

const PREVIOUS: &str = include_str!("fixtures/previous_library.lua");

/// The previous release's library, loaded: its function's name.
fn load_previous(server: &RedisServer) -> String {
    let name = PREVIOUS
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("#!lua name="))
        .expect("a library header")
        .to_owned();
    let loaded: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(PREVIOUS)
        .query(&mut server.conn())
        .expect("the previous library loads");
    assert_eq!(loaded, name);
    name
}

/// One decision by an app server of the previous release: its `FCALL`, as
/// that release's client sent it (one key: now, mode, cost, then the
/// algorithm's tag and two parameters). Whether it admitted.
fn previous_check(
    server: &RedisServer,
    function: &str,
    key: &str,
    now: u64,
    params: &[String],
) -> bool {
    let mut cmd = redis::cmd("FCALL");
    cmd.arg(function)
        .arg(1)
        .arg(key)
        .arg(now)
        .arg("check")
        .arg(1);
    for p in params {
        cmd.arg(p);
    }
    let reply: Vec<i64> = cmd
        .query(&mut server.conn())
        .expect("the previous release decides");
    reply[0] == 1
}

/// Alternate `calls` checks of `key` between this release's limiter and
/// the previous release at `now`: how many were admitted.
async fn alternate<A: Algorithm>(
    server: &RedisServer,
    previous: &str,
    limiter: &Limiter<A>,
    (key, stored): (&str, &str),
    now: u64,
    params: &[String],
    calls: usize,
) -> usize {
    let mut admitted = 0;
    for i in 0..calls {
        let allowed = if i % 2 == 0 {
            let d = limiter.check(key, 1).await.expect("this release decides");
            assert!(!d.is_degraded(), "{d:?}");
            d.allowed()
        } else {
            tokio::task::block_in_place(|| previous_check(server, previous, stored, now, params))
        };
        admitted += usize::from(allowed);
    }
    admitted
}

fn limiter<A: Algorithm>(server: &RedisServer, alg: A, clock: &ManualClock) -> Limiter<A> {
    Limiter::builder(RedisStore::from_url(&server.url()).unwrap(), alg)
        .prefix("up")
        .name("api")
        .clock(clock.clone())
        .timeout(Duration::from_secs(2))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_releases_decide_on_the_same_keys() {
    let server = RedisServer::start();
    let previous = load_previous(&server);
    let clock = ManualClock::new(T0);

    // GCRA, 5 a second with a burst of 5: the code that changed between
    // the two releases.
    let gcra = limiter(&server, Gcra::new(5, Duration::from_secs(1)), &clock);
    let params = ["gcra".to_owned(), "5".to_owned(), "200".to_owned()];
    let key = ("ana", "up:api:gcra:{ana}");
    assert_eq!(
        alternate(&server, &previous, &gcra, key, T0, &params, 12).await,
        5
    );
    clock.advance(Duration::from_millis(200));
    assert_eq!(
        alternate(&server, &previous, &gcra, key, T0 + 200, &params, 4).await,
        1
    );
    clock.advance(Duration::from_millis(400));
    assert_eq!(
        alternate(&server, &previous, &gcra, key, T0 + 600, &params, 6).await,
        2
    );

    // Fixed window, 4 a minute: across a window's end.
    let fixed = limiter(
        &server,
        FixedWindow::new(4, Duration::from_secs(60)),
        &clock,
    );
    let params = ["fw".to_owned(), "4".to_owned(), "60000".to_owned()];
    let key = ("bob", "up:api:fw:{bob}");
    let now = T0 + 600;
    assert_eq!(
        alternate(&server, &previous, &fixed, key, now, &params, 10).await,
        4
    );
    let next_window = (now / 60_000 + 1) * 60_000;
    clock.advance(Duration::from_millis(next_window - now));
    assert_eq!(
        alternate(&server, &previous, &fixed, key, next_window, &params, 10).await,
        4
    );

    // Both libraries are there, each under its own name.
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .query(&mut server.conn())
        .unwrap();
    assert_eq!(libraries.len(), 2, "{libraries:?}");
}
