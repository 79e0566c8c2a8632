//! The `serde` feature: every algorithm, `AnyAlgorithm`, `Limits`, `HotKeys`,
//! the failure policy and the circuit breaker read from TOML, YAML and JSON
//! in each form (short and table); every value that `try_new`, `try_with`,
//! `try_burst` or `build` refuses refused with the same message, and the
//! line where the format gives it; unknown fields refused; and what is
//! written reads back to the same value.

use floodgate::algorithm::*;
use floodgate::failure::{CircuitBreaker, FailurePolicy};
use floodgate::store::MemoryStore;
use floodgate::{ConfigError, HotKeys, Limiter};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::{Debug, Write};
use std::time::Duration;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A file of one value, `x`, so that TOML (whose top level is a table) has
/// a place for it.
#[derive(Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Doc<T> {
    x: T,
}

fn toml<T: DeserializeOwned>(value: &str) -> Result<T, String> {
    toml::from_str::<Doc<T>>(&format!("# a comment\nx = {value}\n"))
        .map(|d| d.x)
        .map_err(|e| e.to_string())
}

fn json<T: DeserializeOwned>(value: &str) -> Result<T, String> {
    serde_json::from_str::<Doc<T>>(&format!("{{\n  \"x\": {value}\n}}"))
        .map(|d| d.x)
        .map_err(|e| e.to_string())
}

fn yaml<T: DeserializeOwned>(value: &str) -> Result<T, String> {
    serde_yaml::from_str::<Doc<T>>(&format!("# a comment\nx: {value}\n"))
        .map(|d| d.x)
        .map_err(|e| e.to_string())
}

/// `value` (TOML) read as a `T`, in TOML and, written as JSON and YAML
/// flow (the same text with `:` for `=`), in those too: each gives `want`.
fn reads<T: DeserializeOwned + PartialEq + Debug>(value: &str, want: &T) {
    assert_eq!(&toml::<T>(value).unwrap(), want, "TOML {value}");
    let as_json = to_json(value);
    assert_eq!(&json::<T>(&as_json).unwrap(), want, "JSON {as_json}");
    assert_eq!(&yaml::<T>(&as_json).unwrap(), want, "YAML {as_json}");
}

