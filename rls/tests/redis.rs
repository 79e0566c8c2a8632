//! floodgate-rls on Redis: several instances share one set of counters,
//! and a Redis that stops answering gets the failure policy's answer
//! within the store timeout.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{count_admitted, descriptor, free_port, request, start_with, OK, OVER_LIMIT};
use floodgate_rls::OnStoreFailure;

/// A `redis-server` of this test's own on a free loopback port.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Self {
        let port = free_port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("redis-server could not start ({e}): run `bash scripts/test`, or install it (Debian: apt-get install redis-server)")
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self { child, port }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        // Killed already, or frozen: SIGKILL ends it either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const CONFIG: &str = r#"
domain: edge
descriptors:
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 20 }
  - key: org
    rate_limit: { unit: hour, requests_per_unit: 30, algorithm: gcra }
"#;

#[tokio::test(flavor = "multi_thread")]
async fn four_instances_on_one_redis_never_admit_more_than_the_limit() {
    let redis = Redis::start();
    let url = redis.url();
    let mut fleet = Vec::new();
    for _ in 0..4 {
        let url = url.clone();
        fleet.push(start_with(CONFIG, move |o| o.redis_url = Some(url)).await);
    }
    // 100 requests for one user and one org, from the four instances at
    // once: 20 admitted (the user's limit), the org charged 20 times only.
    let d = vec![
        descriptor(&[("user", "ana")]),
        descriptor(&[("org", "acme")]),
    ];
    let clients = fleet.iter().map(|rls| rls.client.clone());
    assert_eq!(count_admitted(clients, 25, &request("edge", d)).await, 20);
    let r = fleet[0]
        .ask(request("edge", vec![descriptor(&[("org", "acme")])]))
        .await;
    assert_eq!(
        r.statuses[0].limit_remaining, 9,
        "the org was charged by admitted requests only"
    );
    for mut rls in fleet {
        rls.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_redis_gets_the_failure_policys_answer_within_the_timeout() {
    let redis = Redis::start();
    let policies = [
        (OnStoreFailure::Error, None),
        (OnStoreFailure::Allow, Some(OK)),
        (OnStoreFailure::Deny, Some(OVER_LIMIT)),
    ];
    let mut servers = Vec::new();
    for (policy, _) in policies {
        let url = redis.url();
        let rls = start_with(CONFIG, move |o| {
            o.redis_url = Some(url);
            o.on_store_failure = policy;
            o.store_timeout_ms = 100;
        })
        .await;
        servers.push(rls);
    }
    for rls in &mut servers {
        let r = rls
            .ask(request("edge", vec![descriptor(&[("user", "bo")])]))
            .await;
        assert_eq!(r.overall_code, OK, "Redis answers at first");
    }
    redis.signal("-STOP");
    for ((policy, expected), rls) in policies.iter().zip(&mut servers) {
        let started = Instant::now();
        let answer = rls
            .client
            .should_rate_limit(request("edge", vec![descriptor(&[("user", "bo")])]))
            .await;
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(600),
            "{policy:?}: answered after {took:?}"
        );
        match (expected, answer) {
            (None, Err(status)) => assert_eq!(status.code(), tonic::Code::Unavailable, "{status}"),
            (Some(code), Ok(r)) => assert_eq!(r.into_inner().overall_code, *code, "{policy:?}"),
            (expected, got) => panic!("{policy:?}: expected {expected:?}, got {got:?}"),
        }
    }
    redis.signal("-CONT");
    // Back: decided by Redis again (the circuit breaker may hold off a
    // moment after the failures).
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = servers[0]
            .client
            .should_rate_limit(request("edge", vec![descriptor(&[("user", "cy")])]))
            .await;
        if let Ok(r) = r {
            assert_eq!(r.into_inner().statuses[0].limit_remaining, 19);
            break;
        }
        assert!(Instant::now() < deadline, "Redis back, still failing");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for mut rls in servers {
        rls.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_redis_gets_the_failure_policys_answer_at_once() {
    let mut redis = Redis::start();
    let url = redis.url();
    let mut rls = start_with(CONFIG, move |o| {
        o.redis_url = Some(url);
        o.on_store_failure = OnStoreFailure::Allow;
    })
    .await;
    assert_eq!(
        rls.ask(request("edge", vec![descriptor(&[("user", "di")])]))
            .await
            .statuses[0]
            .limit_remaining,
        19
    );
    redis.child.kill().unwrap();
    redis.child.wait().unwrap();
    for _ in 0..3 {
        let started = Instant::now();
        let r = rls
            .ask(request("edge", vec![descriptor(&[("user", "di")])]))
            .await;
        assert!(
            started.elapsed() < Duration::from_millis(600),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(r.overall_code, OK, "allowed by the failure policy");
    }
    rls.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_in_flight_is_answered_through_a_graceful_shutdown() {
    let redis = Redis::start();
    let url = redis.url();
    let mut rls = start_with(CONFIG, move |o| {
        o.redis_url = Some(url);
        o.on_store_failure = OnStoreFailure::Allow;
        o.store_timeout_ms = 500;
    })
    .await;
    rls.ask(request("edge", vec![descriptor(&[("user", "ed")])]))
        .await;
    // Redis frozen: the next call waits the store timeout, then is allowed.
    redis.signal("-STOP");
    let mut client = rls.client.clone();
    let in_flight = tokio::spawn(async move {
        client
            .should_rate_limit(request("edge", vec![descriptor(&[("user", "ed")])]))
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = Instant::now();
    rls.stop().await; // returns once the call in flight is answered
    let answer = in_flight.await.unwrap().expect("answered, not cut off");
    assert_eq!(answer.into_inner().overall_code, OK);
    assert!(
        stopping.elapsed() >= Duration::from_millis(300),
        "{:?}",
        stopping.elapsed()
    );
    // And no longer serving.
    let url = format!("http://{}", rls.addr);
    let refused = envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient::connect(url).await;
    assert!(
        refused.is_err(),
        "still accepting connections after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_domains_file_may_name_its_own_failure_policy() {
    let redis = Redis::start();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("edge.yaml"), CONFIG).unwrap();
    std::fs::write(
        dir.path().join("internal.yaml"),
        "domain: internal\nfailure_policy: allow\ndescriptors:\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 5 }\n",
    )
    .unwrap();
    let (url, config) = (redis.url(), dir.path().to_owned());
    let mut rls = start_with(CONFIG, move |o| {
        o.redis_url = Some(url);
        o.config = config;
        o.on_store_failure = OnStoreFailure::Error;
    })
    .await;
    let edge = || request("edge", vec![descriptor(&[("user", "fy")])]);
    let internal = || request("internal", vec![descriptor(&[("user", "fy")])]);
    assert_eq!(rls.ask(internal()).await.statuses[0].limit_remaining, 4);
    redis.signal("-STOP");
    let e = rls.client.should_rate_limit(edge()).await.unwrap_err();
    assert_eq!(
        e.code(),
        tonic::Code::Unavailable,
        "edge: the option's policy"
    );
    assert_eq!(
        rls.ask(internal()).await.overall_code,
        OK,
        "internal: its file's policy"
    );
    redis.signal("-CONT");
    rls.stop().await;
}

const HOT: &str = r#"
domain: edge
descriptors:
  - key: tenant
    rate_limit:
      unit: hour
      requests_per_unit: 1000
      hot_keys: { servers: 1, threshold: 10 }
  - key: org
    rate_limit: { unit: hour, requests_per_unit: 1000 }
  - key: user
    rate_limit: { unit: hour, requests_per_unit: 5 }
"#;

/// The script calls `redis-server` at `port` has answered since its
/// statistics were last reset.
fn script_calls(port: u16) -> u64 {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "info", "commandstats"])
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            ["cmdstat_fcall:", "cmdstat_evalsha:", "cmdstat_eval:"]
                .iter()
                .any(|c| l.starts_with(c))
        })
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

fn reset_stats(port: u16) {
    let status = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "config", "resetstat"])
        .stdout(Stdio::null())
        .status()
        .expect("redis-cli runs");
    assert!(status.success());
}

/// 1 600 requests from 16 clients at once for one value of `entry`: what
/// was admitted, and the script calls Redis answered for them.
async fn hammer(rls: &common::Rls, port: u16, entry: &str) -> (usize, u64) {
    reset_stats(port);
    let req = request("edge", vec![descriptor(&[(entry, "big")])]);
    let clients = (0..16).map(|_| rls.client.clone());
    let admitted = count_admitted(clients, 100, &req).await;
    (admitted, script_calls(port))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hot_value_is_decided_from_slices_and_never_over_its_limit() {
    let redis = Redis::start();
    let url = redis.url();
    let mut rls = start_with(HOT, move |o| o.redis_url = Some(url)).await;
    // The same load on a rule without hot keys, then on one with them.
    let (cold_admitted, cold_calls) = hammer(&rls, redis.port, "org").await;
    let (hot_admitted, hot_calls) = hammer(&rls, redis.port, "tenant").await;
    assert_eq!(cold_admitted, 1000);
    // Never more than the limit; at least 90 % of it while demand is above
    // it (what the slices hold on the one instance at most).
    assert!(
        (900..=1000).contains(&hot_admitted),
        "{hot_admitted} admitted"
    );
    assert!(
        hot_calls * 4 <= cold_calls,
        "hot keys: {hot_calls} script calls, without: {cold_calls}"
    );
    rls.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_refused_by_another_descriptor_gives_the_hot_ones_charge_back() {
    let redis = Redis::start();
    let url = redis.url();
    let mut rls = start_with(HOT, move |o| o.redis_url = Some(url)).await;
    // A user at 5 an hour and a tenant with hot keys (not hot at this
    // pace): 5 of 8 admitted, the tenant charged for those 5 only.
    let mut admitted = 0;
    for _ in 0..8 {
        let d = vec![
            descriptor(&[("tenant", "acme")]),
            descriptor(&[("user", "ana")]),
        ];
        let r = rls.ask(request("edge", d)).await;
        if r.overall_code == OK {
            admitted += 1;
        } else {
            assert_eq!(r.statuses[0].code, OK, "the tenant is under its limit");
            assert_eq!(r.statuses[1].code, OVER_LIMIT);
        }
    }
    assert_eq!(admitted, 5);
    let r = rls
        .ask(request("edge", vec![descriptor(&[("tenant", "acme")])]))
        .await;
    assert_eq!(r.statuses[0].limit_remaining, 1000 - 5 - 1);
    rls.stop().await;
}

/// Quota mode on Redis: the request is over only when both quotas are,
/// and then the user's limit, charged in the same call, is given back.
#[tokio::test]
async fn quota_mode_refuses_when_every_quota_is_spent_and_gives_the_others_back() {
    let redis = Redis::start();
    let url = redis.url();
    let yaml = "domain: quota\ndescriptors:\n  - key: service\n    value: one\n    quota_mode: true\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n  - key: service\n    value: two\n    quota_mode: true\n    rate_limit: { unit: hour, requests_per_unit: 1 }\n  - key: user\n    rate_limit: { unit: hour, requests_per_unit: 10 }\n";
    let mut rls = start_with(yaml, move |o| o.redis_url = Some(url)).await;
    let ask = || {
        request(
            "quota",
            vec![
                descriptor(&[("service", "one")]),
                descriptor(&[("service", "two")]),
                descriptor(&[("user", "ana")]),
            ],
        )
    };
    let r = rls.ask(ask()).await;
    assert_eq!(r.overall_code, OK);
    assert_eq!(r.statuses[2].limit_remaining, 9);
    let r = rls.ask(ask()).await;
    assert_eq!(r.overall_code, OVER_LIMIT);
    assert_eq!(r.statuses[2].limit_remaining, 9, "{r:?}");
    let r = rls
        .ask(request("quota", vec![descriptor(&[("user", "ana")])]))
        .await;
    assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (OK, 8));
    rls.stop().await;
}
