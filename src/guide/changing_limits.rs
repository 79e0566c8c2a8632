//! Changing limits at run time: from a reloaded file, an admin endpoint or
//! a database, without a restart, without rebuilding the layer, and
//! without forgetting what clients have used.
//!
//! A [`Limiter`](crate::Limiter) is cheap to clone and shared by its
//! clones; [`Limiter::set_algorithm`](crate::Limiter::set_algorithm)
//! changes the limits of all of them at once, through `&self`. Keep a
//! clone where the change comes from (a file watcher, a handler), give
//! another to the layer:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::algorithm::{Gcra, Limits, SlidingWindow};
//! use floodgate::{key::PeerIp, layer::RateLimitLayer, store::MemoryStore, Limiter};
//! use std::time::Duration;
//!
//! let minute = Duration::from_secs(60);
//! let limits = Limits::try_new("minute", SlidingWindow::try_new(100, minute)?)?;
//! let limiter = Limiter::builder(MemoryStore::new(), limits).name("api").build()?;
//! let app: axum::Router = axum::Router::new()
//!     .route("/", axum::routing::get(|| async { "hello" }))
//!     .layer(RateLimitLayer::new(limiter.clone(), PeerIp::new()));
//!
//! limiter.check("203.0.113.7", 30).await?;
//!
//! // Later, from the configuration: 200 a minute, and a burst limit too.
//! let new = Limits::try_new("minute", SlidingWindow::try_new(200, minute)?)?
//!     .try_with("second", Gcra::try_new(20, Duration::from_secs(1))?)?;
//! limiter.set_algorithm(new)?;
//!
//! // The layer decides under them from its next request on; the client
//! // keeps the 30 it used of its minute.
//! let d = limiter.check_all("203.0.113.7", 1).await?;
//! assert_eq!(d.each()[0].decision().remaining(), 200 - 31);
//! assert_eq!(d.each()[1].quota().units, 20);
//! # let _ = app; Ok(()) }
//! ```
//!
//! # What a key keeps
//!
//! A key's state is named after the limit's name and algorithm, not its
//! numbers. A limit that keeps both keeps every key's counters, read under
//! the new numbers: a new limit or burst counts what was used against it.
//! A new window starts a fixed or sliding window's count over (those
//! windows are other windows); a sliding log counts the admissions it
//! holds over the new window; a bucket (token, leaky, GCRA) keeps its
//! backlog as the time until it is full again. A limit whose algorithm
//! changes, or that is renamed, starts empty. The table per algorithm is in
//! [`set_algorithm`](crate::Limiter::set_algorithm)'s documentation.
//!
//! So to change a limit without resetting it, keep its name; to start over
//! on purpose, give it a new name.
//!
//! # Decisions in flight
//!
//! A decision reads the limits once, as it starts, and finishes under them:
//! a request waiting for Redis during a change is decided, and gets its
//! `RateLimit` header fields, under the limits it started with; the next
//! request is under the new ones. Reading the limits costs a decision one
//! atomic load, no lock and no reference count (the limiter's part of an
//! in-memory decision: one instruction more, by callgrind). Each change
//! keeps the previous limits in memory (a few hundred bytes) until the
//! limiter is dropped; setting the limits the limiter already has keeps
//! nothing, so reloading an unchanged file is free.
//!
//! # Wrong limits
//!
//! Every value an algorithm takes was checked when it was made (`try_new`,
//! `try_burst`, [`Limits::try_with`](crate::algorithm::Limits::try_with)),
//! and `set_algorithm` checks the rest as `build` does (hot keys need
//! limits they can share), with the same [`ConfigError`](crate::ConfigError):
//! a refused change leaves the limits as they were, so a reload that fails
//! is reported and changes nothing.
//!
//! ```
//! # fn main() -> Result<(), floodgate::ConfigError> {
//! use floodgate::algorithm::{FixedWindow, Limits, SlidingLog};
//! use floodgate::{store::MemoryStore, HotKeys, Limiter};
//! use std::time::Duration;
//!
//! let minute = Duration::from_secs(60);
//! let limiter = Limiter::builder(MemoryStore::new(), Limits::try_new("m", FixedWindow::try_new(1000, minute)?)?)
//!     .hot_keys(HotKeys::new(4))
//!     .build()?;
//! // Hot keys cannot share a sliding log: refused, as `build` would.
//! let log = Limits::try_new("m", SlidingLog::try_new(1000, minute)?)?;
//! assert_eq!(limiter.set_algorithm(log).unwrap_err().field(), "hot_keys");
//! assert_eq!(limiter.quotas().next().unwrap().1.units, 1000);
//! # Ok(()) }
//! ```
//!
//! # A file reloaded when it changes
//!
//! `examples/reload.rs` is an axum server whose limits come from a TOML
//! file (in the forms of [Limits as configuration](super::limits_as_configuration),
//! feature `serde`), watched with the [`notify`](https://docs.rs/notify)
//! crate and reloaded when it changes (`cargo run --example reload
//! --features serde`, then edit `examples/reload.toml`). Its core is a few lines: read the file into
//! limits, and if they differ, `set_algorithm`:
//!
//! ```
//! # use floodgate::algorithm::{FixedWindow, Limits};
//! # use floodgate::{store::MemoryStore, Limiter};
//! # use std::time::Duration;
//! use std::{error::Error, path::Path};
//!
//! /// The file, parsed into `Limits` (the example: `toml` and the `serde` feature).
//! fn load(path: &Path) -> Result<Limits, Box<dyn Error>> {
//!     // ...
//! #   Ok(Limits::try_new("minute", FixedWindow::try_new(50, Duration::from_secs(60))?)?)
//! }
//!
//! /// On each change of the file: a file that fails leaves the limits as they are.
//! fn reload(path: &Path, limiter: &Limiter<Limits>) -> Result<(), Box<dyn Error>> {
//!     let limits = load(path)?;
//!     if &limits != limiter.algorithm() {
//!         limiter.set_algorithm(limits)?;
//!     }
//!     Ok(())
//! }
//! # let limiter = Limiter::new(MemoryStore::new(), Limits::new("minute", FixedWindow::new(5, Duration::from_secs(60))));
//! # reload(Path::new("limits.toml"), &limiter).unwrap();
//! # assert_eq!(limiter.quotas().next().unwrap().1.units, 50);
//! ```
//!
//! It watches the file's directory, not the file: editors save by writing
//! a new file and renaming it over the old one. `tests/reload.rs` runs it
//! over real HTTP on memory and on Redis, changes the file, and sees the new
//! limit applied within a second with the counts kept. A signal works as
//! well as a watcher: call the same reload from a `SIGHUP` handler
//! (`tokio::signal::unix::signal(SignalKind::hangup())`).
//!
//! # Per tenant
//!
//! Limits that differ per customer are not a change of the limiter's
//! limits: give them per request with
//! [`check_with`](crate::Limiter::check_with) or the layer's
//! [`limits_for`](crate::layer::RateLimitLayer::limits_for), read from
//! wherever the tenant's plan lives. A tenant's state is shared by limits
//! of the same name and algorithm there too, so a tenant who changes plan
//! keeps what they used.
