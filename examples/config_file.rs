//! Limits from a TOML file, with environment overrides (figment).
//!
//! ```sh
//! cargo run --example config_file --features serde
//! RATE_LIMITS_API__LIMITS__SECOND="50/s burst 100" cargo run --example config_file --features serde
//! cargo run --example config_file --features serde -- path/to/limits.toml
//! ```
//!
//! Reads `examples/config_file.toml` (or the file given), lets variables
//! `RATE_LIMITS_<SECTION>__<KEY>...` override any value, builds one limiter
//! per section over an in-memory store (a `RedisStore` when `REDIS_URL` is
//! set), prints the limits in force and sends a burst of requests to the
//! API limiter. An invalid value stops it with the message, the field and
//! where the value came from.

use figment::providers::{Env, Format, Toml};
use figment::Figment;
use floodgate::algorithm::Limits;
use floodgate::failure::{CircuitBreaker, FailurePolicy, DEFAULT_TIMEOUT};
use floodgate::store::{MemoryStore, RedisStore, Store};
use floodgate::{ConfigError, HotKeys, Limiter};
use serde::Deserialize;
use std::time::Duration;

/// The settings of one limiter, as the file gives them. Everything but
/// `limits` is optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimiterFile {
    pub(crate) limits: Limits,
    #[serde(default = "default_timeout", with = "floodgate::config::duration")]
    pub(crate) timeout: Duration,
    #[serde(default)]
    pub(crate) on_store_failure: FailurePolicy,
    #[serde(default)]
    pub(crate) circuit_breaker: CircuitBreaker,
    pub(crate) hot_keys: Option<HotKeys>,
}

fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

impl LimiterFile {
    /// The limiter named `name`: `build` checks what depends on several
    /// values (hot keys against the limits), naming the field.
    pub(crate) fn build(self, store: Store, name: &str) -> Result<Limiter<Limits>, ConfigError> {
        let mut builder = Limiter::builder(store, self.limits)
            .name(name)
            .timeout(self.timeout)
            .on_store_failure(self.on_store_failure)
            .circuit_breaker(self.circuit_breaker);
        if let Some(hot) = self.hot_keys {
            builder = builder.hot_keys(hot);
        }
        builder.build()
    }
}

/// The whole file: one section per limiter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct File {
    pub(crate) api: LimiterFile,
    pub(crate) login: LimiterFile,
}

/// The file at `path`, each value overridden by its variable
/// `RATE_LIMITS_<SECTION>__<KEY>...` when set (`tests/config_serde.rs` runs
/// this too). The prefix is the app's own: every variable under it must be
/// a setting of the file (unknown fields are refused), so it is not one
/// that other tools set (floodgate's tests read `FLOODGATE_...`).
///
/// # Errors
/// figment's, naming the key and the file or variable of the value.
pub(crate) fn load(path: &str) -> Result<File, Box<figment::Error>> {
    Figment::new()
        .merge(Toml::file_exact(path))
        .merge(Env::prefixed("RATE_LIMITS_").split("__"))
        .extract()
        .map_err(Box::new)
}

#[tokio::main]
async fn main() {
    // Errors as their messages (which name the field), not as `Debug`.
    if let Err(e) = run().await {
        eprintln!("{e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/examples/config_file.toml").into()
    });
    let file = match load(&path) {
        Ok(file) => file,
        Err(e) => {
            // figment says which key, and which file or variable it came from.
            for e in *e {
                eprintln!("{e}");
            }
            std::process::exit(1);
        }
    };
    let store: Store = match std::env::var("REDIS_URL") {
        Ok(url) => RedisStore::from_url(&url)?.into(),
        Err(_) => MemoryStore::new().into(),
    };
    let api = file.api.build(store.clone(), "api")?;
    let login = file.login.build(store, "login")?;

    for (name, limiter) in [("api", &api), ("login", &login)] {
        println!("{name}:");
        for (limit, quota) in limiter.algorithm().quotas() {
            println!("  {limit}: {} per {:?}", quota.units, quota.window);
        }
    }
    let mut admitted = 0;
    for _ in 0..50 {
        if api.check("client-1", 1).await?.allowed() {
            admitted += 1;
        }
    }
    println!("a burst of 50 to api: {admitted} admitted");
    Ok(())
}
