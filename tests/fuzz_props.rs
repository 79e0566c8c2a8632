//! The fuzz properties of `fuzz/props.rs` under proptest, so that every
//! `cargo test` runs a short fuzz pass (the libFuzzer targets in `fuzz/`
//! need `cargo fuzz`; see `fuzz/README.md`):
//!
//! * `client_ip`: `ClientIp` over arbitrary proxy header bytes, peers and
//!   configurations (no panic, canonical keys, untrusted peer is the client,
//!   nothing left of our proxy's entry changes the key);
//! * `header_key`: the `Header` extractor against an independent oracle;
//! * `storage_key`: `src/store/key.rs` (compiled in here) and
//!   `Limiter::check` on a `MemoryStore` with arbitrary keys: one `{…}` hash
//!   tag, bounded, injective, no shared state.
//!
//! `PROPTEST_CASES` sets the cases per property (default 2 000).
//! Full run: `PROPTEST_CASES=1000000 cargo test --release --test fuzz_props`
//! took 129 s on 2 cores (3 000 000 cases, the three properties in parallel,
//! rustc 1.95.0), no failure. The libFuzzer targets ran 1 000 000 executions
//! each as well (`fuzz/README.md`).

#[allow(dead_code)]
#[path = "../fuzz/props.rs"]
mod props;

#[allow(dead_code)]
#[path = "../src/store/key.rs"]
mod key;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000)
}

/// Fuzz bytes: a few config bytes, then a mix of plain bytes, tokens and
/// line breaks (see `props::expand`).
fn bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => any::<u8>(),
        2 => b' '..=b'~',
        3 => props::TOKEN..=u8::MAX,
        1 => Just(props::NEWLINE),
    ];
    (any::<[u8; 3]>(), prop::collection::vec(byte, 0..120)).prop_map(|(head, rest)| {
        let mut v = head.to_vec();
        v.extend(rest);
        v
    })
}

fn run(property: fn(&[u8])) {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&bytes(), |data| {
            property(&data);
            Ok(())
        })
        .unwrap();
}

#[test]
fn client_ip() {
    run(props::client_ip);
}

#[test]
fn header_key() {
    run(props::header_key);
}

#[test]
fn storage_key() {
    run(|data| props::storage_key(data, |p, n, t, u| key::storage_key(&key::head(p, n, t), u)));
}
