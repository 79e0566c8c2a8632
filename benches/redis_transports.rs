//! What a way of reaching Redis costs per decision, against floodgate's own
//! multiplexed connections over plain TCP, in the same run:
//!
//! - `pool`: `RedisStore::from_pool` over a deadpool-redis pool (one
//!   checkout per decision; the pool's default size);
//! - `tls`: `RedisStore` over `rediss://` (rustls), to the same server's TLS
//!   port, with a CA made for the run.
//!
//! Each also prints the allocations a decision costs the client process.
//!
//! ```text
//! cargo bench --features deadpool --bench redis_transports
//! cargo bench --features deadpool --bench redis_transports -- --tasks 64 --secs 3 --runs 5
//! ```
//!
//! It starts its own `redis-server` (plain and TLS ports) on free loopback
//! ports and makes its certificates with `openssl`; the three clients run in
//! turn in each round, so all see the same machine. `Limiter::check` from
//! `--tasks` tasks (64) over 10 000 keys `client-{i}`, a token bucket large
//! enough that everything is admitted, only decisions made by Redis count.

mod support;

use floodgate::algorithm::TokenBucket;
use floodgate::failure::FailurePolicy;
use floodgate::store::RedisStore;
use floodgate::Limiter;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{measure, median, Redis, RunArgs};

/// The system allocator, counting allocations: what a decision allocates in
/// the client (its whole process: floodgate, redis-rs, tokio).
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is passed to `System` unchanged.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const KEYS: usize = 10_000;

fn openssl(dir: &Path, args: &[&str]) {
    let ok = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!("openssl ({e}): install it (Debian/Ubuntu `apt-get install openssl`)")
        })
        .status
        .success();
    assert!(ok, "openssl {args:?} failed");
}

/// A CA and a certificate for 127.0.0.1 signed by it, in `dir`.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "ca.key",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "ca.key",
            "-days",
            "2",
            "-subj",
            "/CN=bench CA",
            "-out",
            "ca.pem",
        ],
    );
    openssl(
        dir,
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "server.key",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-key",
            "server.key",
            "-subj",
            "/CN=127.0.0.1",
            "-out",
            "server.csr",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.pem",
        ],
    );
}

fn limiter(store: RedisStore, name: &str) -> Limiter<TokenBucket> {
    Limiter::builder(store, TokenBucket::new(1 << 30, 1e9))
        .prefix("floodgate-bench")
        .name(name)
        .timeout(Duration::from_secs(5))
        .on_store_failure(FailurePolicy::ReturnError)
        .build()
        .expect("limiter")
}

/// Decisions a second, and allocations a decision.
async fn run(limiter: &Limiter<TokenBucket>, keys: &Arc<Vec<String>>, a: &RunArgs) -> (f64, f64) {
    let (l, k) = (limiter.clone(), keys.clone());
    let decided = Arc::new(AtomicU64::new(0));
    let counter = decided.clone();
    let before = ALLOCS.load(Ordering::Relaxed);
    let rate = measure(a.tasks, a.secs, move |t, i| {
        let (l, k, counter) = (l.clone(), k.clone(), counter.clone());
        async move {
            let key = &k[(t * 997 + i as usize * 13) % KEYS];
            let d = l.check(key, 1).await.expect("a decision by redis");
            assert!(!d.is_degraded());
            counter.fetch_add(1, Ordering::Relaxed);
        }
    })
    .await;
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    (
        rate,
        allocs as f64 / decided.load(Ordering::Relaxed).max(1) as f64,
    )
}

#[tokio::main]
async fn main() {
    let a = RunArgs::parse(false);
    let dir = std::env::temp_dir().join(format!("floodgate-bench-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    certificates(&dir);
    let tls_port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = |f: &str| dir.join(f).display().to_string();
    let redis = Redis::start_with(&[
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cert-file",
        &path("server.pem"),
        "--tls-key-file",
        &path("server.key"),
        "--tls-ca-cert-file",
        &path("ca.pem"),
        "--tls-auth-clients",
        "no",
    ]);
    let plain = limiter(RedisStore::from_url(&redis.url).unwrap(), "plain");
    let pool = deadpool_redis::Config::from_url(redis.url.as_str())
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .expect("pool");
    let pool_size = pool.status().max_size;
    let pooled = limiter(RedisStore::from_pool(pool), "pool");
    let tls = RedisStore::builder(&format!("rediss://127.0.0.1:{tls_port}"))
        .ca_certificate(std::fs::read(dir.join("ca.pem")).unwrap())
        .build()
        .unwrap();
    let tls = limiter(tls, "tls");
    let keys: Arc<Vec<String>> = Arc::new((0..KEYS).map(|i| format!("client-{i}")).collect());
    println!(
        "nproc {}, {} tasks, {} rounds of {} s, {KEYS} keys, redis {}, pool max_size {pool_size}",
        support::nproc(),
        a.tasks,
        a.runs,
        a.secs,
        redis.version()
    );
    let (mut p, mut d, mut t, mut al) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=a.runs {
        let (r_plain, a_plain) = run(&plain, &keys, &a).await;
        let (r_pool, a_pool) = run(&pooled, &keys, &a).await;
        let (r_tls, a_tls) = run(&tls, &keys, &a).await;
        println!(
            "round {round}: multiplexed {r_plain:>7.0}/s   pool {r_pool:>7.0}/s ({:.2})   tls {r_tls:>7.0}/s ({:.2});   \
             allocations a decision {a_plain:.2} / {a_pool:.2} / {a_tls:.2}",
            r_pool / r_plain,
            r_tls / r_plain
        );
        p.push(r_plain);
        d.push(r_pool / r_plain);
        t.push(r_tls / r_plain);
        al.push(a_plain);
    }
    println!(
        "median: multiplexed {:.0}/s ({:.2} allocations a decision); pool / multiplexed {:.2}; tls / multiplexed {:.2}",
        median(&p),
        median(&al),
        median(&d),
        median(&t)
    );
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}
