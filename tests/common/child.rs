//! Measuring memory in a process of its own: a test runs an ignored test of
//! its own binary as a child, so that the child's resident memory is the
//! work's alone, and reads back the numbers it printed.

use std::process::Command;

/// This process' resident memory in bytes (`VmRSS` of `/proc/self/status`).
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb * 1024
}

/// Run the ignored test `test` of this binary in a new process, with
/// `env = what`, and return the numbers it printed after `marker` (one
/// line, separated by spaces). Fails if the child fails or prints none.
pub fn run_child(test: &str, env: &str, what: &str, marker: &str) -> Vec<f64> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(env, what)
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {what} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once(marker).map(|(_, v)| v))
        .unwrap_or_else(|| panic!("child {what} printed no result: {stdout}"));
    line.split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect()
}
