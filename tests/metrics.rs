//! The Prometheus example's `/metrics` shows floodgate's counters and its
//! decision-latency histogram, with the right counts.

#[allow(dead_code)]
#[path = "../examples/prometheus.rs"]
mod prometheus;

use floodgate::store::MemoryStore;
use std::net::SocketAddr;

#[tokio::test]
async fn counters_and_latency_histogram_reach_prometheus() {
    let handle = prometheus::install();
    let app = prometheus::app(MemoryStore::new().into(), handle);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap()
    });
    let mut denied = 0;
    for _ in 0..14 {
        denied += usize::from(reqwest::get(&base).await.unwrap().status() == 429);
    }
    assert!(denied >= 3, "burst of 10 then denials, got {denied}");
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |line_start: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(line_start))
            .unwrap_or_else(|| panic!("no `{line_start}` in:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(
        value(r#"floodgate_decisions_total{limiter="per-ip",outcome="denied"}"#),
        denied as f64
    );
    assert_eq!(
        value(r#"floodgate_decisions_total{limiter="per-ip",outcome="allowed"}"#),
        (14 - denied) as f64
    );
    // The histogram (a summary by default in this exporter) counts every decision.
    assert_eq!(
        value(r#"floodgate_decision_seconds_count{limiter="per-ip"}"#),
        14.0
    );
    assert!(
        text.contains(r#"floodgate_decision_seconds{limiter="per-ip",quantile="0.99"}"#),
        "{text}"
    );
}
