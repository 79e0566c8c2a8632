//! Load on a limiter from many tasks while a test breaks its store (a
//! failover, a resharding), and the audit afterwards: per-key admissions
//! counted by the callers against what the store remembers.

use floodgate::algorithm::Algorithm;
use floodgate::Limiter;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per-key admissions counted by the callers, and the outcome of every call.
pub struct Load {
    pub keys: Vec<String>,
    admitted: Vec<AtomicU64>,
    calls: AtomicU64,
    degraded: AtomicU64,
    errors: AtomicU64,
    /// The longest any call took, in µs.
    slowest_us: AtomicU64,
    /// The first few errors, to show.
    pub seen: Mutex<Vec<String>>,
    stop: AtomicBool,
}

/// Counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Counts {
    pub calls: u64,
    pub degraded: u64,
    pub errors: u64,
}

/// What the store remembers against what the callers saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct Audit {
    /// Keys that admitted their whole limit.
    pub full: usize,
    /// Keys charged more than the callers saw admitted (a call that failed
    /// after its script ran, or one that ran twice: strict, never loose).
    pub charged_more: usize,
    /// Admissions the store no longer remembers (writes lost, e.g. in a
    /// failover before they reached the replica), summed over all keys.
    pub forgotten: u64,
    /// Keys with forgotten admissions.
    pub keys_forgetting: usize,
    /// The most any key admitted.
    pub most_admitted: u64,
}

impl Load {
    pub fn new(keys: Vec<String>) -> Arc<Self> {
        Arc::new(Self {
            admitted: keys.iter().map(|_| AtomicU64::new(0)).collect(),
            keys,
            calls: AtomicU64::new(0),
            degraded: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            slowest_us: AtomicU64::new(0),
            seen: Mutex::default(),
            stop: AtomicBool::new(false),
        })
    }

    /// `tasks` tasks calling `check(key, 1)` over all keys until `stop`.
    pub fn spawn<A: Algorithm>(
        self: &Arc<Self>,
        limiter: &Limiter<A>,
        tasks: usize,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        (0..tasks)
            .map(|t| {
                let (load, limiter) = (self.clone(), limiter.clone());
                tokio::spawn(async move {
                    let mut i = t;
                    while !load.stop.load(Ordering::Relaxed) {
                        let k = i % load.keys.len();
                        i += 7;
                        load.calls.fetch_add(1, Ordering::Relaxed);
                        let started = Instant::now();
                        let decided = limiter.check(&load.keys[k], 1).await;
                        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                        load.slowest_us.fetch_max(took, Ordering::Relaxed);
                        match decided {
                            Ok(d) => {
                                if d.allowed() {
                                    load.admitted[k].fetch_add(1, Ordering::Relaxed);
                                }
                                if d.is_degraded() {
                                    load.degraded.fetch_add(1, Ordering::Relaxed);
                                    tokio::time::sleep(Duration::from_millis(2)).await;
                                }
                            }
                            Err(e) => {
                                load.errors.fetch_add(1, Ordering::Relaxed);
                                load.note(e.to_string());
                                tokio::time::sleep(Duration::from_millis(2)).await;
                            }
                        }
                    }
                })
            })
            .collect()
    }

    fn note(&self, error: String) {
        let mut seen = self.seen.lock().unwrap();
        if seen.len() < 5 {
            seen.push(error);
        }
    }

    pub fn counts(&self) -> Counts {
        Counts {
            calls: self.calls.load(Ordering::Relaxed),
            degraded: self.degraded.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    /// The longest any call has taken so far.
    pub fn slowest(&self) -> Duration {
        Duration::from_micros(self.slowest_us.load(Ordering::Relaxed))
    }

    /// Stop the tasks and wait for them: a panic in one fails the test.
    pub async fn stop(&self, tasks: Vec<tokio::task::JoinHandle<()>>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.expect("a load task panicked");
        }
    }

    /// Admissions per key, by key.
    pub fn admitted(&self) -> Vec<(&str, u64)> {
        self.keys
            .iter()
            .zip(&self.admitted)
            .map(|(k, n)| (k.as_str(), n.load(Ordering::Relaxed)))
            .collect()
    }

    /// Each key's admissions against what `truth` (a limiter of the same
    /// limit `limit`, namespace and frozen clock, on the store) remembers:
    /// asks with cost 0, so nothing is charged.
    pub async fn check_against<A: Algorithm>(&self, truth: &Limiter<A>, limit: u64) -> Audit {
        let mut audit = Audit::default();
        for (k, n) in self.admitted() {
            let d = truth.check(k, 0).await.expect("a decision");
            let charged = limit - d.remaining();
            audit.full += usize::from(n >= limit);
            audit.charged_more += usize::from(charged > n);
            if charged < n {
                audit.forgotten += n - charged;
                audit.keys_forgetting += 1;
            }
            audit.most_admitted = audit.most_admitted.max(n);
        }
        audit
    }
}
