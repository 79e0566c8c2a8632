//! Faults on a real `redis-server`: killed and restarted, paused, its script
//! cache or its functions flushed, its clients killed; and the circuit
//! breaker.
//!
//! Each fault runs under load: many tasks calling `check` in a loop (1 ms
//! apart) while the test thread injects the fault. Every call is timed, and
//! the bound asserted per call is a correctness bound of the failure path,
//! not a benchmark: the limiter's timeout (100 ms) plus a margin of 150 ms
//! for a loaded 2-core machine.
//!
//! The tests take a lock so that only one load runs at a time: two loads
//! on two cores would measure each other.

mod common;

use common::RedisServer;
use floodgate::algorithm::TokenBucket;
use floodgate::failure::{CircuitBreaker, CircuitState, FailurePolicy};
use floodgate::store::{MemoryStore, RedisStore};
use floodgate::{Decision, Limiter};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// The limiter's timeout in these tests (the default).
const TIMEOUT: Duration = Duration::from_millis(100);
/// What a loaded machine may add to it.
const MARGIN: Duration = Duration::from_millis(150);
/// Tasks calling `check` concurrently.
const TASKS: usize = 32;
/// The longest limiting may take to resume after Redis is back.
const RESUME: Duration = Duration::from_secs(1);

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A limit no test reaches: every decision Redis makes is an admission.
fn big() -> TokenBucket {
    TokenBucket::new(1_000_000_000, 1_000_000.0)
}

fn limiter(server: &RedisServer, policy: FailurePolicy) -> Limiter<TokenBucket> {
    Limiter::builder(RedisStore::from_url(&server.url()).unwrap(), big())
        .name("faults")
        .on_store_failure(policy)
        .build()
        .unwrap()
}

/// One call: when it started, how long it took, what it answered.
#[derive(Debug, Clone, Copy)]
struct Rec {
    start: Instant,
    took: Duration,
    outcome: Result<Decision, ()>,
}

impl Rec {
    fn end(&self) -> Instant {
        self.start + self.took
    }
    fn degraded(&self) -> bool {
        matches!(self.outcome, Ok(d) if d.is_degraded())
    }
    fn by_redis(&self) -> bool {
        matches!(self.outcome, Ok(d) if !d.is_degraded())
    }
}

struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<Vec<Rec>>>,
}

fn start_load(rt: &Runtime, limiter: &Limiter<TokenBucket>, tasks: usize) -> Load {
    // One decision first: the connections are made and the script loaded.
    let d = rt.block_on(limiter.check("warm-up", 1)).unwrap();
    assert!(!d.is_degraded(), "redis answers before the fault");
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = (0..tasks)
        .map(|t| {
            let (limiter, stop) = (limiter.clone(), stop.clone());
            rt.spawn(async move {
                let key = format!("task-{t}");
                let mut recs = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    let outcome = limiter.check(&key, 1).await.map_err(|_| ());
                    recs.push(Rec {
                        start,
                        took: start.elapsed(),
                        outcome,
                    });
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                recs
            })
        })
        .collect();
    Load { stop, tasks }
}

fn finish(rt: &Runtime, load: Load) -> Vec<Rec> {
    load.stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        let mut all = Vec::new();
        for t in load.tasks {
            all.extend(t.await.expect("no task panicked"));
        }
        all
    })
}

fn worst(recs: &[Rec], f: impl Fn(&Rec) -> bool) -> Duration {
    recs.iter()
        .filter(|r| f(r))
        .map(|r| r.took)
        .max()
        .unwrap_or_default()
}

fn summary(name: &str, recs: &[Rec]) {
    let degraded = recs.iter().filter(|r| r.degraded()).count();
    let errors = recs.iter().filter(|r| r.outcome.is_err()).count();
    eprintln!(
        "{name}: {} calls, {degraded} degraded, {errors} errors; worst latency {:?} (degraded {:?}, from redis {:?})",
        recs.len(),
        worst(recs, |_| true),
        worst(recs, Rec::degraded),
        worst(recs, Rec::by_redis),
    );
}

