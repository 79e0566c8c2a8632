//! The Prometheus example's `/metrics` shows floodgate's counters and its
//! decision-latency histogram (in the example's buckets), with the right
//! counts: on Redis every decision is timed; on the memory store decisions
//! are counted, not timed; hot keys count their local decisions and the
//! units of their slices.

#[allow(dead_code)]
#[path = "../examples/prometheus.rs"]
mod prometheus;

mod common;

use floodgate::algorithm::{FixedWindow, Gcra};
use floodgate::clock::ManualClock;
use floodgate::store::{MemoryStore, RedisStore};
use floodgate::{HotKeys, Limiter};
use std::time::Duration;

#[tokio::test]
async fn counters_and_latency_histogram_reach_prometheus() {
    let handle = prometheus::install();
    let redis = common::RedisServer::start();
    let store = RedisStore::from_url(&redis.url()).unwrap();
    let app = prometheus::app(store.into(), handle);
    let base = common::http::serve(app).await;
    let mut denied = 0;
    for _ in 0..14 {
        denied += usize::from(reqwest::get(&base).await.unwrap().status() == 429);
    }
    assert!(denied >= 3, "burst of 10 then denials, got {denied}");
    let scrape = || async { reqwest::get(format!("{base}/metrics")).await?.text().await };
    let text = scrape().await.unwrap();
    let value = |line_start: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("no `{line_start}` in:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(
        value(
            r#"floodgate_decisions_total{limiter="per-ip",outcome="denied",reason="over_limit"}"#
        ),
        denied as f64
    );
    assert_eq!(
        value(
            r#"floodgate_decisions_total{limiter="per-ip",outcome="allowed",reason="within_limit"}"#
        ),
        (14 - denied) as f64
    );
    // The histogram counts every decision, in the example's buckets: a
    // Prometheus histogram, not the summary (quantiles) this exporter
    // renders when no buckets are set.
    assert_eq!(
        value(r#"floodgate_decision_seconds_count{limiter="per-ip"}"#),
        14.0
    );
    assert_eq!(
        value(r#"floodgate_decision_seconds_bucket{limiter="per-ip",le="+Inf"}"#),
        14.0
    );
    for le in prometheus::DECISION_BUCKETS {
        let bucket = format!(r#"floodgate_decision_seconds_bucket{{limiter="per-ip",le="{le}"}}"#);
        assert!(value(&bucket) <= 14.0);
    }
    assert!(!text.contains("quantile="), "{text}");

    // A memory limiter: every decision counted, none timed.
    let memory = Limiter::builder(MemoryStore::new(), Gcra::new(2, Duration::from_secs(60)))
        .name("in-memory")
        .build()
        .unwrap();
    for _ in 0..3 {
        memory.check("k", 1).await.unwrap();
    }
    let text = scrape().await.unwrap();
    let count = |line_start: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(line_start))?;
        line.rsplit(' ').next()?.parse().ok()
    };
    assert_eq!(
        count(
            r#"floodgate_decisions_total{limiter="in-memory",outcome="allowed",reason="within_limit"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        count(
            r#"floodgate_decisions_total{limiter="in-memory",outcome="denied",reason="over_limit"}"#
        ),
        Some(1.0),
        "{text}"
    );
    // Registered when the limiter was built, never recorded into.
    assert_eq!(
        count(r#"floodgate_decision_seconds_count{limiter="in-memory"}"#).unwrap_or(0.0),
        0.0,
        "{text}"
    );

    // Hot keys on Redis: the first check takes 1 + 100 units (one server,
    // slices of 1000 / 10), the next 100 are decided from the slice, the
    // 102nd takes another slice. A fixed window keeps what is left.
    let hot = Limiter::builder(
        RedisStore::from_url(&redis.url()).unwrap(),
        FixedWindow::new(1000, Duration::from_secs(3600)),
    )
    .name("hot")
    .clock(ManualClock::new(common::T0))
    .hot_keys(HotKeys::new(1).threshold(1))
    .build()
    .unwrap();
    for _ in 0..102 {
        assert!(hot.check("partner", 1).await.unwrap().allowed());
    }
    let text = scrape().await.unwrap();
    let count = |line_start: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.starts_with(line_start))?;
        line.rsplit(' ').next()?.parse().ok()
    };
    let expect = [
        (r#"floodgate_local_decisions_total{limiter="hot"}"#, 100.0),
        (r#"floodgate_allotments_total{limiter="hot"}"#, 2.0),
        (
            r#"floodgate_allotment_units_total{limiter="hot",event="taken"}"#,
            200.0,
        ),
        (
            r#"floodgate_allotment_units_total{limiter="hot",event="expired"}"#,
            0.0,
        ),
        (
            r#"floodgate_allotment_units_total{limiter="hot",event="returned"}"#,
            0.0,
        ),
        (
            r#"floodgate_decisions_total{limiter="hot",outcome="allowed",reason="within_limit"}"#,
            102.0,
        ),
        // Only the two takes went to Redis.
        (r#"floodgate_decision_seconds_count{limiter="hot"}"#, 2.0),
    ];
    for (line, want) in expect {
        assert_eq!(count(line).unwrap_or(0.0), want, "{line} in\n{text}");
    }
}
