//! Running one test of this test binary again, in a child process under a `HEAPDELTA` setting
//! (read once, at the process's first allocation, so a test cannot set it for itself).

use std::process::Command;

/// Runs the test `name` of this binary in a child process with `child_var` set (the test tells
/// by it that it is the child) and `HEAPDELTA=heapdelta`; asserts that the child ran that one test
/// and it passed, and returns the child's stderr.
pub fn rerun_under(name: &str, child_var: &str, heapdelta: &str) -> String {
    rerun(name, child_var, "1", heapdelta).1
}

/// `rerun_under` with `child_var` set to `value` (for a child that does one of several things);
/// returns the child's stdout and stderr.
pub fn rerun(name: &str, child_var: &str, value: &str, heapdelta: &str) -> (String, String) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(child_var, value)
        .env("HEAPDELTA", heapdelta)
        .output()
        .expect("the test binary runs again");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the child failed: {stdout}{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child did not run the test: {stderr}"
    );
    (stdout, stderr)
}
