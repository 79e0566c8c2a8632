//! What floodgate reports about its decisions, through the [`metrics`]
//! facade, labelled with the limiter's name:
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `floodgate_decisions_total` | counter | `limiter`, `outcome` = `allowed` / `denied` |
//! | `floodgate_degraded_total` | counter | `limiter`: decisions made by the failure policy (store down) |
//! | `floodgate_cache_hits_total` | counter | `limiter`: denials answered by the local deny cache, without the store (also counted as denied) |
//! | `floodgate_decision_seconds` | histogram | `limiter`: time to decide, store round trip included (Redis stores only: a memory decision takes about 100 ns, and timing it would cost as much) |
//!
//! Install your recorder (e.g. `metrics-exporter-prometheus`) **before**
//! building limiters: each limiter registers its handles once, when built,
//! so the hot path does no lookup. Each decision also opens a `tracing` span
//! `floodgate.decide` at debug level.

use metrics::{Counter, Histogram};
use std::time::Duration;

/// The handles of one limiter, registered once.
#[derive(Clone)]
pub(crate) struct Metrics {
    allowed: Counter,
    denied: Counter,
    degraded: Counter,
    cache_hits: Counter,
    latency: Histogram,
}

impl Metrics {
    pub(crate) fn new(limiter: &str) -> Self {
        let name = limiter.to_string();
        Self {
            allowed: metrics::counter!("floodgate_decisions_total", "limiter" => name.clone(), "outcome" => "allowed"),
            denied: metrics::counter!("floodgate_decisions_total", "limiter" => name.clone(), "outcome" => "denied"),
            degraded: metrics::counter!("floodgate_degraded_total", "limiter" => name.clone()),
            cache_hits: metrics::counter!("floodgate_cache_hits_total", "limiter" => name.clone()),
            latency: metrics::histogram!("floodgate_decision_seconds", "limiter" => name),
        }
    }

    /// A decision of a remote store, and how long it took.
    pub(crate) fn decided(&self, allowed: bool, degraded: bool, took: Duration) {
        self.counted(allowed);
        if degraded {
            self.degraded.increment(1);
        }
        self.latency.record(took.as_secs_f64());
    }

    /// A decision of the memory store: counted, not timed.
    pub(crate) fn counted(&self, allowed: bool) {
        if allowed {
            self.allowed.increment(1);
        } else {
            self.denied.increment(1);
        }
    }

    pub(crate) fn cache_hit(&self) {
        self.cache_hits.increment(1);
        self.denied.increment(1);
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}
