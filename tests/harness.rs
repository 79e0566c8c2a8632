//! The test harness itself: the TLS server, the TLS cluster and the
//! Sentinel set of `tests/common` work as floodgate's tests will assume,
//! checked with `redis-cli` and the `redis` crate alone.

mod common;

use common::cluster::RedisCluster;
use common::sentinel::SentinelSet;
use common::tls::{run_cli, TestCerts, TlsOptions};
use common::RedisServer;
use std::process::Command;
use std::time::{Duration, Instant};

/// `redis-cli` to 127.0.0.1:`port` with `args` first.
fn cli(port: u16, args: &[&str]) -> Command {
    let mut c = Command::new("redis-cli");
    c.args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args);
    c
}

#[test]
fn tls_server_answers_with_the_ca_and_refuses_without() {
    let t = Instant::now();
    let certs = TestCerts::generate();
    eprintln!("certificates in {:?}", t.elapsed());
    let server = RedisServer::start_tls(&certs);
    assert!(server.tls_url().starts_with("rediss://127.0.0.1:"));
    let ca = certs.ca_pem_path.display().to_string();
    let wrong = certs.wrong_ca_path.display().to_string();
    let port = server.port();
    // With the CA, verifying the name 127.0.0.1 (subjectAltName IP).
    let pong = run_cli(&mut cli(port, &["--tls", "--cacert", &ca, "PING"]));
    assert_eq!(pong.as_deref(), Ok("PONG"));
    // ... and by the name localhost (subjectAltName DNS).
    let pong = run_cli(Command::new("redis-cli").args([
        "-h",
        "localhost",
        "-p",
        &port.to_string(),
        "--tls",
        "--cacert",
        &ca,
        "PING",
    ]));
    assert_eq!(pong.as_deref(), Ok("PONG"));
    // Another CA does not trust it; plain text gets no answer.
    let refused = run_cli(&mut cli(port, &["--tls", "--cacert", &wrong, "PING"]));
    assert!(refused.is_err(), "wrong CA accepted: {refused:?}");
    let plain = run_cli(&mut cli(port, &["PING"]));
    assert!(plain.is_err(), "plain text on the TLS port: {plain:?}");
    // The harness's own inspection works over TLS.
    let pong: String = server.cmd(&["PING"]);
    assert_eq!(pong, "PONG");
    server.cmd::<()>(&["SET", "k", "v"]);
    assert_eq!(server.cli(&["GET", "k"]).as_deref(), Ok("v"));
    assert_eq!(server.command_calls("set"), Some(1));
}

#[test]
fn tls_server_requiring_client_certificates_refuses_a_client_without() {
    let certs = TestCerts::generate();
    let server = RedisServer::start_tls_with(
        &certs,
        TlsOptions {
            auth_clients: true,
            plain_port: true,
        },
        &[],
    );
    let ca = certs.ca_pem_path.display().to_string();
    let no_cert = run_cli(&mut cli(server.port(), &["--tls", "--cacert", &ca, "PING"]));
    assert!(
        no_cert.is_err(),
        "no client certificate accepted: {no_cert:?}"
    );
    assert_eq!(server.cli(&["PING"]).as_deref(), Ok("PONG"));
    // The plain port answers the redis crate.
    let pong: String = server.cmd(&["PING"]);
    assert_eq!(pong, "PONG");
    assert!(server.url().starts_with("redis://"));
}

#[test]
fn tls_cluster_is_ok() {
    let certs = TestCerts::generate();
    let cluster = RedisCluster::start_tls(&certs);
    assert_eq!(cluster.ports().len(), 6);
    assert!(cluster.urls().iter().all(|u| u.starts_with("rediss://")));
    let port = cluster.ports()[0];
    let info = run_cli(cluster.redis_cli().args([
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "CLUSTER",
        "INFO",
    ]))
    .expect("CLUSTER INFO over TLS");
    assert!(info.contains("cluster_state:ok"), "{info}");
    // The cluster's clients follow redirections over TLS.
    let set = run_cli(cluster.redis_cli().args([
        "-c",
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "SET",
        "{user}:1",
        "x",
    ]));
    assert_eq!(set.as_deref(), Ok("OK"));
    assert_eq!(cluster.primaries().len(), 3);
    // Plain text is refused on every node.
    assert!(run_cli(&mut cli(port, &["PING"])).is_err());
}

#[test]
fn sentinel_set_reports_its_primary_and_fails_over() {
    let mut set = SentinelSet::start();
    let primary = set.primary_port();
    let replica = set.replica_port();
    assert_ne!(primary, replica);
    for s in set.sentinel_ports() {
        assert_eq!(set.primary_seen_by(s), Some(primary), "sentinel {s}");
    }
    assert!(set.url().starts_with("redis+sentinel://127.0.0.1:"));
    assert!(set.url().ends_with("/mymaster"));
    assert_eq!(set.url().matches(',').count(), 2);
    let t = Instant::now();
    assert_eq!(set.kill_primary(), primary);
    let new = set.wait_for_failover(Duration::from_secs(30));
    eprintln!("failover in {:?}", t.elapsed());
    assert_eq!(new, replica);
    assert_eq!(set.primary_port(), replica);
    set.cmd_on::<()>(new, &["SET", "after", "failover"]);
}

#[test]
fn sentinel_set_with_a_password() {
    let mut set = SentinelSet::start_with(Some("s3cret"));
    let primary = set.primary_port();
    let refused = run_cli(&mut cli(primary, &["GET", "k"]));
    assert!(refused.is_err(), "no password accepted: {refused:?}");
    set.cmd_on::<()>(primary, &["SET", "k", "v"]);
    let acked: i64 = set.cmd_on(primary, &["WAIT", "1", "5000"]);
    assert_eq!(acked, 1, "the replica has the write");
    set.kill_primary();
    let new = set.wait_for_failover(Duration::from_secs(30));
    let v: String = set.cmd_on(new, &["GET", "k"]);
    assert_eq!(v, "v");
}
