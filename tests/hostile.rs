//! Hostile input gets a defined answer: a clear error or a sane decision,
//! never a panic, never corrupted state (a well-behaved key next to it keeps
//! exact counts), never unbounded memory or work.
//!
//! Through the [`Limiter`] API on both stores, and through a real axum
//! server over TCP with the layer:
//!
//! * keys of 1 MB, keys full of `{`, `}`, `%`, `#`, NUL and non-ASCII: one
//!   bounded storage key each, always inside one `{…}` hash tag (checked on
//!   the Redis key names with `KEYS *`), and distinct keys never share state;
//! * non-UTF-8 header bytes, 1 MB headers, `X-Forwarded-For` chains of
//!   100 000 entries, malformed `Forwarded` values: 400 (or the server's own
//!   431) or the last trusted proxy's bucket, in bounded time;
//! * costs of 0, over the limit and `u64::MAX` (also as the
//!   [`Cost`](floodgate::layer::Cost) extension): 0 charges nothing,
//!   anything over the limit is denied as "never fits" and charges nothing;
//! * clocks at 0, going backwards, and far in the future up to `u64::MAX`
//!   ms: decisions that still limit, or an error.

mod common;

use common::http::serve;

use axum::{routing::get, Router};
use common::RedisServer;
use floodgate::algorithm::*;
use floodgate::clock::ManualClock;
use floodgate::key::{
    from_fn, BrokenChain, ClientIp, Header, KeyExtractor, KeyRejection, ProxyHeader,
};
use floodgate::layer::{Cost, RateLimitLayer};
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{Decision, Error, Limiter};
use reqwest::StatusCode;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The limit (capacity, burst) of every algorithm here.
const LIMIT: u64 = 5;
/// A realistic instant (a window boundary).
const NOW: u64 = common::T0;

type Check = Arc<dyn Fn(String, u64) -> DecisionFuture + Send + Sync>;

type DecisionFuture = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send>>;

/// One algorithm, type-erased: builds its limiter's `check` over a store.
struct Alg {
    name: &'static str,
    build: Build,
}

type Build = Box<dyn Fn(Store, &str, &ManualClock) -> Check>;

fn alg<A: Algorithm>(name: &'static str, a: A) -> Alg {
    Alg {
        name,
        build: Box::new(move |store, prefix, clock| {
            let limiter = Limiter::builder(store, a.clone())
                .prefix(prefix)
                .clock(clock.clone())
                .build()
                .unwrap();
            Arc::new(move |key: String, cost: u64| {
                let limiter = limiter.clone();
                Box::pin(async move { limiter.check(&key, cost).await })
            })
        }),
    }
}

/// All six at limit [`LIMIT`], with a 1 s window or a 1 s full refill.
fn algorithms() -> Vec<Alg> {
    let s = Duration::from_secs(1);
    let rate = LIMIT as f64;
    vec![
        alg("fixed_window", FixedWindow::new(LIMIT, s)),
        alg("sliding_log", SlidingLog::new(LIMIT, s)),
        alg("sliding_window", SlidingWindow::new(LIMIT, s)),
        alg("token_bucket", TokenBucket::new(LIMIT, rate)),
        alg("leaky_bucket", LeakyBucket::new(LIMIT, rate)),
        alg("gcra", Gcra::new(LIMIT, s)),
    ]
}

fn redis() -> &'static RedisServer {
    static SERVER: std::sync::OnceLock<RedisServer> = std::sync::OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}

/// A memory store and a store on the shared test Redis.
fn stores() -> Vec<(&'static str, Store)> {
    vec![
        ("memory", MemoryStore::new().into()),
        (
            "redis",
            RedisStore::from_url(&redis().url()).unwrap().into(),
        ),
    ]
}

/// A namespace of its own for each use of the shared Redis.
fn prefix(test: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{test}{}", N.fetch_add(1, Ordering::Relaxed))
}

/// Charges `key` cost 1 until denied (at most `LIMIT + 3` times); returns
/// how many were admitted.
async fn drain(check: &Check, key: &str) -> u64 {
    let mut admitted = 0;
    for _ in 0..LIMIT + 3 {
        if check(key.to_owned(), 1).await.unwrap().allowed() {
            admitted += 1;
        }
    }
    admitted
}

