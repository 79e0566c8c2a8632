//! `floodgate-rls`: Envoy's rate limit service
//! (`envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`),
//! decided by floodgate, for services in any language behind Envoy, Istio
//! or Envoy Gateway.
//!
//! It reads envoyproxy/ratelimit's YAML as it is ([`config`]), matches a
//! request's descriptors as it does ([`rules`]), and answers the same
//! fields. What changes for its users:
//!
//! - **All or nothing**: a request's descriptors are decided in one call
//!   to the store; a request refused by one descriptor charges none of the
//!   others, and a refused hit is not counted (envoyproxy/ratelimit counts
//!   every hit on every descriptor, over the limit too, so a client that
//!   keeps retrying keeps itself locked out).
//! - **Any of the six algorithms** per descriptor (`algorithm:`; fixed
//!   windows by default, aligned to the unit as envoyproxy/ratelimit's).
//! - One atomic script per decision on Redis (no `INCRBY` then `EXPIRE`),
//!   Sentinel, Cluster and TLS through floodgate's stores; the in-process
//!   memory store for one instance.
//! - A failure policy for a store that fails: by default the error goes
//!   back to Envoy (`UNAVAILABLE`), whose `failure_mode_deny` decides, as
//!   with envoyproxy/ratelimit; `allow` or `deny` answer from here.
//!
//! The binary's options are [`Options`] (`floodgate-rls --help`); the
//! service alone is [`RateLimitService`], to serve from your own tonic
//! server.

pub mod config;
mod decide;
mod hot;
mod metadata;
mod metrics;
mod reload;
pub mod rules;
mod service;
mod slots;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use floodgate::algorithm::{AnyAlgorithm, FixedWindow, Limits};
use floodgate::failure::FailurePolicy;
use floodgate::headers::{HeaderStyle, ResetUnit};
use floodgate::store::{MemoryStore, RedisClusterStore, RedisStore, Store};
use floodgate::Limiter;
use tokio::net::TcpListener;

pub use config::ConfigFileError;
pub use rules::{Rule, Rules, Unit};
pub use service::{RateLimitService, MAX_DESCRIPTORS};

/// The binary's options, from the command line or the environment.
#[derive(Parser, Debug, Clone)]
#[command(name = "floodgate-rls", version, about)]
pub struct Options {
    /// The configuration: a YAML file, or a directory of them (one domain
    /// each), in envoyproxy/ratelimit's format. Read again while serving.
    #[arg(long, env = "FLOODGATE_RLS_CONFIG")]
    pub config: PathBuf,
    /// Where to serve gRPC (`ShouldRateLimit` and `grpc.health.v1`).
    #[arg(long, env = "FLOODGATE_RLS_GRPC_ADDR", default_value = "0.0.0.0:8081")]
    pub grpc_addr: SocketAddr,
    /// Where to serve Prometheus `/metrics`, or `off`.
    #[arg(
        long,
        env = "FLOODGATE_RLS_METRICS_ADDR",
        default_value = "0.0.0.0:9090"
    )]
    pub metrics_addr: String,
    /// Redis (`redis://`, `rediss://`, `redis+sentinel://`); without it the
    /// counters live in this process.
    #[arg(long, env = "REDIS_URL")]
    pub redis_url: Option<String>,
    /// `--redis-url` is a node of a Redis Cluster.
    #[arg(long, env = "FLOODGATE_RLS_REDIS_CLUSTER")]
    pub redis_cluster: bool,
    /// How long a store call may take before the failure policy answers.
    #[arg(long, env = "FLOODGATE_RLS_STORE_TIMEOUT_MS", default_value_t = 100)]
    pub store_timeout_ms: u64,
    /// What to answer when the store fails: `error` (`UNAVAILABLE`: Envoy's
    /// `failure_mode_deny` decides), `allow` (`OK`) or `deny` (`OVER_LIMIT`).
    #[arg(
        long,
        env = "FLOODGATE_RLS_ON_STORE_FAILURE",
        value_enum,
        default_value = "error"
    )]
    pub on_store_failure: OnStoreFailure,
    /// Header fields for Envoy to add to its responses: `none`, `ietf`
    /// (`RateLimit`, `RateLimit-Policy`) or `legacy` (`X-RateLimit-*`).
    #[arg(
        long,
        env = "FLOODGATE_RLS_HEADERS",
        value_enum,
        default_value = "none"
    )]
    pub headers: Headers,
    /// How often the configuration is read again, in milliseconds.
    #[arg(long, env = "FLOODGATE_RLS_RELOAD_MS", default_value_t = 250)]
    pub reload_ms: u64,
    /// Log lines as `text` or `json`.
    #[arg(
        long,
        env = "FLOODGATE_RLS_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// Global shadow mode (envoyproxy/ratelimit's `SHADOW_MODE`): decide
    /// as usual, answer `OK` whatever the limits say, and count each
    /// answer so overridden.
    #[arg(long, env = "FLOODGATE_RLS_SHADOW_MODE")]
    pub shadow_mode: bool,
    /// A domain may be in several files of the configuration directory
    /// (envoyproxy/ratelimit's `MERGE_DOMAIN_CONFIG`): their descriptors
    /// are put together.
    #[arg(long, env = "FLOODGATE_RLS_MERGE_DOMAINS")]
    pub merge_domains: bool,
    /// Answers carry dynamic metadata for Envoy (envoyproxy/ratelimit's
    /// `RESPONSE_DYNAMIC_METADATA`): the request's domain and descriptors,
    /// and the `metadata:` of the descriptors not reported `OVER_LIMIT`.
    #[arg(long, env = "FLOODGATE_RLS_RESPONSE_DYNAMIC_METADATA")]
    pub response_dynamic_metadata: bool,
    /// Global quota mode (envoyproxy/ratelimit's `QUOTA_MODE`): every
    /// descriptor as if it said `quota_mode: true`; a request is over only
    /// when all of them are.
    #[arg(long, env = "FLOODGATE_RLS_QUOTA_MODE")]
    pub quota_mode: bool,
}