/// A TOML inline value as JSON: keys quoted, `=` as `:`.
fn to_json(value: &str) -> String {
    let mut out = String::new();
    for part in value.split_inclusive(['{', ',']) {
        match part.split_once(" = ") {
            Some((key, rest)) => {
                let key = key.trim().trim_matches('"');
                let _ = write!(out, " \"{key}\": {rest}");
            }
            None => out.push_str(part),
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Each algorithm in each form.

#[test]
fn fixed_window_short_and_table() {
    let want = FixedWindow::new(100, secs(60));
    for text in [
        r#""100/min""#,
        r#""100/minute""#,
        r#""100/60s""#,
        r#""fixed_window 100/min""#,
        r#"{ limit = 100, window = "1m" }"#,
        r#"{ algorithm = "fixed_window", limit = 100, window = "60s" }"#,
    ] {
        reads(text, &want);
    }
    reads(r#""5/d""#, &FixedWindow::new(5, secs(86_400)));
    reads(r#""5/day""#, &FixedWindow::new(5, secs(86_400)));
}

#[test]
fn sliding_log_short_and_table() {
    let want = SlidingLog::new(5, secs(900));
    for text in [
        r#""5/15min""#,
        r#""sliding_log 5/15m""#,
        r#"{ limit = 5, window = "15m" }"#,
        r#"{ algorithm = "sliding_log", limit = 5, window = "900s" }"#,
    ] {
        reads(text, &want);
    }
}

#[test]
fn sliding_window_short_and_table() {
    let want = SlidingWindow::new(1_000, secs(5_400));
    for text in [
        r#""1000/1h30m""#,
        r#""sliding_window 1000/90min""#,
        r#"{ limit = 1000, window = "1h30m" }"#,
        r#"{ algorithm = "sliding_window", limit = 1000, window = "1h 30m" }"#,
    ] {
        reads(text, &want);
    }
    reads(r#""10/h""#, &SlidingWindow::new(10, secs(3_600)));
    reads(r#""10/hour""#, &SlidingWindow::new(10, secs(3_600)));
    reads(r#""10/250ms""#, &SlidingWindow::new(10, ms(250)));
}

#[test]
fn token_bucket_short_and_table() {
    // "10/s burst 20": refilled at 10 a second, holding 20.
    let want = TokenBucket::new(20, 10.0);
    for text in [
        r#""10/s burst 20""#,
        r#""10/sec burst 20""#,
        r#""token_bucket 10/second burst 20""#,
        "{ capacity = 20, refill_per_sec = 10 }",
        r#"{ algorithm = "token_bucket", capacity = 20, refill_per_sec = 10.0 }"#,
    ] {
        reads(text, &want);
    }
    // Without a burst, the capacity is the count.
    reads(r#""100/30s""#, &TokenBucket::new(100, 100.0 / 30.0));
}

#[test]
fn leaky_bucket_short_and_table() {
    let want = LeakyBucket::new(20, 10.0);
    for text in [
        r#""10/s burst 20""#,
        r#""leaky_bucket 10/s burst 20""#,
        "{ capacity = 20, leak_per_sec = 10 }",
        r#"{ algorithm = "leaky_bucket", capacity = 20, leak_per_sec = 10.0 }"#,
    ] {
        reads(text, &want);
    }
    reads(r#""120/min""#, &LeakyBucket::new(120, 2.0));
}

#[test]
fn gcra_short_and_table() {
    let want = Gcra::new(10, secs(1)).try_burst(20).unwrap();
    for text in [
        r#""10/s burst 20""#,
        r#""gcra 10/s burst 20""#,
        r#"{ limit = 10, period = "1s", burst = 20 }"#,
        r#"{ algorithm = "gcra", limit = 10, period = "1000ms", burst = 20 }"#,
    ] {
        reads(text, &want);
    }
    // Without a burst, the burst is the limit.
    reads(r#""100/min""#, &Gcra::new(100, secs(60)));
    reads(
        r#"{ limit = 100, period = "1m" }"#,
        &Gcra::new(100, secs(60)),
    );
}

#[test]
fn any_algorithm_is_the_one_the_file_names_and_gcra_otherwise() {
    let any = |text: &str, want: AnyAlgorithm| reads(text, &want);
    any(r#""100/min""#, Gcra::new(100, secs(60)).into());
    any(
        r#""10/s burst 20""#,
        Gcra::new(10, secs(1)).try_burst(20).unwrap().into(),
    );
    any(
        r#""fixed_window 100/min""#,
        FixedWindow::new(100, secs(60)).into(),
    );
    any(
        r#""sliding_log 5/15min""#,
        SlidingLog::new(5, secs(900)).into(),
    );
    any(
        r#""sliding_window 100/min""#,
        SlidingWindow::new(100, secs(60)).into(),
    );
    any(
        r#""token_bucket 10/s burst 20""#,
        TokenBucket::new(20, 10.0).into(),
    );
    any(
        r#""leaky_bucket 10/s burst 20""#,
        LeakyBucket::new(20, 10.0).into(),
    );
    any(
        r#"{ algorithm = "token_bucket", capacity = 20, refill_per_sec = 10 }"#,
        TokenBucket::new(20, 10.0).into(),
    );
    any(
        r#"{ algorithm = "sliding_log", limit = 5, window = "15m" }"#,
        SlidingLog::new(5, secs(900)).into(),
    );
    // A table must say which algorithm it is.
    let e = toml::<AnyAlgorithm>(r#"{ limit = 5, window = "15m" }"#).unwrap_err();
    assert!(e.contains("missing field `algorithm`"), "{e}");
}

#[tokio::test]
async fn a_limiter_over_the_algorithm_a_file_chose_decides_as_that_algorithm() {
    // The sliding log admits 2 in any span of 10 s, where a GCRA of 2 per 10 s
    // would have refilled one unit after 5 s.
    let clock = floodgate::clock::ManualClock::new(1_791_860_000_000);
    let chosen: AnyAlgorithm = toml(r#""sliding_log 2/10s""#).unwrap();
    let limiter = Limiter::builder(MemoryStore::new(), chosen)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert!(limiter.check("k", 2).await.unwrap().allowed());
    clock.advance(secs(6));
    assert!(!limiter.check("k", 1).await.unwrap().allowed());
    clock.advance(secs(4));
    assert!(limiter.check("k", 1).await.unwrap().allowed());
}

#[test]
fn limits_in_the_order_written() {
    let want = Limits::new("second", Gcra::new(10, secs(1)).try_burst(20).unwrap())
        .try_with("hour", SlidingWindow::new(1_000, secs(3_600)))
        .unwrap()
        .try_with("day", FixedWindow::new(10_000, secs(86_400)))
        .unwrap();
    reads(
        r#"{ second = "10/s burst 20", hour = { algorithm = "sliding_window", limit = 1000, window = "1h" }, day = "fixed_window 10000/d" }"#,
        &want,
    );
    // As a TOML section too.
    let file: Doc<Limits> = toml::from_str(
        r#"
        [x]
        second = "10/s burst 20"
        hour = { algorithm = "sliding_window", limit = 1000, window = "1h" }
        day = "fixed_window 10000/d"
        "#,
    )
    .unwrap();
    assert_eq!(file.x, want);
}

#[test]
fn hot_keys_failure_policy_and_circuit_breaker() {
    reads("{ servers = 8 }", &HotKeys::new(8));
    reads(
        "{ servers = 8, threshold = 200, max_keys = 500 }",
        &HotKeys::new(8).threshold(200).max_keys(500),
    );
    reads(
        "{ failures = 10, cool_down = \"1s\" }",
        &CircuitBreaker::new(10, secs(1)),
    );
    reads("{ cool_down = \"2s\" }", &CircuitBreaker::new(5, secs(2)));
    reads("{ }", &CircuitBreaker::default());
    reads("{ enabled = false }", &CircuitBreaker::disabled());
    reads("{ enabled = true }", &CircuitBreaker::default());
    for (text, name) in [
        ("\"fail_open\"", "fail_open"),
        ("\"fail_closed\"", "fail_closed"),
        ("\"return_error\"", "return_error"),
    ] {
        assert_eq!(toml::<FailurePolicy>(text).unwrap().name(), name);
        assert_eq!(json::<FailurePolicy>(text).unwrap().name(), name);
        assert_eq!(yaml::<FailurePolicy>(text).unwrap().name(), name);
    }
}

// The example, whose `load` is tested below.
#[path = "../examples/config_file.rs"]
#[allow(dead_code)]
mod config_file;

#[tokio::test]
async fn the_example_s_file_loads_with_an_environment_override() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/config_file.toml");
    // The only test here that reads the environment.
    std::env::set_var("RATE_LIMITS_API__LIMITS__SECOND", "50/s burst 100");
    let file = config_file::load(path);
    std::env::remove_var("RATE_LIMITS_API__LIMITS__SECOND");
    let file = file.unwrap();
    // figment gives a table's keys sorted by name.
    let api = Limits::new("day", FixedWindow::new(100_000, secs(86_400)))
        .try_with("second", Gcra::new(50, secs(1)).try_burst(100).unwrap())
        .unwrap();
    assert_eq!(file.api.limits, api);
    assert_eq!(file.api.timeout, ms(100));
    assert_eq!(file.api.circuit_breaker, CircuitBreaker::new(5, ms(500)));
    assert_eq!(file.api.hot_keys, Some(HotKeys::new(2)));
    assert_eq!(file.login.on_store_failure.name(), "fail_closed");
    assert_eq!(
        file.login.limits,
        Limits::new("attempts", SlidingLog::new(5, secs(900)))
    );
    let api = file.api.build(MemoryStore::new().into(), "api").unwrap();
    assert!(api.check("k", 100).await.unwrap().allowed());
    file.login
        .build(MemoryStore::new().into(), "login")
        .unwrap();

    // A value out of bounds in the environment: the message, and the variable.
    std::env::set_var("RATE_LIMITS_LOGIN__LIMITS__ATTEMPTS", "sliding_log 0/15min");
    let e = config_file::load(path).unwrap_err().to_string();
    std::env::remove_var("RATE_LIMITS_LOGIN__LIMITS__ATTEMPTS");
    let want = message(SlidingLog::try_new(0, secs(900)).unwrap_err());
    assert!(e.contains(&want) && e.contains("RATE_LIMITS_"), "{e}");
}

#[test]
fn the_readme_s_example_reads() {
    let readme = include_str!("../README.md");
    let section = readme
        .split("## Limits in a configuration file")
        .nth(1)
        .expect("README has the section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has a TOML block");
    #[derive(Deserialize)]
    struct File {
        limits: Limits,
    }
    let file: File = toml::from_str(block).unwrap();
    let want = Limits::new("second", Gcra::new(10, secs(1)).try_burst(20).unwrap())
        .try_with("day", FixedWindow::new(10_000, secs(86_400)))
        .unwrap();
    assert_eq!(file.limits, want);
}

// ---------------------------------------------------------------------------
// Refused, as in code: the same message, naming the field, at the line.

/// `value` refused as a `T` in all three formats, each error holding
/// `want` (the message `try_new` or `build` gives) and the value's line (2).
fn refused<T: DeserializeOwned + Debug>(value: &str, want: &str) {
    refused_as::<T>(value, &to_json(value), want);
}

fn refused_as<T: DeserializeOwned + Debug>(toml_value: &str, json_value: &str, want: &str) {
    for (format, got) in [
        ("TOML", toml::<T>(toml_value)),
        ("JSON", json::<T>(json_value)),
        ("YAML", yaml::<T>(json_value)),
    ] {
        let e = got.expect_err(&format!("{format} {toml_value} must be refused"));
        assert!(
            e.contains(want),
            "{format} {toml_value}: {e}\nwants: {want}"
        );
        assert!(e.contains("line 2"), "{format} {toml_value}: no line: {e}");
    }
}

fn message(e: ConfigError) -> String {
    e.to_string()
}

#[test]
fn invalid_windows_are_refused_naming_their_field() {
    let big = (1u64 << 40) + 1;
    let fw = |limit, window| message(FixedWindow::try_new(limit, window).unwrap_err());
    refused::<FixedWindow>(r#""0/s""#, &fw(0, secs(1)));
    refused::<FixedWindow>(r#"{ limit = 0, window = "1s" }"#, &fw(0, secs(1)));
    refused::<FixedWindow>(
        &format!(r#"{{ limit = {big}, window = "1s" }}"#),
        &fw(big, secs(1)),
    );
    refused::<FixedWindow>(r#""10/1500us""#, &fw(10, Duration::from_micros(1_500)));
    refused::<FixedWindow>(
        r#"{ limit = 10, window = "1500us" }"#,
        &fw(10, Duration::from_micros(1_500)),
    );
    refused::<FixedWindow>(r#""10/0s""#, &fw(10, Duration::ZERO));
    refused::<FixedWindow>(
        &format!(r#"{{ limit = 10, window = "{big}ms" }}"#),
        &fw(10, ms(big)),
    );
    // A window has no burst.
    refused::<FixedWindow>(
        r#""10/s burst 5""#,
        "invalid `burst`: a fixed_window has no burst",
    );
    refused::<SlidingWindow>(
        r#""10/s burst 5""#,
        "invalid `burst`: a sliding_window has no burst",
    );

    let sl = |limit, window| message(SlidingLog::try_new(limit, window).unwrap_err());
    refused::<SlidingLog>(r#""65537/h""#, &sl(65_537, secs(3_600)));
    refused::<SlidingLog>(
        r#"{ limit = 65536, window = "17179869184ms" }"#,
        &sl(65_536, ms(1 << 34)),
    );
    refused::<SlidingLog>(r#"{ limit = 0, window = "1s" }"#, &sl(0, secs(1)));

    let sw = |limit, window| message(SlidingWindow::try_new(limit, window).unwrap_err());
    refused::<SlidingWindow>(r#"{ limit = 10, window = "0ms" }"#, &sw(10, Duration::ZERO));
    refused::<SlidingWindow>(r#""sliding_window 0/min""#, &sw(0, secs(60)));
}

#[test]
fn invalid_buckets_and_gcra_are_refused_naming_their_field() {
    let tb = |c, r| message(TokenBucket::try_new(c, r).unwrap_err());
    refused::<TokenBucket>(r#""0/s""#, &tb(0, 0.0));
    refused::<TokenBucket>("{ capacity = 0, refill_per_sec = 1 }", &tb(0, 1.0));
    refused::<TokenBucket>("{ capacity = 10, refill_per_sec = 0 }", &tb(10, 0.0));
    refused::<TokenBucket>("{ capacity = 10, refill_per_sec = -1.5 }", &tb(10, -1.5));
    refused::<TokenBucket>("{ capacity = 10, refill_per_sec = 1e-12 }", &tb(10, 1e-12));
    refused::<TokenBucket>("{ capacity = 10, refill_per_sec = 1e20 }", &tb(10, 1e20));
    refused::<TokenBucket>(
        "{ capacity = 1099511627776, refill_per_sec = 0.001 }",
        &tb(1 << 40, 0.001),
    );
    refused::<TokenBucket>(r#""10/s burst 0""#, &tb(0, 10.0));

    let lb = |c, r| message(LeakyBucket::try_new(c, r).unwrap_err());
    refused::<LeakyBucket>("{ capacity = 10, leak_per_sec = 0 }", &lb(10, 0.0));
    refused::<LeakyBucket>("{ capacity = 0, leak_per_sec = 1 }", &lb(0, 1.0));
    refused::<LeakyBucket>(
        "{ capacity = 1099511627776, leak_per_sec = 0.001 }",
        &lb(1 << 40, 0.001),
    );

    let gcra = |limit, period| message(Gcra::try_new(limit, period).unwrap_err());
    let burst = |limit, period, n| {
        message(
            Gcra::try_new(limit, period)
                .unwrap()
                .try_burst(n)
                .unwrap_err(),
        )
    };
    refused::<Gcra>(
        r#"{ limit = 10, period = "0s" }"#,
        &gcra(10, Duration::ZERO),
    );
    refused::<Gcra>(r#"{ limit = 0, period = "1s" }"#, &gcra(0, secs(1)));
    refused::<Gcra>(r#""0/s""#, &gcra(0, secs(1)));
    refused::<Gcra>(r#""10/s burst 0""#, &burst(10, secs(1), 0));
    refused::<Gcra>(
        r#"{ limit = 10, period = "1s", burst = 0 }"#,
        &burst(10, secs(1), 0),
    );
    refused::<Gcra>(
        r#"{ limit = 1, period = "1099511627776ms", burst = 2 }"#,
        &burst(1, ms(1 << 40), 2),
    );
}

#[test]
fn invalid_limits_are_refused_naming_their_field() {
    let one = Gcra::new(1, secs(1));
    let name = message(Limits::try_new("my limit", one).unwrap_err());
    refused_as::<Limits>(
        r#"{ "my limit" = "1/s" }"#,
        r#"{ "my limit": "1/s" }"#,
        &name,
    );
    refused_as::<Limits>(r#"{ "" = "1/s" }"#, r#"{ "": "1/s" }"#, &name);
    // TOML and YAML refuse a key twice themselves; JSON leaves it to us.
    let twice = message(Limits::new("a", one).try_with("a", one).unwrap_err());
    let e = json::<Limits>(r#"{ "a": "1/s", "a": "2/s" }"#).unwrap_err();
    assert!(e.contains(&twice) && e.contains("line 2"), "{e}");
    // More than MAX_LIMITS.
    let mut many = Limits::new("l0", one);
    let mut text = String::from("{ l0 = \"1/s\"");
    for i in 1..MAX_LIMITS {
        many = many.try_with(&format!("l{i}"), one).unwrap();
        let _ = write!(text, ", l{i} = \"1/s\"");
    }
    let over = message(many.try_with("over", one).unwrap_err());
    refused::<Limits>(&format!("{text}, over = \"1/s\" }}"), &over);
    refused::<Limits>("{ }", "invalid `limits`: at least one limit");
    // A limit's own error, inside.
    refused::<Limits>(
        r#"{ second = "10/s", hour = "sliding_log 100000/h" }"#,
        &message(SlidingLog::try_new(100_000, secs(3_600)).unwrap_err()),
    );
}

#[test]
fn invalid_settings_are_refused_as_build_refuses_them() {
    let build = |hot: HotKeys| {
        Limiter::builder(MemoryStore::new(), FixedWindow::new(1_000, secs(1)))
            .hot_keys(hot)
            .build()
            .map(|_| ())
            .unwrap_err()
    };
    let zero = message(build(HotKeys::new(0)));
    assert_eq!(zero, message(build(HotKeys::new(1).threshold(0))));
    refused::<HotKeys>("{ servers = 0 }", &zero);
    refused::<HotKeys>("{ servers = 1, threshold = 0 }", &zero);
    refused::<HotKeys>("{ servers = 1, max_keys = 0 }", &zero);

    let cb = |f, c| message(CircuitBreaker::try_new(f, c).unwrap_err());
    refused::<CircuitBreaker>("{ failures = 0 }", &cb(0, secs(1)));
    refused::<CircuitBreaker>(r#"{ cool_down = "0s" }"#, &cb(1, Duration::ZERO));
    refused::<CircuitBreaker>(
        r#"{ cool_down = "1500us" }"#,
        &cb(1, Duration::from_micros(1_500)),
    );
    refused::<CircuitBreaker>(
        "{ enabled = false, failures = 3 }",
        "invalid `enabled`: a disabled circuit breaker takes no `failures` or `cool_down`",
    );

    refused::<FailurePolicy>(
        r#""fallback""#,
        "invalid `on_store_failure`: a fallback is a limiter",
    );
    refused::<FailurePolicy>(
        r#""fail_later""#,
        "unknown variant `fail_later`, expected one of `fail_open`, `fail_closed`, `return_error`",
    );
}

#[test]
fn a_refused_field_is_pointed_at_on_its_own_line() {
    let e = toml::from_str::<Doc<AnyAlgorithm>>(
        "[x]\nalgorithm = \"gcra\"\nlimit = 10\nperiod = \"0s\"\nburst = 20\n",
    )
    .unwrap_err();
    let want = message(Gcra::try_new(10, Duration::ZERO).unwrap_err());
    assert!(e.to_string().contains("line 4, column 10"), "{e}");
    assert!(e.to_string().contains(&want), "{e}");

    let e = serde_json::from_str::<AnyAlgorithm>(
        "{\n  \"algorithm\": \"gcra\",\n  \"limit\": 10,\n  \"period\": \"0s\"\n}",
    )
    .unwrap_err();
    assert_eq!((e.line(), e.to_string().contains(&want)), (4, true), "{e}");

    let e = serde_yaml::from_str::<AnyAlgorithm>("algorithm: gcra\nlimit: 10\nperiod: 0s\n")
        .unwrap_err();
    let at = e.location().expect("a location");
    assert_eq!((at.line(), at.column()), (3, 9), "{e}");
    assert!(e.to_string().contains(&want), "{e}");
}

#[test]
fn durations_need_their_unit() {
    let e = toml::<FixedWindow>("{ limit = 10, window = 60 }").unwrap_err();
    assert!(e.contains("expected a duration with its unit"), "{e}");
    let e = toml::<FixedWindow>(r#"{ limit = 10, window = "60 parsecs" }"#).unwrap_err();
    assert!(e.contains("invalid duration \"60 parsecs\""), "{e}");
    for short in [r#""100""#, r#""x/s""#, r#""10/parsec""#, r#""10/s burst""#] {
        let e = toml::<Gcra>(short).unwrap_err();
        assert!(e.contains("invalid limit"), "{short}: {e}");
    }
}

// ---------------------------------------------------------------------------
// Unknown fields.

#[test]
fn unknown_fields_are_refused_listing_the_algorithm_s_own() {
    let window_fields = "expected one of `algorithm`, `limit`, `window`, `jitter`";
    for (text, want) in [
        (
            r#"{ limit = 1, window = "1s", per = "1s" }"#,
            format!("unknown field `per`, {window_fields}"),
        ),
        (
            r#"{ limit = 1, window = "1s", burst = 2 }"#,
            format!("unknown field `burst`, {window_fields}"),
        ),
    ] {
        refused::<FixedWindow>(text, &want);
    }
    refused::<Gcra>(
        r#"{ limit = 1, period = "1s", window = "1s" }"#,
        "unknown field `window`, expected one of `algorithm`, `limit`, `period`, `burst`",
    );
    refused::<TokenBucket>(
        "{ capacity = 1, leak_per_sec = 1 }",
        "unknown field `leak_per_sec`, expected one of `algorithm`, `capacity`, `refill_per_sec`",
    );
    refused::<AnyAlgorithm>(
        r#"{ algorithm = "gcra", limit = 1, period = "1s", capacity = 3 }"#,
        "unknown field `capacity`, expected one of `algorithm`, `limit`, `period`, `burst`",
    );
    refused::<AnyAlgorithm>(
        r#"{ algorithm = "gcra", lmit = 1 }"#,
        "unknown field `lmit`",
    );
    refused::<AnyAlgorithm>(
        r#"{ algorithm = "token_bucket2" }"#,
        "unknown variant `token_bucket2`",
    );
    refused::<HotKeys>("{ servers = 1, treshold = 3 }", "unknown field `treshold`");
    refused::<CircuitBreaker>("{ failure = 1 }", "unknown field `failure`");
    // A type's table or short form naming another algorithm.
    refused::<FixedWindow>(
        r#"{ algorithm = "gcra", limit = 1, window = "1s" }"#,
        "invalid `algorithm`: this is a fixed_window, not a gcra",
    );
    refused::<FixedWindow>(
        r#""gcra 1/s""#,
        "invalid `algorithm`: this is a fixed_window, not a gcra",
    );
}

// ---------------------------------------------------------------------------
// Round trips: written, then read, gives the same.

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) {
    let doc = Doc { x: value };
    let text = toml::to_string(&doc).unwrap();
    assert_eq!(
        &toml::from_str::<Doc<T>>(&text).unwrap().x,
        value,
        "TOML {text}"
    );
    let text = serde_json::to_string(&doc).unwrap();
    assert_eq!(
        &serde_json::from_str::<Doc<T>>(&text).unwrap().x,
        value,
        "JSON {text}"
    );
    let text = serde_yaml::to_string(&doc).unwrap();
    assert_eq!(
        &serde_yaml::from_str::<Doc<T>>(&text).unwrap().x,
        value,
        "YAML {text}"
    );
}

#[test]
fn fixed_window_round_trip() {
    round_trip(&FixedWindow::new(10_000, secs(86_400)));
    round_trip(&FixedWindow::new(1, ms(5_400_250)));
    round_trip(&FixedWindow::new(1 << 40, ms(1 << 40)));
    round_trip(&FixedWindow::new(100, secs(60)).jittered());
}

/// `jitter = true` on a fixed or sliding window is its `jittered()`; false
/// or absent is the aligned window; the sliding log has no such field.
#[test]
fn jitter_on_the_windows_that_take_it() {
    let w: FixedWindow = toml(r#"{ limit = 100, window = "1m", jitter = true }"#).unwrap();
    assert_eq!(w, FixedWindow::new(100, secs(60)).jittered());
    let w: FixedWindow = json(r#"{ "limit": 100, "window": "1m", "jitter": false }"#).unwrap();
    assert!(!w.is_jittered());
    let w: SlidingWindow = yaml("{ limit: 5, window: 10s, jitter: true }").unwrap();
    assert_eq!(w, SlidingWindow::new(5, secs(10)).jittered());
    let any: AnyAlgorithm =
        toml(r#"{ algorithm = "sliding_window", limit = 5, window = "10s", jitter = true }"#)
            .unwrap();
    assert_eq!(
        any,
        AnyAlgorithm::from(SlidingWindow::new(5, secs(10)).jittered())
    );
    refused::<SlidingLog>(
        r#"{ limit = 1, window = "1s", jitter = true }"#,
        "unknown field `jitter`, expected one of `algorithm`, `limit`, `window`",
    );
    refused::<FixedWindow>(
        r#"{ limit = 1, window = "1s", jitter = "yes" }"#,
        "invalid type: string \"yes\", expected a boolean",
    );
}

#[test]
fn sliding_log_round_trip() {
    round_trip(&SlidingLog::new(5, secs(900)));
    round_trip(&SlidingLog::new(MAX_LOG, ms(1)));
}

#[test]
fn sliding_window_round_trip() {
    round_trip(&SlidingWindow::new(100, secs(60)));
    round_trip(&SlidingWindow::new(3, ms(1_001)));
    round_trip(&SlidingWindow::new(3, ms(1_001)).jittered());
}

#[test]
fn token_bucket_round_trip() {
    round_trip(&TokenBucket::new(20, 10.0));
    round_trip(&TokenBucket::new(7, 1.0 / 3.0));
    round_trip(&TokenBucket::new(100, 100.0 / 60.0));
}

#[test]
fn leaky_bucket_round_trip() {
    round_trip(&LeakyBucket::new(20, 10.0));
    round_trip(&LeakyBucket::new(3, 0.1));
}

#[test]
fn gcra_round_trip() {
    round_trip(&Gcra::new(10, secs(1)));
    round_trip(&Gcra::new(10, secs(1)).try_burst(25).unwrap());
    round_trip(&Gcra::new(7, ms(333)).try_burst(1).unwrap());
}

#[test]
fn any_algorithm_and_limits_round_trip() {
    let all: [AnyAlgorithm; 6] = [
        FixedWindow::new(10_000, secs(86_400)).into(),
        SlidingLog::new(5, secs(900)).into(),
        SlidingWindow::new(100, secs(60)).into(),
        TokenBucket::new(7, 1.0 / 3.0).into(),
        LeakyBucket::new(20, 10.0).into(),
        Gcra::new(10, secs(1)).try_burst(20).unwrap().into(),
    ];
    let mut limits = Limits::new("a0", all[0]);
    for (i, a) in all.iter().enumerate() {
        round_trip(a);
        if i > 0 {
            limits = limits.try_with(&format!("a{i}"), *a).unwrap();
        }
    }
    round_trip(&limits);
    // The table written is the one documented.
    assert_eq!(
        serde_json::to_string(&all[5]).unwrap(),
        r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":20}"#
    );
    assert_eq!(
        serde_json::to_string(&all[0]).unwrap(),
        r#"{"algorithm":"fixed_window","limit":10000,"window":"1d"}"#
    );
}

#[test]
fn settings_round_trip() {
    round_trip(&HotKeys::new(8));
    round_trip(&HotKeys::new(3).threshold(1).max_keys(7));
    round_trip(&CircuitBreaker::default());
    round_trip(&CircuitBreaker::new(1, ms(1_500)));
    round_trip(&CircuitBreaker::disabled());
    for policy in [
        FailurePolicy::FailOpen,
        FailurePolicy::FailClosed,
        FailurePolicy::ReturnError,
    ] {
        let text = serde_json::to_string(&policy).unwrap();
        assert_eq!(
            serde_json::from_str::<FailurePolicy>(&text).unwrap().name(),
            policy.name()
        );
    }
    let local = Limiter::new(MemoryStore::new(), Gcra::new(1, secs(1)));
    let e = serde_json::to_string(&FailurePolicy::fallback(local)).unwrap_err();
    assert!(e.to_string().contains("cannot be written"), "{e}");
}

/// A limit of `Limits` in shadow mode: `shadow = true` in its table, read
/// and written; refused on a limit outside `Limits`.
#[test]
fn limits_in_shadow_mode() {
    let limits: Limits = toml(
        r#"{ second = "10/s", day = { algorithm = "fixed_window", limit = 1000, window = "1d", shadow = true } }"#,
    )
    .unwrap();
    assert!(limits.is_shadowed("day") && !limits.is_shadowed("second"));
    round_trip(&limits);
    let e = toml::<FixedWindow>(r#"{ limit = 1, window = "1s", shadow = true }"#).unwrap_err();
    assert!(e.contains("unknown field `shadow`"), "{e}");
}