/// The Redis keys under `prefix`.
fn redis_keys(prefix: &str) -> Vec<String> {
    redis().cmd(&["KEYS", &format!("{prefix}:*")])
}

/// A storage key is `prefix:name:tag:{…}`: exactly one `{`, one `}`, the
/// `}` last, so the whole user part is the one hash tag.
fn assert_one_hash_tag(key: &str) {
    assert_eq!(key.matches('{').count(), 1, "{key}");
    assert_eq!(key.matches('}').count(), 1, "{key}");
    assert!(key.ends_with('}'), "{key}");
    assert!(key.len() <= 64 + 64 + 8 + 130, "{} bytes: {key}", key.len());
}

// ---------------------------------------------------------------------------
// Keys through the Limiter API.

/// Keys a client could send, each of which must become its own bounded key.
fn hostile_keys() -> Vec<String> {
    let mb = 1 << 20;
    vec![
        "k".repeat(mb),
        // Differs from the one above only in its last byte.
        format!("{}x", "k".repeat(mb - 1)),
        "{".repeat(mb),
        "}{".repeat(mb / 2),
        "é".repeat(mb / 2),
        "\0".repeat(mb),
        "{".into(),
        "}".into(),
        "{}".into(),
        "}{".into(),
        "{{a}}".into(),
        "a{b}c".into(),
        // Escaped forms of the keys above must not collide with them.
        "%7B".into(),
        "%7D".into(),
        "%7B%7D".into(),
        "%257B".into(),
        String::new(),
        "#".into(),
        "%23".into(),
        " ".into(),
        "%20".into(),
        "a:b".into(),
        "\u{7f}".into(),
        "\u{10ffff}".into(),
        "k".repeat(128),
        "k".repeat(129),
    ]
}

#[tokio::test]
async fn hostile_keys_are_bounded_separate_and_exact() {
    let keys = hostile_keys();
    for (store_name, store) in stores() {
        let p = prefix("keys");
        let clock = ManualClock::new(NOW);
        // A window of an hour: nothing expires in Redis during the test, so
        // the key count below is exact.
        let check = (alg("hour", FixedWindow::new(LIMIT, Duration::from_secs(3600))).build)(
            store, &p, &clock,
        );
        for (i, key) in keys.iter().enumerate() {
            // Each key is a fresh bucket: nothing another key did counts.
            assert_eq!(
                drain(&check, key).await,
                LIMIT,
                "{store_name}: key #{i} ({} bytes)",
                key.len()
            );
            // A well-behaved neighbour is charged exactly once per check.
            let d = check("neighbour".into(), 0).await.unwrap();
            assert_eq!(d.remaining(), LIMIT - (i as u64 % LIMIT), "{store_name}");
            assert!(check("neighbour".into(), 1).await.unwrap().allowed());
            if (i as u64 % LIMIT) == LIMIT - 1 {
                // Empty now: a new window for the next round.
                clock.advance(Duration::from_secs(3600));
            }
        }
        if store_name == "redis" {
            let names = redis_keys(&p);
            // One key per hostile key, plus the neighbour: none collided.
            assert_eq!(names.len(), keys.len() + 1, "{names:?}");
            for name in &names {
                assert_one_hash_tag(name);
            }
        }
    }
}

/// Brace keys through every algorithm (each has its own key tag): the Redis
/// key names keep the user part inside one hash tag.
#[tokio::test]
async fn braces_stay_inside_one_hash_tag_for_every_algorithm() {
    let p = prefix("braces");
    let clock = ManualClock::new(NOW);
    for a in algorithms() {
        let check = (a.build)(
            RedisStore::from_url(&redis().url()).unwrap().into(),
            &p,
            &clock,
        );
        for key in ["{", "}", "}{", "{a}b{c}", "{{}}", "x{", "}x"] {
            assert!(check(key.into(), 1).await.unwrap().allowed(), "{}", a.name);
        }
    }
    let names = redis_keys(&p);
    assert_eq!(names.len(), 6 * 7, "{names:?}");
    for name in &names {
        assert_one_hash_tag(name);
        // The user part is escaped: no brace inside the tag.
        let tag = &name[name.find('{').unwrap() + 1..name.len() - 1];
        assert!(!tag.contains(['{', '}']), "{name}");
    }
}

