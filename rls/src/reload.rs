//! Configuration changed while serving: the files are read again every
//! `interval` (a quarter of a second by default), and when their content
//! differs the new rules replace the old in one swap. Reading, rather than
//! file events, sees every way a file changes (an editor's rename, a
//! Kubernetes ConfigMap's symlink swap) and costs a few small reads. A
//! broken file keeps the last good rules in force and says why, in the log
//! and in `floodgate_rls_config_loads{result="error"}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::config;
use crate::rules::Rules;

/// What the files held when last read.
type Snapshot = Vec<(PathBuf, Vec<u8>)>;

fn snapshot(path: &Path) -> Snapshot {
    let files = config::files(path).unwrap_or_default();
    files
        .into_iter()
        .map(|f| {
            let bytes = std::fs::read(&f).unwrap_or_default();
            (f, bytes)
        })
        .collect()
}

/// Keep `rules` as the files at `path` say, until the task is dropped.
pub(crate) async fn watch(
    path: PathBuf,
    merge_domains: bool,
    rules: Arc<ArcSwap<Rules>>,
    interval: Duration,
) {
    let mut last = snapshot(&path);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let now = snapshot(&path);
        if now == last {
            continue;
        }
        last = now;
        match config::load_with(&path, merge_domains) {
            Ok(new) => {
                let domains = new.domains().count();
                rules.store(Arc::new(new));
                crate::metrics::config_loaded(true);
                tracing::info!(path = %path.display(), domains, "configuration reloaded");
            }
            Err(e) => {
                crate::metrics::config_loaded(false);
                tracing::error!(error = %e, "configuration refused; the previous one stays in force");
            }
        }
    }
}
