//! README's Rust examples run as doctests exactly once: included by one
//! item of the crate, not by two (each inclusion compiles and runs every
//! example again).

use std::path::Path;

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, into: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn readme_examples_are_included_once() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let including: Vec<_> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).expect("read a source file");
            text.contains("include_str!(\"../README.md\")")
                || text.contains("include_str!(\"../../README.md\")")
        })
        .collect();
    assert_eq!(including.len(), 1, "README included by {including:?}");
}
