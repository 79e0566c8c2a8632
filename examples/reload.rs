//! Limits from a TOML file, reloaded when the file changes: no restart, no
//! rebuilt layer, and every client keeps what it has used.
//!
//! ```text
//! cargo run --example reload --features serde                     # reads examples/reload.toml
//! cargo run --example reload --features serde -- my_limits.toml
//! ```
//!
//! Then edit the file (say `"5/min"` to `"50/min"`) and save: the server
//! prints the new limits, and the next request is decided under them
//! (`kill -HUP` reloads it too). A file
//! that does not parse, or limits `build` would refuse, are reported and the
//! limits stay as they were. `ADDR` (default `127.0.0.1:3000`) sets the
//! address it listens on.
//!
//! The file: each limit by its name, in the forms of floodgate's `serde`
//! feature (`floodgate::config`); several limits apply together, all or
//! nothing:
//!
//! ```toml
//! [limits]
//! minute = "sliding_window 5/min"
//! day = { algorithm = "fixed_window", limit = 1000, window = "1d" }
//! ```
//!
//! `tests/reload.rs` runs this server over real HTTP, changes the file, and
//! sees the new limit applied within a second, counters kept.

use axum::{routing::get, Router};
use floodgate::algorithm::Limits;
use floodgate::key::PeerIp;
use floodgate::layer::RateLimitLayer;
use floodgate::store::Store;
use floodgate::Limiter;
use notify::{RecursiveMode, Watcher};
use serde::Deserialize;
use std::error::Error;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file: `[limits]`, read by floodgate's `serde` feature.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    limits: Limits,
}

/// The limits the file at `path` says.
///
/// # Errors
/// The file cannot be read, or is not TOML of the form above: an unknown
/// field, or a value floodgate refuses (the same message as `try_new`,
/// naming the field, with the line and column).
pub fn load(path: &Path) -> Result<Limits, Box<dyn Error + Send + Sync>> {
    let text = std::fs::read_to_string(path)?;
    Ok(toml::from_str::<File>(&text)?.limits)
}

/// The limiter of the file at `path`, over `store`.
///
/// # Errors
/// As [`load`], or the limiter's own settings are refused.
pub fn limiter(store: Store, path: &Path) -> Result<Limiter<Limits>, Box<dyn Error + Send + Sync>> {
    Ok(Limiter::builder(store, load(path)?).name("api").build()?)
}

/// Reload `path` into `limiter` each time it changes, until the returned
/// watcher is dropped. The directory is watched, not the file: editors
/// save by writing a new file and renaming it over the old one. A save is
/// several events (truncated, then written): the file is read once they
/// have been quiet for 50 ms, not half written.
///
/// # Errors
/// When the file's directory cannot be watched.
pub fn watch(
    path: &Path,
    limiter: Limiter<Limits>,
) -> Result<notify::RecommendedWatcher, Box<dyn Error + Send + Sync>> {
    let path = std::fs::canonicalize(path)?;
    let dir = path.parent().ok_or("the file has no directory")?.to_owned();
    let name = path.file_name().ok_or("the path names no file")?.to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let ours = |e: &notify::Event| e.paths.iter().any(|p| p.file_name() == Some(&*name));
        if event.is_ok_and(|e| !e.kind.is_access() && ours(&e)) {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    // Ends when the watcher (and with it the sender) is dropped.
    std::thread::spawn(move || {
        while rx.recv().is_ok() {
            while rx.recv_timeout(Duration::from_millis(50)).is_ok() {}
            reload(&path, &limiter);
        }
    });
    Ok(watcher)
}

/// Read the file again and decide under its limits from the next request
/// on; a file that is wrong (or half written) leaves the limits as they are.
pub fn reload(path: &Path, limiter: &Limiter<Limits>) {
    let result = load(path).and_then(|limits| {
        if &limits != limiter.algorithm() {
            limiter.set_algorithm(limits)?;
            eprintln!(
                "reload: limits now {:?}",
                limiter.quotas().collect::<Vec<_>>()
            );
        }
        Ok(())
    });
    if let Err(e) = result {
        eprintln!(
            "reload: {}: {e}; the limits stay as they were",
            path.display()
        );
    }
}

/// The app: one route, limited per client IP by `limiter`.
pub fn app(limiter: Limiter<Limits>) -> Router {
    Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(RateLimitLayer::new(limiter, PeerIp::new()))
}

/// Serve `app` on `listener`, with the peer address `PeerIp` keys on.
///
/// # Errors
/// When serving fails.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
}

#[allow(dead_code)] // `tests/reload.rs` includes this file, not its main.
#[tokio::main]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let path: PathBuf = std::env::args_os().nth(1).map_or_else(
        || concat!(env!("CARGO_MANIFEST_DIR"), "/examples/reload.toml").into(),
        PathBuf::from,
    );
    let limiter = limiter(floodgate::store::MemoryStore::new().into(), &path)?;
    println!("limits: {:?}", limiter.quotas().collect::<Vec<_>>());
    let _watcher = watch(&path, limiter.clone())?;
    // `kill -HUP <pid>` reloads too (where a file watcher is not wanted).
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (mut hangups, path, limiter) =
            (signal(SignalKind::hangup())?, path.clone(), limiter.clone());
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                reload(&path, &limiter);
            }
        });
    }
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!(
        "listening on http://{}; edit {} to change the limits",
        listener.local_addr()?,
        path.display()
    );
    serve(listener, app(limiter)).await?;
    Ok(())
}
