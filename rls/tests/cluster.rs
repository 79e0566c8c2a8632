//! floodgate-rls on a Redis Cluster: a request's descriptors land on
//! different hash slots (each key is a hash tag of its own), and are still
//! decided all or nothing: tried slot by slot, charged only if all admit.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{count_admitted, descriptor, free_port, request, start_with};

/// Three `redis-server` primaries of this test's own, made one cluster.
struct Cluster {
    nodes: Vec<(Child, u16)>,
    dir: tempfile::TempDir,
}

const INSTALL: &str = "run `bash scripts/test`, or install redis-server and redis-cli (Debian: apt-get install redis-server)";

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("redis-cli: {e}; {INSTALL}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Cluster {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut nodes = Vec::new();
        for _ in 0..3 {
            let port = free_port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes", "--cluster-node-timeout", "1000"])
                .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("redis-server: {e}; {INSTALL}"));
            nodes.push((child, port));
        }
        for (_, port) in &nodes {
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", *port)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "redis-server did not listen on {port}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for (_, port) in &nodes {
            create.arg(format!("127.0.0.1:{port}"));
        }
        let out = create
            .args(["--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("redis-cli: {e}; {INSTALL}"));
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while !nodes
            .iter()
            .all(|(_, p)| cli(*p, &["cluster", "info"]).contains("cluster_state:ok"))
        {
            assert!(Instant::now() < deadline, "the cluster did not become ok");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { nodes, dir }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.nodes[0].1)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (child, _) in &mut self.nodes {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = &self.dir;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn four_instances_on_a_cluster_decide_descriptors_on_several_slots_all_or_nothing() {
    let cluster = Cluster::start();
    let config = r#"
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 20 }
  - key: org
    rate_limit: { unit: hour, requests_per_unit: 30, algorithm: gcra }
"#;
    let mut fleet = Vec::new();
    for _ in 0..4 {
        let url = cluster.url();
        fleet.push(
            start_with(config, move |o| {
                o.redis_url = Some(url);
                o.redis_cluster = true;
            })
            .await,
        );
    }
    let d = vec![
        descriptor(&[("user", "ana")]),
        descriptor(&[("org", "acme")]),
    ];
    let clients = fleet.iter().map(|rls| rls.client.clone());
    let admitted = count_admitted(clients, 25, &request("edge", d)).await;
    assert_eq!(admitted, 20, "the user's limit, across four instances");
    let r = fleet[0]
        .ask(request("edge", vec![descriptor(&[("org", "acme")])]))
        .await;
    assert_eq!(
        r.statuses[0].limit_remaining, 9,
        "the org (another slot) was charged by admitted requests only"
    );
    for mut rls in fleet {
        rls.stop().await;
    }
}