/// Every call answered within the timeout plus the margin, and none failed.
fn assert_bounded(recs: &[Rec]) {
    for r in recs {
        assert!(r.outcome.is_ok(), "the policy answered, no error: {r:?}");
        assert!(
            r.took <= TIMEOUT + MARGIN,
            "a call took {:?}, over {:?}: {r:?}",
            r.took,
            TIMEOUT + MARGIN
        );
    }
}

/// Limiting resumed within [`RESUME`] of `back`: from then on, every call
/// was decided by Redis. Returns when the first was.
fn assert_resumed(recs: &[Rec], back: Instant, last: Instant) -> Duration {
    let late: Vec<_> = recs
        .iter()
        .filter(|r| r.degraded() && r.start > back + RESUME)
        .collect();
    assert!(
        late.is_empty(),
        "{} degraded decisions more than {RESUME:?} after redis returned, e.g. {:?}",
        late.len(),
        late.first()
    );
    let first = recs
        .iter()
        .filter(|r| r.by_redis() && r.start >= back)
        .map(Rec::end)
        .min()
        .expect("a decision by redis after it returned");
    assert!(
        recs.iter()
            .any(|r| r.by_redis() && r.start > back + RESUME && r.end() <= last),
        "decisions by redis go on"
    );
    first.saturating_duration_since(back)
}

fn commandstat(server: &RedisServer, command: &str) -> u64 {
    let info: String = server.cmd(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

/// Kill Redis under load, restart it on the same port; `check` says what a
/// degraded decision must look like under the policy.
fn kill_and_restart(name: &str, policy: FailurePolicy, check: impl Fn(&Decision)) -> Vec<Rec> {
    let _one = serial();
    let mut server = RedisServer::start();
    let rt = runtime();
    let limiter = limiter(&server, policy);
    let load = start_load(&rt, &limiter, TASKS);
    std::thread::sleep(Duration::from_millis(500));
    server.kill();
    let dead = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let restarting = Instant::now();
    server.restart();
    let back = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let last = Instant::now();
    let recs = finish(&rt, load);
    summary(name, &recs);

    assert_bounded(&recs);
    assert!(
        recs.iter()
            .all(|r| !r.degraded() || r.end() + TIMEOUT + MARGIN >= dead),
        "nothing degraded before the kill"
    );
    let during: Vec<_> = recs
        .iter()
        .filter(|r| r.start >= dead && r.end() <= restarting)
        .collect();
    assert!(!during.is_empty(), "calls were made while redis was down");
    assert!(
        during.iter().all(|r| r.degraded()),
        "while redis is down every decision is the policy's"
    );
    for r in recs.iter().filter(|r| r.degraded()) {
        check(&r.outcome.unwrap());
    }
    let resumed = assert_resumed(&recs, back, last);
    eprintln!("{name}: first decision by redis {resumed:?} after it returned");
    recs
}

#[test]
fn kill_and_restart_fail_open() {
    kill_and_restart("fail open", FailurePolicy::FailOpen, |d| {
        assert!(d.allowed(), "fail open admits: {d:?}");
    });
}

#[test]
fn kill_and_restart_fail_closed() {
    kill_and_restart("fail closed", FailurePolicy::FailClosed, |d| {
        assert!(!d.allowed(), "fail closed denies: {d:?}");
        let wait = d.retry_after().expect("a retry_after");
        assert!(
            wait > Duration::ZERO && wait <= CircuitBreaker::default().cool_down(),
            "retry_after is what is left of the cool-down: {wait:?}"
        );
    });
}

#[test]
fn kill_and_restart_fallback() {
    // Each task's key gets 3 at once and 1 per second from the fallback.
    let local = Limiter::builder(MemoryStore::new(), TokenBucket::new(3, 1.0))
        .name("faults-local")
        .build()
        .unwrap();
    let recs = kill_and_restart("fallback", FailurePolicy::fallback(local), |d| {
        assert_eq!(d.limit(), 3, "the fallback's limit: {d:?}");
    });
    let degraded: Vec<_> = recs
        .iter()
        .filter(|r| r.degraded())
        .map(|r| r.outcome.unwrap())
        .collect();
    assert!(
        degraded.iter().any(floodgate::Decision::allowed),
        "the fallback admits"
    );
    assert!(
        degraded
            .iter()
            .any(|d| !d.allowed() && d.retry_after().is_some()),
        "and limits, with its own retry_after"
    );
}

/// `flush` (a command emptying what Redis has loaded) three times under
/// load: not one decision may fail.
fn flush_mid_traffic(server: &RedisServer, name: &str, flush: &[&str]) {
    let rt = runtime();
    // Any failure comes back as an error, and a timeout of 1 s leaves no
    // doubt that an error would be the flush's, not the machine's load.
    let limiter = Limiter::builder(RedisStore::from_url(&server.url()).unwrap(), big())
        .name("flush")
        .timeout(Duration::from_secs(1))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    let load = start_load(&rt, &limiter, TASKS);
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(300));
        let _: String = server.cmd(flush);
    }
    std::thread::sleep(Duration::from_millis(300));
    let recs = finish(&rt, load);
    summary(name, &recs);
    let failed = recs.iter().filter(|r| !r.by_redis()).count();
    assert_eq!(failed, 0, "no decision failed or degraded");
}

