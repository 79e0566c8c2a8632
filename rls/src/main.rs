//! `floodgate-rls`: see the crate's docs (`cargo doc -p floodgate-rls`)
//! and `floodgate-rls --help`.

use clap::Parser;
use floodgate_rls::{LogFormat, Options};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let options = Options::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("FLOODGATE_RLS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    match options.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    match run(options).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "floodgate-rls stopped");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    // The recorder first: limiters register their metrics when built.
    if options.metrics_addr != "off" {
        let addr: std::net::SocketAddr = options
            .metrics_addr
            .parse()
            .map_err(|e| format!("--metrics-addr {:?}: {e}", options.metrics_addr))?;
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()?;
        tracing::info!(%addr, "metrics on /metrics");
    }
    let service = floodgate_rls::service(&options)?;
    let listener = tokio::net::TcpListener::bind(options.grpc_addr).await?;
    tracing::info!(
        addr = %listener.local_addr()?,
        config = %options.config.display(),
        store = if options.redis_url.is_some() { "redis" } else { "memory" },
        "serving ShouldRateLimit"
    );
    floodgate_rls::serve(&options, service, listener, shutdown_signal()).await?;
    Ok(())
}

/// SIGTERM (Kubernetes, systemd) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}
