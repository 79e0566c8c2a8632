//! Configuration files: envoyproxy/ratelimit's checks with its messages,
//! floodgate's additions, and a file changed under load.

mod common;

use std::time::{Duration, Instant};

use common::{descriptor, request, start_with};
use floodgate_rls::config::{add_file, load, load_with};
use floodgate_rls::Rules;

fn refused(yaml: &str) -> String {
    let mut rules = Rules::default();
    match add_file(&mut rules, "test.yaml", yaml) {
        Ok(()) => panic!("accepted:\n{yaml}"),
        Err(e) => {
            assert_eq!(e.file(), "test.yaml");
            e.reason().to_owned()
        }
    }
}

#[test]
fn broken_files_are_refused_with_envoyproxy_ratelimits_messages() {
    let cases = [
        ("descriptors: []", "config file cannot have empty domain"),
        ("domain: d\ndescriptors: [ { value: v } ]", "descriptor has empty key"),
        (
            "domain: d\ndescriptors: [ { key: k, value: v }, { key: k, value: v } ]",
            "duplicate descriptor composite key 'd.k_v'",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: fortnight, requests_per_unit: 1 } } ]",
            "invalid rate limit unit 'fortnight'",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { requests_per_unit: 1 } } ]",
            "invalid rate limit unit ''",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unlimited: true, unit: second } } ]",
            "should not specify rate limit unit when unlimited",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: second, requests_per_unit: 1, replaces: [ {} ] } } ]",
            "should not have an empty replaces entry",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: second, requests_per_unit: 1, name: a, replaces: [ { name: a } ] } } ]",
            "replaces should not contain name of same descriptor",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, share_threshold: true } ]",
            "share_threshold can only be used with wildcard values",
        ),
        ("domain: d\ndescriptors: [ { key: k, colour: red } ]", "unknown field `colour`"),
        ("domain: d\nextra: 1", "unknown field `extra`"),
        ("domain: [", "config error"),
        (
            "domain: d\ndescriptors: [ { key: k, metadata: [ a, b ] } ]",
            "d.k: error parsing metadata: metadata must be a map",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, metadata: { [a]: one } } ]",
            "d.k: error parsing metadata: metadata key Sequence",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: second, requests_per_unit: 1, algorithm: magic } } ]",
            "unknown algorithm 'magic'",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: second, requests_per_unit: 1, burst: 5 } } ]",
            "`burst` means nothing for fixed_window",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unlimited: true, algorithm: gcra } } ]",
            "an unlimited descriptor has no algorithm, burst or hot_keys",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: second, requests_per_unit: 100, algorithm: sliding_log, hot_keys: { servers: 2 } } } ]",
            "d.k: hot_keys: invalid `hot_keys`: the sliding log and the leaky bucket cannot be shared",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: second, requests_per_unit: 10, hot_keys: { servers: 4 } } } ]",
            "d.k: hot_keys: invalid `hot_keys`: the limit is too small to share",
        ),
        (
            "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: second, requests_per_unit: 10, hot_keys: { threshold: 4 } } } ]",
            "missing field `servers`",
        ),
    ];
    for (yaml, expected) in cases {
        let reason = refused(yaml);
        assert!(
            reason.contains(expected),
            "{yaml:?}: {reason:?} lacks {expected:?}"
        );
    }
}

#[test]
fn merging_domains_puts_a_domains_files_together() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "a.yaml",
        "domain: d\ndescriptors: [ { key: user, rate_limit: { unit: second, requests_per_unit: 1 } } ]",
    );
    write(
        "b.yaml",
        "domain: d\nfailure_policy: allow\ndescriptors: [ { key: org, rate_limit: { unit: second, requests_per_unit: 2 } } ]",
    );
    assert!(load(dir.path())
        .err()
        .unwrap()
        .reason()
        .contains("duplicate domain 'd'"));
    let rules = load_with(dir.path(), true).unwrap();
    assert_eq!(rules.domains().collect::<Vec<_>>(), ["d"]);
    assert_eq!(
        rules.failure_policy("d"),
        Some(floodgate_rls::OnStoreFailure::Allow)
    );
    // A descriptor in two files, or two failure policies: refused.
    write(
        "c.yaml",
        "domain: d\ndescriptors: [ { key: user, rate_limit: { unit: second, requests_per_unit: 5 } } ]",
    );
    let e = load_with(dir.path(), true).err().unwrap();
    assert!(e.file().ends_with("c.yaml"), "{e}");
    assert!(
        e.reason()
            .contains("duplicate descriptor composite key 'd.user'"),
        "{e}"
    );
    write("c.yaml", "domain: d\nfailure_policy: deny\n");
    let e = load_with(dir.path(), true).err().unwrap();
    assert!(e.reason().contains("another failure_policy"), "{e}");
}

