//! A key that holds data floodgate did not write (a list, a hash, text, a
//! negative number), for each algorithm and the concurrency limit, on a real
//! Redis: the decision is an error of kind `ForeignData` that names the key
//! (never a Lua line number alone), and the failure policy decides; or, where
//! the algorithm reads the value as a fresh key (the guide lists which), a
//! decision no looser than a fresh key's.

mod common;

use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::concurrency::ConcurrencyLimiter;
use floodgate::failure::FailurePolicy;
use floodgate::store::{RedisStore, StoreErrorKind};
use floodgate::{Error, Limiter};
use std::time::Duration;

const LIMIT: u64 = 3;

/// What is written into the key before floodgate decides on it.
#[derive(Debug, Clone, Copy)]
enum Foreign {
    List,
    Hash,
    Text,
    Negative,
}

const ALL: [Foreign; 4] = [
    Foreign::List,
    Foreign::Hash,
    Foreign::Text,
    Foreign::Negative,
];

fn plant(server: &RedisServer, key: &str, what: Foreign) {
    let mut c = server.conn();
    let _: () = redis::cmd("DEL").arg(key).query(&mut c).unwrap();
    let _: () = match what {
        Foreign::List => redis::cmd("RPUSH").arg(key).arg("x").query(&mut c).unwrap(),
        Foreign::Hash => redis::cmd("HSET")
            .arg(key)
            .arg("f")
            .arg("v")
            .query(&mut c)
            .unwrap(),
        Foreign::Text => redis::cmd("SET").arg(key).arg("abc").query(&mut c).unwrap(),
        Foreign::Negative => redis::cmd("SET").arg(key).arg("-5").query(&mut c).unwrap(),
    };
}

/// How a decision on a planted key went.
#[derive(Debug)]
enum Seen {
    /// An error that names the key.
    Named,
    /// Decided as a fresh key would be: `LIMIT` admitted, then denied.
    Fresh,
}

/// `check` on a planted key: a `ForeignData` error naming it, or no more
/// than a fresh key's quota.
async fn decide_on<A: Algorithm>(server: &RedisServer, alg: A, tag: &str) -> Vec<(Foreign, Seen)> {
    let store = RedisStore::from_url(&server.url()).unwrap();
    let limiter = Limiter::builder(store, alg)
        .prefix("ff")
        .name("lim")
        .timeout(Duration::from_secs(2))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    let key = format!("ff:lim:{tag}:{{ana}}");
    let mut seen = Vec::new();
    for what in ALL {
        plant(server, &key, what);
        match limiter.check("ana", LIMIT).await {
            Err(Error::Store(e)) => {
                assert_eq!(e.kind(), StoreErrorKind::ForeignData, "{tag} {what:?}: {e}");
                assert!(
                    e.to_string().contains(&key),
                    "{tag} {what:?}: names the key: {e}"
                );
                seen.push((what, Seen::Named));
            }
            Ok(d) => {
                assert!(
                    d.allowed(),
                    "{tag} {what:?}: a fresh key admits its limit: {d:?}"
                );
                let next = limiter.check("ana", 1).await.unwrap();
                assert!(
                    !next.allowed(),
                    "{tag} {what:?}: looser than a fresh key: {next:?}"
                );
                seen.push((what, Seen::Fresh));
            }
            Err(e) => panic!("{tag} {what:?}: {e}"),
        }
    }
    println!("{tag}: {seen:?}");
    seen
}

fn named(seen: &[(Foreign, Seen)], what: Foreign) -> bool {
    seen.iter().any(|(w, s)| {
        std::mem::discriminant(w) == std::mem::discriminant(&what) && matches!(s, Seen::Named)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_algorithm_names_a_foreign_key_or_reads_it_as_fresh() {
    let server = RedisServer::start();
    let window = Duration::from_secs(60);
    let results = [
        (
            "fw",
            decide_on(&server, FixedWindow::new(LIMIT, window), "fw").await,
        ),
        (
            "sl",
            decide_on(&server, SlidingLog::new(LIMIT, window), "sl").await,
        ),
        (
            "sw",
            decide_on(&server, SlidingWindow::new(LIMIT, window), "sw").await,
        ),
        (
            "tb",
            decide_on(&server, TokenBucket::new(LIMIT, 0.001), "tb").await,
        ),
        (
            "lb",
            decide_on(&server, LeakyBucket::new(LIMIT, 0.001), "lb").await,
        ),
        (
            "gcra",
            decide_on(&server, Gcra::new(LIMIT, window), "gcra").await,
        ),
    ];
    // Another type than floodgate keeps is always named.
    for (tag, seen) in &results {
        assert!(named(seen, Foreign::List), "{tag}: a list is named");
        assert!(named(seen, Foreign::Hash), "{tag}: a hash is named");
    }
    // The sliding log keeps a sorted set: text is another type there.
    assert!(named(&results[1].1, Foreign::Text));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_key_of_another_type_is_named() {
    let server = RedisServer::start();
    let store = RedisStore::from_url(&server.url()).unwrap();
    let leases = ConcurrencyLimiter::builder(store, 2)
        .prefix("ff")
        .name("cc")
        .timeout(Duration::from_secs(2))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    let key = "ff:cc:cc:{ana}";
    for what in ALL {
        plant(&server, key, what);
        match leases.acquire("ana").await {
            Err(Error::Store(e)) => {
                assert_eq!(e.kind(), StoreErrorKind::ForeignData, "{what:?}: {e}");
                assert!(e.to_string().contains(key), "{what:?}: {e}");
            }
            other => panic!("{what:?}: a string or list where leases are kept: {other:?}"),
        }
    }
}
