//! Limits as configuration: limits, failure policy, circuit breaker and hot
//! keys read from the service's configuration file, with environment
//! overrides.
//!
//! The people who run a service change its limits more often than its code.
//! With the `serde` feature (off by default), every algorithm,
//! [`AnyAlgorithm`](crate::algorithm::AnyAlgorithm),
//! [`Limits`](crate::algorithm::Limits), [`HotKeys`](crate::HotKeys),
//! [`FailurePolicy`](crate::failure::FailurePolicy) and
//! [`CircuitBreaker`](crate::failure::CircuitBreaker) deserialize (and
//! serialize) with serde, from TOML, YAML, JSON or anything else serde reads:
//!
//! ```toml
//! [dependencies]
//! tower-floodgate = { version = "0.1", features = ["serde"] }
//! ```
//!
//! Every form is listed in [`floodgate::config`][config]. In short: a limit
//! is `"100/min"`, `"10/s burst 20"`, `"100/30s"` (a GCRA), or the same led
//! by an algorithm's name (`"sliding_window 100/min"`), or a table of the
//! algorithm's name and its constructor's parameters
//! (`{ algorithm = "token_bucket", capacity = 20, refill_per_sec = 10 }`);
//! durations are `"250ms"`, `"2s"`, `"1h30m"`. A fixed or sliding window's
//! table takes `jitter = true` for windows that start at an offset of each
//! key's own ([`FixedWindow::jittered`](crate::algorithm::FixedWindow::jittered)).
//!
//! # A service's file
//!
//! Two limiters: an API limit per client, and a login limit that must not
//! fail open. Each section is the settings of one limiter:
//!
//! ```toml
//! [api]
//! timeout = "100ms"
//! on_store_failure = "fail_open"
//! circuit_breaker = { failures = 5, cool_down = "500ms" }
//! hot_keys = { servers = 2 }
//!
//! [api.limits]
//! second = "20/s burst 40"
//! day = { algorithm = "fixed_window", limit = 100000, window = "1d", jitter = true }
//!
//! [login]
//! on_store_failure = "fail_closed"
//! limits = { attempts = "sliding_log 5/15min" }
//! ```
//!
//! The service describes its file with its own struct, holding floodgate's
//! types, and builds each limiter from its section. `Limits` holds limits
//! of any algorithm, so the file chooses them:
//!
#![cfg_attr(feature = "serde", doc = "```")]
#![cfg_attr(not(feature = "serde"), doc = "```ignore")]
//! use floodgate::algorithm::Limits;
//! use floodgate::failure::{CircuitBreaker, FailurePolicy};
//! use floodgate::store::{MemoryStore, Store};
//! use floodgate::{ConfigError, HotKeys, Limiter};
//! use serde::Deserialize;
//! use std::time::Duration;
//!
//! #[derive(Deserialize)]
//! #[serde(deny_unknown_fields)]
//! struct LimiterFile {
//!     limits: Limits,
//!     #[serde(default = "timeout", with = "floodgate::config::duration")]
//!     timeout: Duration,
//!     #[serde(default)]
//!     on_store_failure: FailurePolicy,
//!     #[serde(default)]
//!     circuit_breaker: CircuitBreaker,
//!     hot_keys: Option<HotKeys>,
//! }
//!
//! fn timeout() -> Duration {
//!     floodgate::failure::DEFAULT_TIMEOUT
//! }
//!
//! impl LimiterFile {
//!     fn build(self, store: Store, name: &str) -> Result<Limiter<Limits>, ConfigError> {
//!         let mut builder = Limiter::builder(store, self.limits)
//!             .name(name)
//!             .timeout(self.timeout)
//!             .on_store_failure(self.on_store_failure)
//!             .circuit_breaker(self.circuit_breaker);
//!         if let Some(hot) = self.hot_keys {
//!             builder = builder.hot_keys(hot);
//!         }
//!         builder.build()
//!     }
//! }
//!
//! #[derive(Deserialize)]
//! struct File {
//!     api: LimiterFile,
//!     login: LimiterFile,
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file: File = toml::from_str(r#"
//!     [api]
//!     timeout = "100ms"
//!     on_store_failure = "fail_open"
//!     circuit_breaker = { failures = 5, cool_down = "500ms" }
//!     hot_keys = { servers = 2 }
//!
//!     [api.limits]
//!     second = "20/s burst 40"
//!     day = { algorithm = "fixed_window", limit = 100000, window = "1d" }
//!
//!     [login]
//!     on_store_failure = "fail_closed"
//!     limits = { attempts = "sliding_log 5/15min" }
//! "#)?;
//! let store: Store = MemoryStore::new().into(); // a RedisStore in production
//! let api = file.api.build(store.clone(), "api")?;
//! let login = file.login.build(store, "login")?;
//! # let _ = (api, login);
//! # Ok(()) }
//! ```
//!
//! `build` is where the settings that depend on each other are checked
//! (hot keys against the limits, a name, a timeout): each error names its
//! field, as in code ([`configuration`](super::configuration)).
//!
//! # Errors point at the line
//!
//! A value that `try_new` or `build` would refuse is refused while the file
//! is read, with the same message, and the format says where. A window of
//! zero:
//!
#![cfg_attr(feature = "serde", doc = "```")]
#![cfg_attr(not(feature = "serde"), doc = "```ignore")]
//! use floodgate::algorithm::Limits;
//!
//! let e = toml::from_str::<Limits>(r#"
//! second = "20/s burst 40"
//! day = { algorithm = "fixed_window", limit = 100000, window = "0d" }
//! "#).unwrap_err();
//! assert_eq!(e.to_string(), "\
//! TOML parse error at line 3, column 62
//!   |
//! 3 | day = { algorithm = \"fixed_window\", limit = 100000, window = \"0d\" }
//!   |                                                              ^^^^
//! invalid `window`: must be at least 1 ms
//! ");
//! ```
//!
//! A field the algorithm does not have is refused too (`deny_unknown_fields`),
//! listing those it has: a typo never silently leaves a default in place.
//!
//! # Environment overrides, with figment
//!
//! Rust services usually load a file and let the environment override it:
//! [figment](https://docs.rs/figment) (or the `config` crate) does both,
//! and hands the merged values to serde. Here `APP_API__LIMITS__SECOND`
//! replaces one limit of the file (figment's `Env::prefixed("APP_")` with
//! `split("__")`: `__` separates the levels). `examples/config_file.rs` is
//! the same as a program: `cargo run --example config_file --features serde`.
//!
#![cfg_attr(feature = "serde", doc = "```")]
#![cfg_attr(not(feature = "serde"), doc = "```ignore")]
//! use figment::providers::{Env, Format, Toml};
//! use figment::Figment;
//! use floodgate::algorithm::{Gcra, Limits};
//! use floodgate::Quota;
//! use std::time::Duration;
//!
//! #[derive(serde::Deserialize)]
//! struct Api {
//!     limits: Limits,
//! }
//! #[derive(serde::Deserialize)]
//! struct File {
//!     api: Api,
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Each doctest is a process of its own: setting a variable is safe here.
//! std::env::set_var("APP_API__LIMITS__SECOND", "50/s burst 100");
//! let file: File = Figment::new()
//!     .merge(Toml::string(r#"
//!         [api.limits]
//!         second = "20/s burst 40"
//!         day = "fixed_window 100000/d"
//!     "#)) // Toml::file("floodgate.toml") in a service
//!     .merge(Env::prefixed("APP_").split("__"))
//!     .extract()?;
//! let quotas: Vec<_> = file.api.limits.quotas().collect();
//! assert_eq!(quotas, [
//!     ("day", Quota { units: 100_000, window: Duration::from_secs(86_400) }),
//!     ("second", Quota { units: 50, window: Duration::from_secs(1) }),
//! ]);
//! # Ok(()) }
//! ```
//!
//! figment keeps a table's keys sorted by name, not in the order written,
//! so the limits of a `Limits` read through it come in that order. The
//! order only changes which limit `RateLimit-Policy` lists first; every
//! limit is checked and the most restrictive is reported either way.
//!
//! # Writing limits back
//!
//! Serializing gives the table form, which reads back to the same limits:
//! to show the limits in force, or to store a tenant's limits in a
//! database.
//!
#![cfg_attr(feature = "serde", doc = "```")]
#![cfg_attr(not(feature = "serde"), doc = "```ignore")]
//! use floodgate::algorithm::{Limits, TokenBucket};
//!
//! let limits = Limits::new("api", TokenBucket::new(20, 10.0));
//! let json = serde_json::to_string(&limits).unwrap();
//! assert_eq!(json, r#"{"api":{"algorithm":"token_bucket","capacity":20,"refill_per_sec":10.0}}"#);
//! assert_eq!(serde_json::from_str::<Limits>(&json).unwrap(), limits);
//! ```
#![cfg_attr(feature = "serde", doc = "\n[config]: crate::config")]
#![cfg_attr(
    not(feature = "serde"),
    doc = "\n[config]: https://docs.rs/tower-floodgate/latest/floodgate/config/"
)]