// ---------------------------------------------------------------------------
// Costs through the Limiter API.

#[tokio::test]
async fn costs_of_zero_and_beyond_the_limit_charge_nothing() {
    for (store_name, store) in stores() {
        for a in algorithms() {
            let p = prefix("cost");
            let clock = ManualClock::new(NOW);
            let check = (a.build)(store.clone(), &p, &clock);
            let at = |what: &str| format!("{store_name} {}: {what}", a.name);
            for _ in 0..3 {
                let d = check("k".into(), 0).await.unwrap();
                assert!(d.allowed(), "{}", at("cost 0"));
                assert_eq!(d.remaining(), LIMIT, "{}", at("cost 0"));
            }
            for cost in [LIMIT + 1, 1 << 40, 1 << 53, 1 << 63, u64::MAX - 1, u64::MAX] {
                let d = check("k".into(), cost).await.unwrap();
                assert!(d.denied(), "{}", at(&format!("cost {cost}")));
                assert_eq!(d.retry_after(), None, "{}", at("a cost that never fits"));
                assert_eq!(d.remaining(), LIMIT, "{}", at("charged for a denial"));
                assert_eq!(d.limit(), LIMIT, "{}", at("limit"));
            }
            // Nothing was charged: the whole quota is still there, exactly.
            assert_eq!(drain(&check, "k").await, LIMIT, "{}", at("after"));
            let d = check("k".into(), 1).await.unwrap();
            assert!(d.denied() && d.retry_after().is_some(), "{}", at("full"));
            // Over the limit is still "never", even when full.
            let d = check("k".into(), u64::MAX).await.unwrap();
            assert_eq!(d.retry_after(), None, "{}", at("full, u64::MAX"));
        }
    }
}

// ---------------------------------------------------------------------------
// Clocks.

#[tokio::test]
async fn a_clock_at_zero_is_an_ordinary_instant() {
    for (store_name, store) in stores() {
        for a in algorithms() {
            let clock = ManualClock::new(0);
            let check = (a.build)(store.clone(), &prefix("zero"), &clock);
            let at = format!("{store_name} {}", a.name);
            assert_eq!(drain(&check, "k").await, LIMIT, "{at}");
            let d = check("k".into(), 1).await.unwrap();
            let retry = d.retry_after().expect("a retry time");
            // At most two windows (the sliding window's previous one).
            assert!(retry <= Duration::from_secs(2), "{at}: retry {retry:?}");
            clock.advance(Duration::from_secs(2));
            assert_eq!(drain(&check, "k").await, LIMIT, "{at}: after 2 s");
        }
    }
}

#[test]
fn manual_clock_arithmetic_saturates() {
    use floodgate::clock::Clock;
    let clock = ManualClock::new(u64::MAX - 5);
    clock.advance(Duration::from_millis(10));
    assert_eq!(clock.now_ms(), u64::MAX);
    clock.advance(Duration::MAX);
    assert_eq!(clock.now_ms(), u64::MAX);
    clock.set(0);
    clock.advance(Duration::MAX);
    assert_eq!(clock.now_ms(), u64::MAX);
}

