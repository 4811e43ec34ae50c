//! Running one test of this test binary again, in a child process under a `HEAPDELTA` setting
//! (read once, at the process's first allocation, so a test cannot set it for itself).

use std::process::Command;

/// Runs the test `name` of this binary in a child process with `child_var` set (the test tells
/// by it that it is the child) and `HEAPDELTA=heapdelta`; asserts that the child ran that one test
/// and it passed, and returns the child's stderr.
pub fn rerun_under(name: &str, child_var: &str, heapdelta: &str) -> String {
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(child_var, "1")
        .env("HEAPDELTA", heapdelta)
        .output()
        .expect("the test binary runs again");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the child failed: {stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child did not run the test: {stderr}"
    );
    stderr
}