#[test]
fn script_flush_mid_traffic_fails_nothing() {
    let _one = serial();
    let server = RedisServer::start();
    flush_mid_traffic(&server, "script flush", &["SCRIPT", "FLUSH"]);
    // Decisions are functions, which the script cache does not hold.
    assert!(commandstat(&server, "fcall") > 0);
    assert_eq!(commandstat(&server, "evalsha"), 0);
}

#[test]
fn function_flush_mid_traffic_fails_nothing() {
    let _one = serial();
    let server = RedisServer::start();
    flush_mid_traffic(&server, "function flush", &["FUNCTION", "FLUSH"]);
    assert!(
        commandstat(&server, "function|load") >= 4,
        "the library was loaded at first and again after each flush"
    );
}

#[test]
fn without_functions_decisions_are_scripts() {
    let _one = serial();
    // As Redis < 7 answers FCALL: an unknown command.
    let server = RedisServer::start_with(&["--rename-command", "FCALL", "FCALL_HIDDEN"]);
    flush_mid_traffic(&server, "no functions, script flush", &["SCRIPT", "FLUSH"]);
    assert!(commandstat(&server, "evalsha") > 0);
    assert!(
        commandstat(&server, "eval") >= 3,
        "after each flush, calls ran the script by its source (which caches it again)"
    );
}

#[test]
fn client_kill_mid_traffic_recovers() {
    let _one = serial();
    let server = RedisServer::start();
    let rt = runtime();
    let limiter = limiter(&server, FailurePolicy::FailOpen);
    let load = start_load(&rt, &limiter, TASKS);
    std::thread::sleep(Duration::from_millis(500));
    let kill = Instant::now();
    let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
    let killed_at = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let last = Instant::now();
    let recs = finish(&rt, load);
    summary("client kill", &recs);

    assert!(killed >= 1, "the store's connections were killed");
    assert_bounded(&recs);
    // Degraded can only be the calls in flight on the killed connections:
    // at most one per task, all started before the kill was done.
    let degraded: Vec<_> = recs.iter().filter(|r| r.degraded()).collect();
    assert!(
        degraded.len() <= TASKS,
        "{} degraded decisions, more than the {TASKS} calls in flight",
        degraded.len()
    );
    assert!(
        degraded.iter().all(|r| r.start <= killed_at),
        "only calls in flight at the kill degrade: {:?}",
        degraded.iter().find(|r| r.start > killed_at)
    );
    let resumed = assert_resumed(&recs, kill, last);
    eprintln!(
        "client kill: {killed} connections killed, {} degraded, first decision by redis {resumed:?} after",
        degraded.len()
    );
}

