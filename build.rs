//! Joins the files of `lua/` in the order `lua/files.txt` gives into
//! `$OUT_DIR/shared.lua`: the one Lua source of floodgate's function library
//! and of its script form (see `src/store/redis/library.rs`).

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let lua = Path::new("lua");
    let list = lua.join("files.txt");
    println!("cargo::rerun-if-changed={}", list.display());
    let order = std::fs::read_to_string(&list).expect("lua/files.txt");
    let mut joined = String::new();
    for name in order
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let path = lua.join(name);
        println!("cargo::rerun-if-changed={}", path.display());
        let code = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("lua/files.txt names {name}: {e}"));
        let _ = write!(joined, "{code}");
    }
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join("shared.lua"), joined).expect("write shared.lua");
}
