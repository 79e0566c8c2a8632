//! Storage keys from arbitrary user keys: `src/store/key.rs` compiled here
//! as it is (it is crate-private), checked for one `{…}` hash tag, a bounded
//! length and injectivity; and `Limiter::check` on a `MemoryStore` with the
//! same keys: no panic, distinct keys never share state. The property is in
//! `fuzz/props.rs`.
//!
//! Run (stable Rust, see fuzz/README.md):
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run storage_key -- -runs=1000000`
//!
//! Last full run: 1 000 000 executions in 195 s (5 128/s, 864 edges, 181 corpus
//! inputs), no failure; rustc 1.95.0 stable with `RUSTC_BOOTSTRAP=1`, cargo-fuzz
//! 0.13.2, AddressSanitizer, 2 cores shared with other builds.
#![no_main]

#[allow(dead_code)]
#[path = "../props.rs"]
mod props;

#[allow(dead_code)]
#[path = "../../src/store/key.rs"]
mod key;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::storage_key(data, |p, n, t, u| key::storage_key(&key::head(p, n, t), u)));
