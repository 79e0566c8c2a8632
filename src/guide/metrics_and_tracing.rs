//! Metrics and tracing: watching the limiter in production.
//!
//! # Metrics
//!
//! floodgate reports through the [`metrics`](https://docs.rs/metrics) facade,
//! so any exporter works (Prometheus, `StatsD`, ...). Each limiter, rate or
//! concurrency, reports labelled with its [name](crate::LimiterBuilder::name)
//! (never with client keys, so the number of series stays small):
//!
//! | metric | kind | labels | watch for |
//! |---|---|---|---|
//! | `floodgate_decisions_total` | counter | `limiter`, `outcome` = `allowed` / `denied`, `reason` = [why](crate::Reason) (`within_limit`, `over_limit`, `cost_too_high`, `fail_open`, `fail_closed`, and `exempt` / `blocked` for keys on the [exemptions](super::exemptions)) | the share denied, per limiter: a jump is an attack, a broken client, or a limit set too low; `cost_too_high` is a client asking for more than a limit can ever hold. Counts decisions (checks, the layers' charges and their trials for `count_only_when`, acquires), not peeks, refunds, releases or the charges made after a response |
//! | `floodgate_degraded_total` | counter | `limiter` | anything above zero: the store is failing and the [failure policy](super::failures) is deciding. Of the same charges, those the policy decided (a fallback limiter's are counted in `floodgate_decisions_total` under its own name too) |
//! | `floodgate_cache_hits_total` | counter | `limiter` | denials answered by the [deny cache](super::redis_and_cluster#clients-that-keep-hammering-the-deny-cache) without calling the store (also counted in `floodgate_decisions_total` as denied) |
//! | `floodgate_near_limit_total` | counter | `limiter` | admissions that left some limit with less than a fifth of it: a rising share of the admissions means denials are coming ([near the limit](super::exemptions#seeing-a-limit-before-it-bites)) |
//! | `floodgate_shadow_denials_total` | counter | `limiter`, `limit` | requests a limit in [shadow mode](super::exemptions#one-limit-in-shadow-mode) would have denied: what enforcing it would cost your clients |
//! | `floodgate_decision_seconds` | histogram (rendered as a summary by the Prometheus exporter unless you set its buckets: see below) | `limiter` | the time of every call to Redis (charges, peeks, refunds, releases), round trip included: well under a millisecond on a healthy local network; near the timeout (100 ms) means trouble. Redis stores only: a memory decision takes about 100 ns and is not timed |
//!
//! **Install the recorder before building limiters.** Each limiter registers
//! its counters once, when it is built, so that a decision does no lookup;
//! a limiter built before the recorder was installed reports nowhere.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use floodgate::{algorithm::FixedWindow, store::MemoryStore, Limiter};
//! use metrics_exporter_prometheus::PrometheusBuilder;
//! use std::time::Duration;
//!
//! // First the recorder (in main, before anything else)...
//! let prometheus = PrometheusBuilder::new().install_recorder()?;
//! // ...then the limiters.
//! let api = Limiter::builder(MemoryStore::new(), FixedWindow::new(2, Duration::from_secs(60)))
//!     .name("api")
//!     .build()?;
//! for _ in 0..3 {
//!     api.check("ana", 1).await?;
//! }
//!
//! // Serve this on a `/metrics` route (see examples/prometheus.rs).
//! let text = prometheus.render();
//! assert!(text.contains(r#"floodgate_decisions_total{limiter="api",outcome="allowed",reason="within_limit"} 2"#));
//! assert!(text.contains(r#"floodgate_decisions_total{limiter="api",outcome="denied",reason="over_limit"} 1"#));
//! # Ok(()) }
//! ```
//!
//! **`floodgate_decision_seconds` in Prometheus: set its buckets.** floodgate
//! records it as a `metrics` histogram; what the exporter makes of it is the
//! exporter's choice. `metrics-exporter-prometheus` renders a histogram
//! without buckets as a Prometheus *summary*: quantiles
//! (`floodgate_decision_seconds{quantile="0.99"}`) computed in each process,
//! which cannot be added up across your app servers. With buckets it renders
//! a Prometheus histogram (`floodgate_decision_seconds_bucket{le="..."}`),
//! and `histogram_quantile(0.99, sum by (le)
//! (rate(floodgate_decision_seconds_bucket[5m])))` is the latency over all
//! of them. Buckets from 0.1 ms to past the timeout:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
//!
//! let prometheus = PrometheusBuilder::new()
//!     .set_buckets_for_metric(
//!         Matcher::Full("floodgate_decision_seconds".into()),
//!         &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25],
//!     )?
//!     .install_recorder()?;
//! // Then build the limiters, and serve `prometheus.render()` on `/metrics`.
//! # let _ = prometheus;
//! # Ok(()) }
//! ```
//!
//! `examples/prometheus.rs` is a whole app with `/metrics`, these buckets
//! included (`cargo run --example prometheus`); its test checks the
//! histogram on a real Redis. Shadow-mode limiters (see
//! [`several_limits`](super::several_limits)) count their would-be denials
//! in `floodgate_decisions_total` too: that is how to size a limit before
//! enforcing it.
//!
//! For store failures by cause, the
//! [`failure_hook`](crate::LimiterBuilder::failure_hook) is called for each
//! decision the store could not make, with the
//! [`FailureKind`](crate::failure::FailureKind) (timeout, unavailable,
//! connection, server, circuit open, ...) and the policy's decision:
//!
//! ```
//! use floodgate::{algorithm::Gcra, store::RedisStore, Limiter};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limiter = Limiter::builder(RedisStore::from_url("redis://127.0.0.1:6379")?, Gcra::new(10, Duration::from_secs(1)))
//!     .name("api")
//!     .failure_hook(|event| {
//!         // Runs on the request's task: keep it short and non-blocking.
//!         metrics::counter!(
//!             "app_rate_limit_store_failures_total",
//!             "limiter" => event.limiter.to_string(),
//!             "kind" => event.kind.as_str()
//!         )
//!         .increment(1);
//!     })
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! [`Limiter::circuit_state`](crate::Limiter::circuit_state) tells whether a
//! limiter has stopped calling its store, e.g. for a health endpoint.
//!
//! # Tracing
//!
//! floodgate logs through [`tracing`](https://docs.rs/tracing); with
//! `tracing-subscriber`, `RUST_LOG=floodgate=info` shows what matters and
//! `RUST_LOG=floodgate=debug` every decision.
//!
//! | level | what | fields |
//! |---|---|---|
//! | `debug` span | `floodgate.decide`, around every decision | `limiter`, `limits` (their number), `mode` (`check`, `peek`, `refund`), `cost` |
//! | `debug` | each decision made by the failure policy | `limiter`, `kind`, `policy`, `allowed` |
//! | `warn` | the store is failing: at most once per second per limiter, with how many degraded decisions it stands for | `limiter`, `kind`, `error`, `policy`, `degraded_since_last_warning` |
//! | `warn` | the circuit opened: the store is no longer called for a while | `limiter`, `kind`, `error`, `policy`, `failures`, `cool_down_ms` |
//! | `info` | the circuit closed: limiting resumed | `limiter` |
//! | `info` | shadow mode served a request over the limit | `limiter`, `reason` |
//! | `warn` | a decision failed and the layer answered 503 ([`ReturnError`](crate::failure::FailurePolicy::ReturnError) policy) | `limiter`, `error` |
//! | `warn` | what runs after the response failed: a refund, a response-based charge, a lease's release (the lease then expires by itself) | `error` |
//!
//! Denials themselves are not logged (they are counted): an attack would
//! flood the logs. Log them from your own middleware or your access log if
//! you need them per client; the response status (429) and the `RateLimit`
//! header say everything about them.
