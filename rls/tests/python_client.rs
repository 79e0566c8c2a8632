//! An independent client: the `floodgate-rls` binary, started as a child
//! process, asked by Python's grpcio with the Envoy project's generated
//! messages (the PyPI package `xds-protos`), not by the Rust types the
//! server is built from. The checks are in `tests/python/test_rls.py`;
//! this test starts the server, runs the script and asserts it passed.
//!
//! Needs `python3` with grpcio and xds-protos in the folder
//! `FLOODGATE_RLS_PYTHONPATH` names (`bash scripts/test` installs them and
//! sets it). Without them the test fails, saying how to install them.

mod common;

use common::{free_port, EDGE};
use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How long the server may take to listen.
const STARTUP: Duration = Duration::from_secs(30);
/// How long the script may take (it takes a few seconds; more when it
/// waits for a fresh window).
const SCRIPT: Duration = Duration::from_secs(180);

const INSTALL: &str = "run `bash scripts/test` (it installs them and sets the variable), or \
     `python3 -m pip install --target DIR grpcio xds-protos` and set FLOODGATE_RLS_PYTHONPATH=DIR";

/// The folder holding grpcio and xds-protos; a panic saying how to get
/// them when it is not set or lacks them.
fn python_path() -> PathBuf {
    let Some(dir) = std::env::var_os("FLOODGATE_RLS_PYTHONPATH").filter(|d| !d.is_empty()) else {
        panic!(
            "FLOODGATE_RLS_PYTHONPATH is not set: this test needs Python's grpcio and xds-protos; {INSTALL}"
        );
    };
    let dir = PathBuf::from(dir);
    for package in ["grpc", "envoy"] {
        assert!(
            dir.join(package).is_dir(),
            "FLOODGATE_RLS_PYTHONPATH={} has no `{package}` package: this test needs Python's \
             grpcio and xds-protos there; {INSTALL}",
            dir.display()
        );
    }
    dir
}

/// The `floodgate-rls` binary serving `config`, killed when dropped.
struct Server {
    child: Child,
    grpc: SocketAddr,
    metrics: SocketAddr,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    text
}

impl Server {
    /// Start the binary on free ports and wait until both listen. A start
    /// that loses its ports to another process (bound between our release
    /// and its bind) is tried again on others.
    fn start(config: &Path, dir: &Path) -> Self {
        let mut last = String::new();
        for attempt in 0..3 {
            let grpc: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            let metrics: SocketAddr = ([127, 0, 0, 1], free_port()).into();
            if grpc == metrics {
                continue;
            }
            let stdout = dir.join(format!("server-{attempt}.out"));
            let stderr = dir.join(format!("server-{attempt}.err"));
            let child = Command::new(env!("CARGO_BIN_EXE_floodgate-rls"))
                .arg("--config")
                .arg(config)
                .arg("--grpc-addr")
                .arg(grpc.to_string())
                .arg("--metrics-addr")
                .arg(metrics.to_string())
                .arg("--response-dynamic-metadata")
                // Only PATH: no REDIS_URL, no FLOODGATE_RLS_* of the caller.
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("NO_COLOR", "1")
                .stdin(Stdio::null())
                .stdout(File::create(&stdout).expect("the server's stdout file"))
                .stderr(File::create(&stderr).expect("the server's stderr file"))
                .spawn()
                .expect("the floodgate-rls binary starts");
            let mut server = Server {
                child,
                grpc,
                metrics,
                stdout,
                stderr,
            };
            match server.wait_listening() {
                Ok(()) => return server,
                Err(why) => {
                    let output = server.output();
                    last = format!("{why}\n{output}");
                    let lost_port = output.contains("in use");
                    drop(server);
                    if !lost_port {
                        break;
                    }
                }
            }
        }
        panic!("floodgate-rls did not come up: {last}");
    }

    /// Both ports accept connections; an error when the child exits or
    /// the deadline passes first.
    fn wait_listening(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP;
        for addr in [self.grpc, self.metrics] {
            loop {
                if let Some(status) = self.child.try_wait().expect("the child's status") {
                    return Err(format!("floodgate-rls exited: {status}"));
                }
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!("nothing listens on {addr} after {STARTUP:?}"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        // Another process on a port we were given answers at once, and
        // the child, failing to bind, exits: give it the time to.
        std::thread::sleep(Duration::from_millis(200));
        match self.child.try_wait().expect("the child's status") {
            Some(status) => Err(format!("floodgate-rls exited: {status}")),
            None => Ok(()),
        }
    }

    /// What the child wrote.
    fn output(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            read(&self.stdout),
            read(&self.stderr)
        )
    }
}

/// Run `command` to its end or `limit`, killing it then; its status (None
/// when killed) and its stdout and stderr, interleaved as written.
fn run_with_deadline(
    mut command: Command,
    out: &Path,
    limit: Duration,
) -> (Option<ExitStatus>, String) {
    let file = File::create(out).expect("the script's output file");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("python3 starts (is it on PATH?)");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("the script's status") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, read(out))
}

/// Two services in quota mode: a request is over only when both are.
const PY_QUOTA: &str = r#"
domain: py_quota
descriptors:
  - key: service
    value: one
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
    metadata: { service: { name: one }, owner: a }
  - key: service
    value: two
    quota_mode: true
    rate_limit: { unit: hour, requests_per_unit: 2 }
    metadata: { service: { region: eu }, owner: b }
"#;

#[test]
fn python_grpcio_client_with_envoys_messages() {
    let python_path = python_path();
    let dir = tempfile::tempdir().expect("a temporary directory");
    // A directory of two files: the edge domain, and one in quota mode
    // whose answers carry dynamic metadata.
    let config = dir.path().join("config");
    std::fs::create_dir(&config).expect("the configuration's directory");
    std::fs::write(config.join("edge.yaml"), EDGE).expect("the configuration is written");
    std::fs::write(config.join("py_quota.yaml"), PY_QUOTA).expect("the configuration is written");
    let mut server = Server::start(&config, dir.path());

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/test_rls.py");
    let mut python = Command::new("python3");
    python
        .arg(&script)
        .arg(server.grpc.to_string())
        .arg(server.metrics.to_string())
        // The caller's proxies and Python settings stay out.
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PYTHONPATH", &python_path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1");
    let started = Instant::now();
    let (status, output) = run_with_deadline(python, &dir.path().join("script.out"), SCRIPT);
    let took = started.elapsed();
    match status {
        None => panic!(
            "{} did not finish in {SCRIPT:?}; its output:\n{output}\nthe server's:\n{}",
            script.display(),
            server.output()
        ),
        Some(status) => assert!(
            status.success(),
            "{} failed ({status}) after {took:.1?}; its output:\n{output}\nthe server's:\n{}",
            script.display(),
            server.output()
        ),
    }
    // The server survived every check.
    assert!(
        server
            .child
            .try_wait()
            .expect("the server's status")
            .is_none(),
        "floodgate-rls exited during the checks:\n{}",
        server.output()
    );
    println!("{output}");
}
