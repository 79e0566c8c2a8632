//! What floodgate reports about its decisions, through the [`metrics`]
//! facade, labelled with the limiter's name:
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `floodgate_decisions_total` | counter | `limiter`, `outcome` = `allowed` / `denied`, `reason` = [`Reason::as_str`](crate::Reason::as_str): every decision (`check`, `check_all`, `check_with`, the layers' charges and their trials for `count_only_when`, a concurrency limiter's `acquire`); peeks, refunds, releases and the charges settled after a response are not decisions here |
//! | `floodgate_degraded_total` | counter | `limiter`: those decisions made by the failure policy (store down) |
//! | `floodgate_cache_hits_total` | counter | `limiter`: denials answered by the local deny cache, without the store (also counted as decisions) |
//! | `floodgate_local_decisions_total` | counter | `limiter`: decisions of a hot key made from this server's allotment, without the store (also counted as decisions); only with [`hot_keys`](crate::LimiterBuilder::hot_keys) |
//! | `floodgate_allotments_total` | counter | `limiter`: slices of hot keys taken from the store |
//! | `floodgate_allotment_units_total` | counter | `limiter`, `event` = `taken` / `returned` (a bucket's unused units given back) / `expired` (a window's unused units, lost with it) |
//! | `floodgate_near_limit_total` | counter | `limiter`: admissions (among the decisions above) that left some limit with less than a fifth of it (envoy's `near_limit`): a limit about to bite |
//! | `floodgate_shadow_denials_total` | counter | `limiter`, `limit`: decisions a limit in shadow mode ([`Limits::shadow`](crate::algorithm::Limits::shadow)) would have denied; the request was decided by the other limits |
//! | `floodgate_waiting_requests` | gauge | `limiter`: requests a [`RateLimitLayer`](crate::layer::RateLimitLayer) holds until their booked time now ([`wait_up_to`](crate::layer::RateLimitLayer::wait_up_to)) |
//! | `floodgate_waits_total` | counter | `limiter`, `end` = `served` (held, then served) / `gone` (dropped while waiting: its reservation given back) |
//! | `floodgate_decision_seconds` | histogram | `limiter`: time of every call to a Redis store, round trip included (a memory decision takes about 100 ns, and timing it would cost as much) |
//!
//! Install your recorder (e.g. `metrics-exporter-prometheus`) **before**
//! building limiters: each limiter registers its handles once, when built,
//! so the hot path does no lookup. Each decision also opens a `tracing` span
//! `floodgate.decide` at debug level.

use crate::decision::{Decision, Reason};
use metrics::{Counter, Histogram};
use std::time::Duration;

/// The handles of one limiter, registered once.
#[derive(Clone)]
pub(crate) struct Metrics {
    /// One per reason, in the order of `Reason::ALL`.
    decisions: [Counter; 7],
    degraded: Counter,
    cache_hits: Counter,
    near_limit: Counter,
    latency: Histogram,
    /// The limiter's name, for the counters registered when first used.
    limiter: std::sync::Arc<str>,
}

impl Metrics {
    pub(crate) fn new(limiter: &str) -> Self {
        let counter = |reason: Reason| {
            let outcome = match reason {
                r if r.admits() => "allowed",
                _ => "denied",
            };
            metrics::counter!("floodgate_decisions_total", "limiter" => limiter.to_owned(), "outcome" => outcome, "reason" => reason.as_str())
        };
        Self {
            decisions: Reason::ALL.map(counter),
            degraded: metrics::counter!("floodgate_degraded_total", "limiter" => limiter.to_owned()),
            cache_hits: metrics::counter!("floodgate_cache_hits_total", "limiter" => limiter.to_owned()),
            near_limit: metrics::counter!("floodgate_near_limit_total", "limiter" => limiter.to_owned()),
            limiter: limiter.into(),
            latency: metrics::histogram!("floodgate_decision_seconds", "limiter" => limiter.to_owned()),
        }
    }

    /// A charging decision.
    #[inline]
    pub(crate) fn decided(&self, reason: Reason, degraded: bool) {
        self.decisions[reason.index()].increment(1);
        if degraded {
            self.degraded.increment(1);
        }
    }

    /// A charging decision of one limit, from its reply.
    #[inline(always)]
    pub(crate) fn decided_reply(&self, reason: Reason, near_limit: bool) {
        self.decisions[reason.index()].increment(1);
        if near_limit {
            self.near_limit.increment(1);
        }
    }

    /// An admission that left less than a fifth of a limit.
    pub(crate) fn near_limit(&self) {
        self.near_limit.increment(1);
    }

    /// A decision that limit `limit`, in shadow mode, would have denied
    /// (looked up when it happens: limits resolved per request have names
    /// known only then).
    #[inline(never)]
    pub(crate) fn shadow_denial(&self, limit: &str) {
        metrics::counter!("floodgate_shadow_denials_total", "limiter" => self.limiter.to_string(), "limit" => limit.to_owned())
            .increment(1);
    }

    /// How long a call to a store that waits took.
    pub(crate) fn timed(&self, took: Duration) {
        self.latency.record(took.as_secs_f64());
    }

    /// A denial answered by the deny cache.
    pub(crate) fn cache_hit(&self, d: &Decision) {
        self.cache_hits.increment(1);
        self.decided(d.reason(), d.is_degraded());
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}