/// Instants no real clock shows, up to `u64::MAX` ms. Each decision must be
/// an error, or one that still limits: at one instant, `LIMIT` admitted and
/// the next denied. Meanwhile a key with a sane clock on the same store keeps
/// exact counts.
#[tokio::test]
async fn clocks_far_in_the_future_never_fail_open() {
    let instants = [
        1u64 << 53,
        (1 << 53) + 1,
        1 << 57,
        1 << 60,
        i64::MAX as u64,
        u64::MAX - 1,
        u64::MAX,
    ];
    let mut failures = Vec::new();
    for (store_name, store) in stores() {
        for a in algorithms() {
            let sane = ManualClock::new(NOW);
            let p = prefix("future");
            let neighbour = (a.build)(store.clone(), &p, &sane);
            for (i, &t) in instants.iter().enumerate() {
                let clock = ManualClock::new(t);
                let check = (a.build)(store.clone(), &p, &clock);
                let key = format!("t{i}");
                let mut admitted = 0;
                let mut error = None;
                for _ in 0..LIMIT + 3 {
                    match check(key.clone(), 1).await {
                        Ok(d) => admitted += u64::from(d.allowed()),
                        Err(e) => {
                            error = Some(e);
                            break;
                        }
                    }
                }
                if error.is_none() && admitted != LIMIT {
                    failures.push(format!(
                        "{store_name} {} at {t} ms: {admitted} of {} admitted at one instant",
                        a.name,
                        LIMIT + 3
                    ));
                }
                let d = neighbour("sane".into(), 1).await.unwrap();
                assert!(d.allowed(), "{store_name} {}: neighbour", a.name);
                assert_eq!(
                    d.remaining(),
                    LIMIT - 1 - i as u64 % LIMIT,
                    "{store_name} {}: neighbour",
                    a.name
                );
                if i as u64 % LIMIT == LIMIT - 1 {
                    sane.advance(Duration::from_secs(2));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "fail open far in the future:\n{}",
        failures.join("\n")
    );
}

/// The smallest step back a clock can take, on a full GCRA: a cost of 0 is
/// still admitted (it charges nothing and only reports the state). App
/// servers whose clocks differ by a millisecond meet this all the time.
#[tokio::test]
async fn gcra_admits_cost_zero_when_the_clock_steps_back_1_ms() {
    for (store_name, store) in stores() {
        let clock = ManualClock::new(NOW);
        let check = (alg("gcra", Gcra::new(LIMIT, Duration::from_secs(1))).build)(
            store,
            &prefix("gcra0"),
            &clock,
        );
        assert_eq!(drain(&check, "k").await, LIMIT);
        clock.set(NOW - 1);
        let d = check("k".into(), 0).await.unwrap();
        assert!(d.allowed(), "{store_name}: cost 0 denied: {d:?}");
    }
}

/// A clock that jumps around (backwards, to 0, far ahead and back) never
/// makes a decision panic or err, and every decision is self-consistent.
#[tokio::test]
async fn a_clock_jumping_around_gives_consistent_decisions() {
    let jumps: [u64; 10] = [
        NOW,
        0,
        NOW,
        NOW - 3_600_000,
        NOW + 1,
        1,
        NOW + 500,
        2,
        NOW + 10_000,
        NOW,
    ];
    let mut failures = Vec::new();
    for (store_name, store) in stores() {
        for a in algorithms() {
            let clock = ManualClock::new(NOW);
            let check = (a.build)(store.clone(), &prefix("jumps"), &clock);
            for (i, &t) in jumps.iter().enumerate() {
                clock.set(t);
                for cost in [1, 0, 2, LIMIT, LIMIT + 1, 1] {
                    let d = check("k".into(), cost).await.unwrap();
                    let at = format!("{store_name} {} jump {i} (to {t}) cost {cost}", a.name);
                    if let Err(e) = consistent(&d, cost) {
                        failures.push(format!("{at}: {e}: {d:?}"));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "inconsistent:\n{}",
        failures.join("\n")
    );
}

/// What every decision must satisfy, whatever the state and the clock.
fn consistent(d: &Decision, cost: u64) -> Result<(), &'static str> {
    if d.limit() != LIMIT {
        return Err("wrong limit");
    }
    if d.remaining() > LIMIT {
        return Err("more remaining than the limit");
    }
    if d.is_degraded() {
        return Err("degraded");
    }
    if cost == 0 && !d.allowed() {
        return Err("cost 0 denied");
    }
    if cost > LIMIT && d.allowed() {
        return Err("a cost over the limit admitted");
    }
    if d.allowed() && d.retry_after().is_some() {
        return Err("admitted with a retry time");
    }
    if d.denied() && cost > LIMIT && d.retry_after().is_some() {
        return Err("a retry time for a cost that never fits");
    }
    if d.denied() && cost <= LIMIT && d.retry_after().is_none() {
        return Err("denied without a retry time");
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Through a real axum server.

/// An app limited by `extractor`, with costs taken from an `x-cost` header
/// (as the [`Cost`] extension) when present.
fn app<K: KeyExtractor>(store: Store, extractor: K) -> Router {
    let limiter = Limiter::builder(store, TokenBucket::new(LIMIT, 1.0))
        .prefix(prefix("http"))
        .clock(ManualClock::new(NOW))
        .build()
        .unwrap();
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, extractor))
        .layer(axum::middleware::map_request(
            |mut req: axum::extract::Request| async move {
                let cost = req
                    .headers()
                    .get("x-cost")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok());
                if let Some(c) = cost {
                    req.extensions_mut().insert(Cost(c));
                }
                req
            },
        ))
}

/// The `r` (remaining) of the `RateLimit` header.
fn remaining(res: &reqwest::Response) -> i64 {
    let v = res.headers().get("ratelimit").expect("RateLimit header");
    let items = common::sf::parse_list(v.to_str().unwrap()).unwrap();
    items[0].int("r")
}

/// Sends `LIMIT` requests with `header: value` that must pass, then one that
/// must be limited: the key's count is exact.
async fn assert_exact_over_http(base: &str, header: &str, value: &str) {
    let client = reqwest::Client::new();
    for i in 0..LIMIT {
        let res = client.get(base).header(header, value).send().await.unwrap();
        assert_eq!(
            res.status(),
            StatusCode::OK,
            "{header}: {value}, request {i}"
        );
        assert_eq!(remaining(&res), (LIMIT - 1 - i) as i64);
    }
    let res = client.get(base).header(header, value).send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "{header}: {value}"
    );
}

async fn problem_detail(res: reqwest::Response) -> String {
    assert_eq!(
        res.headers()["content-type"],
        "application/problem+json",
        "{res:?}"
    );
    let body: serde_json::Value = res.json().await.unwrap();
    body["detail"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn http_oversized_and_non_utf8_header_values() {
    for (_, store) in stores() {
        let base = serve(app(store, Header::try_new("x-api-key").unwrap())).await;
        let client = reqwest::Client::new();
        // Longer than the extractor takes: 400 naming the bound.
        let res = client
            .get(&base)
            .header("x-api-key", "k".repeat(100_000))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::BAD_REQUEST);
        assert!(problem_detail(res).await.contains("longer than 256 bytes"));
        // 1 MB: more than the HTTP server reads in a head. hyper answers 431
        // or closes the connection; either way the layer never sees it.
        let res = client
            .get(&base)
            .header("x-api-key", "k".repeat(1 << 20))
            .send()
            .await;
        if let Ok(res) = res {
            assert_eq!(res.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        }
        // Bytes that are no text.
        for bytes in [&b"\xff\xfe"[..], b"abc\x80", b"\xc3\x28", b"caf\xc3\xa9"] {
            let value = reqwest::header::HeaderValue::from_bytes(bytes).unwrap();
            let res = client
                .get(&base)
                .header("x-api-key", value)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{bytes:?}");
            assert!(problem_detail(res).await.contains("not visible ASCII"));
        }
        // None of it was charged to anybody, and the server still counts
        // exactly.
        assert_exact_over_http(&base, "x-api-key", "good").await;
    }
}

/// A 1 MB key made by a custom extractor is hashed to a bounded storage key
/// and counted exactly.
#[tokio::test]
async fn http_megabyte_keys_from_a_custom_extractor() {
    for (store_name, store) in stores() {
        let extractor = from_fn(|req| {
            let seed = req
                .headers()
                .get("x-seed")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| KeyRejection::new("no x-seed"))?;
            Ok(seed.repeat((1 << 20) / seed.len().max(1)))
        });
        let p = prefix("mbkey");
        let limiter = Limiter::builder(store, TokenBucket::new(LIMIT, 1.0))
            .prefix(&p)
            .clock(ManualClock::new(NOW))
            .build()
            .unwrap();
        let base = serve(
            Router::new()
                .route("/", get(|| async { "ok" }))
                .layer(RateLimitLayer::new(limiter, extractor)),
        )
        .await;
        assert_exact_over_http(&base, "x-seed", "{ab}").await;
        assert_exact_over_http(&base, "x-seed", "{ac}").await;
        if store_name == "redis" {
            let names = redis_keys(&p);
            assert_eq!(names.len(), 2, "{names:?}");
            for n in &names {
                assert_one_hash_tag(n);
            }
        }
    }
}

/// `ab, ab, …, ab` with `n` entries.
fn chain(entry: &str, n: usize) -> String {
    let mut s = String::with_capacity((entry.len() + 2) * n);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push_str(entry);
    }
    s
}

/// 100 000 entries, straight into the extractor (no HTTP server limits):
/// the walk looks at the right-most 65 at most, so whatever is left of
/// them (forged entries, garbage) changes nothing. (Its cost is not timed
/// here: a walk of the whole chain would still give these answers, but a
/// quadratic one would not finish.)
#[test]
fn forwarded_for_chains_of_100k_entries_cost_bounded_work() {
    let peer = SocketAddr::from(([127, 0, 0, 1], 40000));
    let req = |name: &str, value: String| {
        let mut r = http::Request::builder()
            .header(name, value)
            .body(())
            .unwrap();
        r.extensions_mut().insert(peer);
        r
    };
    let xff = ClientIp::new().trust_loopback();
    let fwd = ClientIp::new()
        .trust_loopback()
        .proxy_header(ProxyHeader::Forwarded);
    // Forged entries on the left, the real client right of our proxy.
    let forged = format!("{}, 203.0.113.9, 127.0.0.2", chain("6.6.6.6", 100_000));
    let r = req("x-forwarded-for", forged);
    assert_eq!(
        xff.extract(&r).map(std::borrow::Cow::into_owned).unwrap(),
        "203.0.113.9"
    );
    // A client address left of 65 trusted hops is past the walk's reach:
    // the answer is the one of the 65 alone (too long a chain), not it.
    let tail = chain("127.0.0.3", 65);
    let beyond = format!("{}, {tail}", chain("203.0.113.9", 100_000));
    let r = req("x-forwarded-for", beyond);
    let alone = req("x-forwarded-for", tail);
    assert_eq!(xff.extract(&r).unwrap(), "127.0.0.3");
    assert_eq!(xff.extract(&r), xff.extract(&alone));
    // 100 000 trusted hops: too long a chain, the last trusted proxy.
    let r = req("x-forwarded-for", chain("127.0.0.3", 100_000));
    assert_eq!(
        xff.extract(&r).map(std::borrow::Cow::into_owned).unwrap(),
        "127.0.0.3"
    );
    let reject = xff.clone().on_broken_chain(BrokenChain::Reject);
    assert!(reject
        .extract(&r)
        .map(std::borrow::Cow::into_owned)
        .unwrap_err()
        .reason()
        .contains("more than 64"));
    // Garbage, 100 000 times.
    let r = req("x-forwarded-for", chain("{}garbage\u{e9}", 100_000));
    assert_eq!(
        xff.extract(&r).map(std::borrow::Cow::into_owned).unwrap(),
        "127.0.0.1"
    );
    // The same for Forwarded, which is tokenized from the left.
    let forged = format!(
        "{}, for=203.0.113.9",
        chain("for=6.6.6.6;proto=http", 100_000)
    );
    let r = req("forwarded", forged);
    assert_eq!(
        fwd.extract(&r).map(std::borrow::Cow::into_owned).unwrap(),
        "203.0.113.9"
    );
    let r = req("forwarded", chain("for=\"[::1]:80\"", 100_000));
    assert_eq!(
        fwd.extract(&r).map(std::borrow::Cow::into_owned).unwrap(),
        "::/64"
    );
    let r = req("forwarded", chain("for=\"x", 100_000));
    assert_eq!(
        fwd.extract(&r).map(std::borrow::Cow::into_owned).unwrap(),
        "127.0.0.1"
    );
}

/// The same chains over TCP, as long as the server accepts a head (hyper
/// reads at most ~400 KB): 100 000 entries of `::1` fit.
#[tokio::test]
async fn http_forwarded_for_chains_of_100k_entries() {
    for (_, store) in stores() {
        let base = serve(app(store, ClientIp::new().trust_loopback())).await;
        // 100 000 trusted hops (`::1`): the last trusted one is the key.
        let long = chain("::1", 100_000);
        assert_exact_over_http(&base, "x-forwarded-for", &long).await;
        // Forged entries on the left never reach the key.
        let forged = format!("{},203.0.113.9", chain("1::", 99_999));
        assert_exact_over_http(&base, "x-forwarded-for", &forged).await;
        // Over the server's limit: refused by hyper (431) or the connection
        // closed, and the server still serves.
        let huge = chain("6.6.6.6", 100_000);
        let res = reqwest::Client::new()
            .get(&base)
            .header("x-forwarded-for", huge)
            .send()
            .await;
        if let Ok(res) = res {
            assert_eq!(res.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        }
        assert_exact_over_http(&base, "x-forwarded-for", "198.51.100.1").await;
    }
}

/// Malformed `Forwarded` values: the last trusted proxy's bucket (the
/// default), or 400 with `BrokenChain::Reject`; never an error or a panic.
#[tokio::test]
async fn http_malformed_forwarded_values() {
    let malformed: Vec<Vec<u8>> = vec![
        b"for=".to_vec(),
        b"for=\"".to_vec(),
        b"for=\"[::1".to_vec(),
        b"for=[::1".to_vec(),
        b"for=\"\\\"".to_vec(),
        b"=".to_vec(),
        b"for".to_vec(),
        b"for=1.2.3.4;for=5.6.7.8".to_vec(),
        b"for=unknown".to_vec(),
        b"for=_hidden".to_vec(),
        b"for=\"1.2.3.4:99999\"".to_vec(),
        b"for=300.1.1.1".to_vec(),
        b"for=1.2.3.4 junk".to_vec(),
        b"for=\"\xff\xfe\"".to_vec(),
        b"for=\xc3\xa9".to_vec(),
        b"for=\"[1::2::3]\"".to_vec(),
        b"for=\"[::ffff:1.2.3.4]:0x50\"".to_vec(),
        chain("for=unknown", 30_000).into_bytes(),
        chain("for=\"", 30_000).into_bytes(),
    ];
    for (_, store) in stores() {
        let key = ClientIp::new()
            .trust_loopback()
            .proxy_header(ProxyHeader::Forwarded);
        let lenient = serve(app(store.clone(), key.clone())).await;
        let strict = serve(app(store, key.on_broken_chain(BrokenChain::Reject))).await;
        let client = reqwest::Client::new();
        let mut to_peer = 0;
        // Lists without elements: no hop but the peer, so the peer is the
        // client, for both servers.
        for value in [";;;;", ",,,,", " , ;, "] {
            for base in [&strict, &lenient] {
                let res = client
                    .get(base)
                    .header("forwarded", value)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), StatusCode::OK, "{value:?}");
            }
            to_peer += 1;
        }
        for value in &malformed {
            let v = reqwest::header::HeaderValue::from_bytes(value).unwrap();
            let res = client
                .get(&strict)
                .header("forwarded", v.clone())
                .send()
                .await
                .unwrap();
            let shown = String::from_utf8_lossy(&value[..value.len().min(40)]).into_owned();
            assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{shown}");
            let res = client
                .get(&lenient)
                .header("forwarded", v)
                .send()
                .await
                .unwrap();
            // All in the bucket of the peer, the last trusted proxy.
            to_peer += 1;
            let want = if to_peer <= LIMIT {
                StatusCode::OK
            } else {
                StatusCode::TOO_MANY_REQUESTS
            };
            assert_eq!(res.status(), want, "{shown}");
        }
        // A well-formed neighbour has its own exact bucket.
        assert_exact_over_http(&lenient, "forwarded", "for=198.51.100.7").await;
    }
}

#[tokio::test]
async fn http_costs_of_zero_and_u64_max() {
    for (_, store) in stores() {
        let base = serve(app(store, Header::try_new("x-api-key").unwrap())).await;
        let client = reqwest::Client::new();
        let send = |cost: &str| {
            client
                .get(&base)
                .header("x-api-key", "ana")
                .header("x-cost", cost)
                .send()
        };
        let res = send("0").await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(remaining(&res), LIMIT as i64);
        for cost in [u64::MAX, u64::MAX - 1, 1 << 63, LIMIT + 1] {
            let res = send(&cost.to_string()).await.unwrap();
            assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS, "cost {cost}");
            assert!(res.headers().get("retry-after").is_none(), "cost {cost}");
            assert_eq!(remaining(&res), LIMIT as i64, "cost {cost}");
            assert!(problem_detail(res).await.contains("never be admitted"));
        }
        // Nothing was charged.
        assert_exact_over_http(&base, "x-api-key", "ana").await;
        let res = send("0").await.unwrap();
        assert_eq!(res.status(), StatusCode::OK, "cost 0 is always admitted");
    }
}