#[tokio::test]
async fn merged_files_decide_as_one_domain() {
    // The service reads the test's directory: its `config.yaml` and a
    // second file of the same domain.
    let mut rls = start_with(
        "domain: d\ndescriptors: [ { key: user, rate_limit: { unit: hour, requests_per_unit: 1 } } ]",
        |o| {
            o.merge_domains = true;
            let dir = o.config.parent().unwrap().to_owned();
            std::fs::write(
                dir.join("more.yaml"),
                "domain: d\ndescriptors: [ { key: org, rate_limit: { unit: hour, requests_per_unit: 1 } } ]",
            )
            .unwrap();
            o.config = dir;
        },
    )
    .await;
    let ask = || {
        request(
            "d",
            vec![
                descriptor(&[("user", "ana")]),
                descriptor(&[("org", "acme")]),
            ],
        )
    };
    let r = rls.ask(ask()).await;
    assert_eq!(r.overall_code, common::OK);
    assert!(
        r.statuses.iter().all(|s| s.current_limit.is_some()),
        "{r:?}"
    );
    let r = rls.ask(ask()).await;
    assert_eq!(r.overall_code, common::OVER_LIMIT);
    rls.stop().await;
}

#[test]
fn a_domain_in_two_files_is_refused_and_a_directory_reads_its_yaml_files() {
    let dir = tempfile::tempdir().unwrap();
    let one = "domain: a\ndescriptors: [ { key: k, rate_limit: { unit: second, requests_per_unit: 1 } } ]";
    std::fs::write(dir.path().join("a.yaml"), one).unwrap();
    std::fs::write(
        dir.path().join("b.yml"),
        one.replace("domain: a", "domain: b"),
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not yaml").unwrap();
    let rules = load(dir.path()).unwrap();
    let mut domains: Vec<&str> = rules.domains().collect();
    domains.sort_unstable();
    assert_eq!(domains, ["a", "b"]);
    std::fs::write(dir.path().join("c.yaml"), one).unwrap();
    let e = load(dir.path()).err().expect("a duplicate domain");
    assert!(e.file().ends_with("c.yaml"), "{e}");
    assert_eq!(e.reason(), "duplicate domain 'a' in config file");
    let missing = load(&dir.path().join("nothing.yaml"))
        .err()
        .expect("no such file");
    assert!(missing.file().ends_with("nothing.yaml"), "{missing}");
}

#[test]
fn floodgates_additions_take_every_algorithm() {
    for algorithm in [
        "fixed_window",
        "sliding_window",
        "sliding_log",
        "gcra",
        "token_bucket",
        "leaky_bucket",
    ] {
        let burst = if matches!(algorithm, "gcra" | "token_bucket" | "leaky_bucket") {
            ", burst: 20"
        } else {
            ""
        };
        let yaml = format!(
            "domain: d\ndescriptors: [ {{ key: k, rate_limit: {{ unit: minute, requests_per_unit: 10, algorithm: {algorithm}{burst} }} }} ]"
        );
        let mut rules = Rules::default();
        add_file(&mut rules, "t.yaml", &yaml).unwrap_or_else(|e| panic!("{algorithm}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_changed_under_load_applies_within_a_second_and_no_request_fails() {
    let yaml = |n: u32| {
        format!("domain: d\ndescriptors: [ {{ key: k, rate_limit: {{ unit: hour, requests_per_unit: {n} }} }} ]")
    };
    let mut rls = start_with(&yaml(1_000), |o| o.reload_ms = 100).await;
    let config = rls.config();
    // Load: four clients asking in a loop until told to stop.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for c in 0..4 {
        let mut client = rls.client.clone();
        let stop = stop.clone();
        load.push(tokio::spawn(async move {
            let mut answered = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let key = format!("load{c}");
                let r = client
                    .should_rate_limit(request("d", vec![descriptor(&[("k", &key)])]))
                    .await
                    .expect("every request is answered");
                assert!(r.into_inner().statuses.len() == 1);
                answered += 1;
            }
            answered
        }));
    }
    let limit_of = |r: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse| {
        r.statuses[0]
            .current_limit
            .as_ref()
            .map(|l| l.requests_per_unit)
    };
    let probe = || request("d", vec![descriptor(&[("k", "probe")])]);
    assert_eq!(limit_of(&rls.ask(probe()).await), Some(1_000));
    std::fs::write(&config, yaml(7)).unwrap();
    let changed = Instant::now();
    loop {
        if limit_of(&rls.ask(probe()).await) == Some(7) {
            break;
        }
        assert!(
            changed.elapsed() < Duration::from_secs(1),
            "not applied within a second"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // A broken file keeps the last good one.
    std::fs::write(
        &config,
        "domain: d\ndescriptors: [ { key: k, rate_limit: { unit: never } } ]",
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(limit_of(&rls.ask(probe()).await), Some(7));
    // And a good one after it applies again.
    std::fs::write(&config, yaml(9)).unwrap();
    let fixed = Instant::now();
    while limit_of(&rls.ask(probe()).await) != Some(9) {
        assert!(
            fixed.elapsed() < Duration::from_secs(1),
            "not applied within a second"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut answered = 0;
    for task in load {
        answered += task.await.expect("no client failed");
    }
    assert!(answered > 0);
    rls.stop().await;
}

#[test]
fn a_failure_policy_must_be_one_of_three() {
    let reason = refused("domain: d\nfailure_policy: maybe\ndescriptors: []");
    assert_eq!(
        reason,
        "invalid failure_policy 'maybe' (error, allow, deny)"
    );
    let mut rules = Rules::default();
    add_file(&mut rules, "t.yaml", "domain: d\nfailure_policy: deny").unwrap();
    assert_eq!(
        rules.failure_policy("d"),
        Some(floodgate_rls::OnStoreFailure::Deny)
    );
    assert_eq!(rules.failure_policy("other"), None);
}