#[test]
fn paused_redis_answers_by_policy_and_resumes() {
    let _one = serial();
    let server = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let rt = runtime();
    let limiter = limiter(&server, FailurePolicy::FailClosed);
    let load = start_load(&rt, &limiter, TASKS);
    std::thread::sleep(Duration::from_millis(500));
    let paused = Instant::now();
    let url = server.url();
    let sleeper = std::thread::spawn(move || {
        let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
        let _: () = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(2)
            .query(&mut c)
            .unwrap();
        Instant::now()
    });
    let awake = sleeper.join().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let last = Instant::now();
    let recs = finish(&rt, load);
    summary("debug sleep", &recs);

    assert_bounded(&recs);
    let degraded: Vec<_> = recs.iter().filter(|r| r.degraded()).collect();
    assert!(
        degraded.len() > TASKS,
        "calls during the pause were answered by the policy"
    );
    for r in &degraded {
        let d = r.outcome.unwrap();
        assert!(
            !d.allowed() && d.retry_after().is_some(),
            "fail closed: {d:?}"
        );
        assert!(
            r.start >= paused.checked_sub(MARGIN).unwrap_or(paused),
            "nothing degraded before the pause"
        );
    }
    let resumed = assert_resumed(&recs, awake, last);
    eprintln!("debug sleep: first decision by redis {resumed:?} after it woke up");
}

