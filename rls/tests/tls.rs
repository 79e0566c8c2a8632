//! floodgate-rls on a Redis that speaks TLS only (`rediss://`), as managed
//! Redis services do: the binary as a child process, trusting the test's
//! own CA through `SSL_CERT_FILE`, certificates made with `openssl`.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{descriptor, free_port, request, Killed, OK};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

const INSTALL: &str = "run `bash scripts/test`, or install redis-server (with TLS) and openssl (Debian: apt-get install redis-server openssl)";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("openssl: {e}; {INSTALL}"));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`) and a server certificate for 127.0.0.1 signed by it.
fn certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=rls test CA",
    ]);
    ca.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
    ca.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    openssl(dir, &ca);
    let mut csr = vec!["req", "-new"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            "2",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    );
}

fn wait_for(port: u16, what: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited ({status}) before listening on {port}");
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_service_decides_on_a_redis_that_speaks_tls_only() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let redis_port = free_port();
    let path = |f: &str| dir.path().join(f).display().to_string();
    let mut redis = Killed(
        Command::new("redis-server")
            .args([
                "--port",
                "0",
                "--tls-port",
                &redis_port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args([
                "--tls-cert-file",
                &path("server.pem"),
                "--tls-key-file",
                &path("server.key"),
            ])
            .args([
                "--tls-ca-cert-file",
                &path("ca.pem"),
                "--tls-auth-clients",
                "no",
            ])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("redis-server: {e}; {INSTALL}")),
    );
    wait_for(redis_port, "redis-server (TLS)", &mut redis.0);
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 2 }\n",
    )
    .unwrap();
    let grpc_port = free_port();
    let mut rls = Killed(
        Command::new(env!("CARGO_BIN_EXE_floodgate-rls"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("SSL_CERT_FILE", path("ca.pem"))
            .env("REDIS_URL", format!("rediss://127.0.0.1:{redis_port}"))
            .args([
                "--config",
                config.to_str().unwrap(),
                "--metrics-addr",
                "off",
            ])
            .args(["--grpc-addr", &format!("127.0.0.1:{grpc_port}")])
            .stdout(Stdio::null())
            .spawn()
            .expect("the floodgate-rls binary"),
    );
    wait_for(grpc_port, "floodgate-rls", &mut rls.0);
    let mut client = RateLimitServiceClient::connect(format!("http://127.0.0.1:{grpc_port}"))
        .await
        .unwrap();
    let mut codes = Vec::new();
    for _ in 0..3 {
        let r = client
            .should_rate_limit(request("edge", vec![descriptor(&[("user", "ana")])]))
            .await
            .expect("decided over TLS (an error here: the store failed)");
        codes.push(r.into_inner().overall_code);
    }
    assert_eq!(codes, [OK, OK, common::OVER_LIMIT]);
    // The counter lives in the TLS Redis, not in the process.
    let out = Command::new("redis-cli")
        .args([
            "--tls",
            "--cacert",
            &path("ca.pem"),
            "-p",
            &redis_port.to_string(),
        ])
        .args(["--scan"])
        .output()
        .unwrap_or_else(|e| panic!("redis-cli: {e}; {INSTALL}"));
    let keys = String::from_utf8_lossy(&out.stdout);
    assert!(
        keys.lines().any(|k| k.contains("rls")),
        "no floodgate key in Redis: {keys:?}"
    );
}
