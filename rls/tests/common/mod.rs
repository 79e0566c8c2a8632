//! A floodgate-rls served in the test's process on a free loopback port,
//! its configuration in a temporary directory, and a tonic client to it.

#![allow(dead_code)] // Each test file uses its own part.

use std::path::PathBuf;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use floodgate_rls::{Headers, LogFormat, OnStoreFailure, Options};
use tokio::sync::oneshot;
use tonic::transport::Channel;

/// The configuration of the protocol tests (Rust and Python): every
/// feature of envoyproxy/ratelimit's format, domain `edge`.
pub const EDGE: &str = r#"
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 50 }
  - key: path
    value: /upload
    rate_limit: { unit: minute, requests_per_unit: 20, name: upload }
  - key: path
    value: /static/*
    rate_limit: { unlimited: true }
  - key: path
    value: /v1/*/items
    rate_limit: { unit: hour, requests_per_unit: 2 }
  - key: api_key
    rate_limit: { unit: hour, requests_per_unit: 100 }
    descriptors:
      - key: plan
        value: free
        rate_limit: { unit: hour, requests_per_unit: 3 }
      - key: plan
        rate_limit: { unit: hour, requests_per_unit: 5 }
  - key: shadowed
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: 1, name: tenant_small }
  - key: tenant_vip
    rate_limit: { unit: hour, requests_per_unit: 1000, replaces: [ { name: tenant_small } ] }
  - key: zero
    rate_limit: { unit: hour, requests_per_unit: 0 }
"#;

// The child-process guard and free ports, as the benches have them.
#[path = "../../benches/support/mod.rs"]
mod support;
// Not every test binary starts a child process.
#[allow(unused_imports)]
pub use support::{free_port, Killed};

/// Wait, if need be, for a fixed window of `unit_secs` (aligned to the
/// Unix epoch, as the service's) with at least `need` left: the hits of a
/// test that counts must all fall in one window.
pub async fn same_window(unit_secs: u64, need: std::time::Duration) {
    let unit = std::time::Duration::from_secs(unit_secs);
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970");
    let into = std::time::Duration::from_nanos((since_epoch.as_nanos() % unit.as_nanos()) as u64);
    let left = unit - into;
    if left < need {
        tokio::time::sleep(left + std::time::Duration::from_millis(20)).await;
    }
}

pub const OK: i32 = 1;
pub const OVER_LIMIT: i32 = 2;

pub struct Rls {
    pub client: RateLimitServiceClient<Channel>,
    pub addr: std::net::SocketAddr,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    pub served: Option<tokio::task::JoinHandle<()>>,
}

impl Rls {
    /// The configuration file's path.
    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.yaml")
    }

    /// Ask, expecting an answer.
    pub async fn ask(&mut self, req: RateLimitRequest) -> RateLimitResponse {
        self.client
            .should_rate_limit(req)
            .await
            .expect("ShouldRateLimit answered")
            .into_inner()
    }

    /// Stop serving (graceful) and wait for the server to return.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            served.await.expect("the server task ended");
        }
    }
}

pub fn options(config: PathBuf) -> Options {
    Options {
        config,
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        metrics_addr: "off".into(),
        redis_url: None,
        redis_cluster: false,
        store_timeout_ms: 100,
        on_store_failure: OnStoreFailure::Error,
        headers: Headers::None,
        reload_ms: 100,
        log_format: LogFormat::Text,
        shadow_mode: false,
        merge_domains: false,
        response_dynamic_metadata: false,
        quota_mode: false,
    }
}

/// Serve `yaml` with the options `tune` sets.
pub async fn start_with(yaml: &str, tune: impl FnOnce(&mut Options)) -> Rls {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, yaml).unwrap();
    let mut options = options(path);
    tune(&mut options);
    let service = floodgate_rls::service(&options).expect("the configuration loads");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(async move {
        floodgate_rls::serve(&options, service, listener, async {
            let _ = stopped.await;
        })
        .await
        .expect("served");
    });
    let client = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    Rls {
        client,
        addr,
        dir,
        stop: Some(stop),
        served: Some(served),
    }
}

pub async fn start(yaml: &str) -> Rls {
    start_with(yaml, |_| {}).await
}

/// A descriptor of `entries`.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}

/// `req` sent `calls` times by each of `clients` at once (a task each):
/// how many were answered `OK`.
pub async fn count_admitted(
    clients: impl IntoIterator<Item = RateLimitServiceClient<Channel>>,
    calls: usize,
    req: &RateLimitRequest,
) -> usize {
    let mut tasks = Vec::new();
    for mut client in clients {
        let req = req.clone();
        tasks.push(tokio::spawn(async move {
            let mut admitted = 0;
            for _ in 0..calls {
                let r = client.should_rate_limit(req.clone()).await.unwrap();
                if r.into_inner().overall_code == OK {
                    admitted += 1;
                }
            }
            admitted
        }));
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    admitted
}

/// A request of `domain` with `descriptors`, one hit.
pub fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: 0,
    }
}