/// What to answer when the store fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnStoreFailure {
    /// `UNAVAILABLE`: Envoy's `failure_mode_deny` decides.
    Error,
    /// `OK`.
    Allow,
    /// `OVER_LIMIT`.
    Deny,
}

/// The rate-limit header fields to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Headers {
    /// None.
    None,
    /// `RateLimit` and `RateLimit-Policy`.
    Ietf,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset`.
    Legacy,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// The service `options` describe: its store, limiter and rules.
///
/// # Errors
/// A configuration file refused, a Redis URL that is not one.
pub fn service(options: &Options) -> Result<RateLimitService, Box<dyn std::error::Error>> {
    let rules = config::load_with(&options.config, options.merge_domains)?;
    let store: Store = match &options.redis_url {
        None => MemoryStore::new().into(),
        Some(url) if options.redis_cluster => RedisClusterStore::from_url(url)?.into(),
        Some(url) => RedisStore::from_url(url)?.into(),
    };
    // One limiter per failure policy, on the same store under the same
    // name (so the same counters): the option's for most domains, the
    // others for the domains whose file names one.
    let timeout = Duration::from_millis(options.store_timeout_ms.max(1));
    let limiter = |on: OnStoreFailure| -> Result<Limiter<Limits>, floodgate::ConfigError> {
        let policy = match on {
            OnStoreFailure::Error => FailurePolicy::ReturnError,
            OnStoreFailure::Allow => FailurePolicy::FailOpen,
            OnStoreFailure::Deny => FailurePolicy::FailClosed,
        };
        // The limiter's own limits are never used: every call brings a
        // request's.
        let own = FixedWindow::try_new(1, Duration::from_secs(1))?;
        let own = Limits::try_new("rls", AnyAlgorithm::FixedWindow(own))?;
        Limiter::builder(store.clone(), own)
            .name("rls")
            .timeout(timeout)
            .on_store_failure(policy)
            .build()
    };
    let mut service =
        RateLimitService::new(limiter(options.on_store_failure)?, rules).store_timeout(timeout);
    for on in [
        OnStoreFailure::Error,
        OnStoreFailure::Allow,
        OnStoreFailure::Deny,
    ] {
        if on != options.on_store_failure {
            service = service.on_store_failure(on, limiter(on)?);
        }
    }
    let headers = match options.headers {
        Headers::None => HeaderStyle::None,
        Headers::Ietf => HeaderStyle::Ietf,
        Headers::Legacy => HeaderStyle::Legacy {
            reset: ResetUnit::DeltaSeconds,
        },
    };
    Ok(service
        .headers(headers)
        .shadow_mode(options.shadow_mode)
        .dynamic_metadata(options.response_dynamic_metadata)
        .quota_mode(options.quota_mode))
}

/// Serve `service` on `listener` until `shutdown` completes, reading the
/// configuration at `options.config` again every `options.reload_ms`. On
/// shutdown, health turns `NOT_SERVING`, no new call is accepted, and the
/// calls in flight are answered before this returns.
///
/// # Errors
/// The server's transport failing.
pub async fn serve(
    options: &Options,
    service: RateLimitService,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer<RateLimitService>>()
        .await;
    let watcher = tokio::spawn(reload::watch(
        options.config.clone(),
        options.merge_domains,
        service.rules().clone(),
        Duration::from_millis(options.reload_ms.max(10)),
    ));
    let shutdown = async move {
        shutdown.await;
        // The server as a whole (the empty name, what most probes ask) and
        // the rate limit service.
        health
            .set_service_status("", tonic_health::ServingStatus::NotServing)
            .await;
        health
            .set_not_serving::<envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer<RateLimitService>>()
            .await;
        tracing::info!("shutting down: answering the calls in flight");
    };
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let served = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(health_service)
        .add_service(service.into_server())
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    watcher.abort();
    served
}