#[test]
fn open_circuit_answers_at_once_and_closes_by_itself() {
    let _one = serial();
    let server = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let rt = runtime();
    let cool_down = Duration::from_millis(700);
    let limiter = Limiter::builder(RedisStore::from_url(&server.url()).unwrap(), big())
        .name("breaker")
        .circuit_breaker(CircuitBreaker::new(3, cool_down))
        .build()
        .unwrap();
    rt.block_on(async {
        assert!(!limiter.check("ana", 1).await.unwrap().is_degraded());
        let url = server.url();
        let sleeper = std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let _: () = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(3)
                .query(&mut c)
                .unwrap();
            Instant::now()
        });
        tokio::time::sleep(Duration::from_millis(100)).await;

        // Three timeouts open the circuit.
        for _ in 0..3 {
            assert_eq!(limiter.circuit_state(), CircuitState::Closed);
            let start = Instant::now();
            let d = limiter.check("ana", 1).await.unwrap();
            let took = start.elapsed();
            assert!(d.is_degraded() && d.allowed());
            assert!(
                took >= TIMEOUT.saturating_sub(Duration::from_millis(5))
                    && took <= TIMEOUT + MARGIN,
                "a timeout: {took:?}"
            );
        }
        assert_eq!(limiter.circuit_state(), CircuitState::Open);

        // Open: answered by the policy without calling redis.
        let open = Instant::now();
        let mut slowest = Duration::ZERO;
        let mut n = 0;
        while open.elapsed() < cool_down / 2 {
            let start = Instant::now();
            let d = limiter.check("ana", 1).await.unwrap();
            slowest = slowest.max(start.elapsed());
            assert!(d.is_degraded() && d.allowed());
            n += 1;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        eprintln!("open circuit: {n} decisions, slowest {slowest:?}");
        assert!(
            slowest < TIMEOUT / 4,
            "open, decisions do not wait for the timeout: {slowest:?}"
        );

        // Redis wakes up; the circuit closes by itself.
        let awake = tokio::task::spawn_blocking(move || sleeper.join().unwrap())
            .await
            .unwrap();
        let closed = loop {
            let d = limiter.check("ana", 1).await.unwrap();
            if !d.is_degraded() {
                break Instant::now();
            }
            assert!(awake.elapsed() < Duration::from_secs(3), "never closed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let after = closed.saturating_duration_since(awake);
        eprintln!("circuit closed {after:?} after redis woke up");
        assert!(
            after <= cool_down + TIMEOUT + MARGIN,
            "closed within a cool-down: {after:?}"
        );
        assert_eq!(limiter.circuit_state(), CircuitState::Closed);
        assert!(!limiter.check("ana", 1).await.unwrap().is_degraded());
    });
}

#[test]
fn a_user_without_functions_decides_by_scripts() {
    let _one = serial();
    let server = RedisServer::start();
    let _: String = server.cmd(&[
        "ACL",
        "SETUSER",
        "lim",
        "on",
        ">pw",
        "~*",
        "+@all",
        "-fcall",
        "-function",
    ]);
    let url = server.url().replacen("redis://", "redis://lim:pw@", 1);
    let rt = runtime();
    let limiter = Limiter::builder(RedisStore::from_url(&url).unwrap(), big())
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    rt.block_on(async {
        for i in 0..10 {
            let d = limiter.check(&format!("k{i}"), 1).await.unwrap();
            assert!(d.allowed() && !d.is_degraded());
        }
    });
    // The first one twice: NOSCRIPT, then the script.
    assert!(commandstat(&server, "evalsha") >= 10);
}

#[test]
fn at_most_one_fcall_per_decision_and_no_ping() {
    let _one = serial();
    let server = RedisServer::start();
    let rt = runtime();
    let limiter = limiter(&server, FailurePolicy::ReturnError);
    const N: usize = 64 * 50;
    let burst = |prefix: &'static str| {
        rt.block_on(async {
            let tasks: Vec<_> = (0..64)
                .map(|t| {
                    let limiter = limiter.clone();
                    tokio::spawn(async move {
                        let mut ok = 0;
                        for i in 0..N / 64 {
                            let d = limiter.check(&format!("{prefix}-{t}-{i}"), 1).await;
                            ok += usize::from(d.is_ok_and(|d| !d.is_degraded()));
                        }
                        ok
                    })
                })
                .collect();
            let mut ok = 0;
            for t in tasks {
                ok += t.await.unwrap();
            }
            ok
        })
    };
    // Connections made, library loaded; then count from zero.
    burst("warm");
    let _: String = server.cmd(&["CONFIG", "RESETSTAT"]);
    let ok = burst("burst");
    assert_eq!(ok, N, "every decision made by redis");
    let (fcall, ping, load) = (
        commandstat(&server, "fcall"),
        commandstat(&server, "ping"),
        commandstat(&server, "function|load"),
    );
    eprintln!("{N} decisions: {fcall} fcall, {ping} ping, {load} function load");
    // Decisions waiting at the same moment share a call (64 tasks: many
    // do); never more than one call a decision.
    assert!(fcall <= N as u64, "at most one FCALL per decision");
    assert!(
        fcall < N as u64 / 2,
        "64 tasks at once share calls: {fcall} for {N}"
    );
    assert_eq!(ping, 0, "no PING per checkout");
    assert_eq!(load, 0, "the library stays loaded");
}

/// A store that does not answer in time is named in the error, with what
/// was being asked and the bound it missed.
#[test]
fn a_timeout_names_the_server_the_request_and_the_bound() {
    let _serial = serial();
    let server = RedisServer::start();
    let rt = runtime();
    rt.block_on(async {
        let limiter = Limiter::builder(RedisStore::from_url(&server.url()).unwrap(), big())
            .name("api")
            .timeout(Duration::from_millis(100))
            .on_store_failure(FailurePolicy::ReturnError)
            .build()
            .unwrap();
        // Connected first, so that it is the call that waits.
        limiter.check("user:42", 1).await.expect("a decision");
        server.pause();
        let e = limiter
            .check("user:42", 1)
            .await
            .expect_err("Redis is paused");
        server.resume();
        let text = e.to_string();
        assert!(
            text.contains(&format!("redis at 127.0.0.1:{}", server.port())),
            "{text}"
        );
        assert!(
            text.contains(r#"a check of key "user:42" for limiter "api""#),
            "{text}"
        );
        assert!(
            text.contains("within 100ms") && text.contains("`timeout`"),
            "{text}"
        );
    });
}
