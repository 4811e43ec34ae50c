//! `HEAPDELTA=report=PATH` is the process's: a child it forks inherits the exit handler but does
//! not write the report, which would replace its parent's timeline with its own.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[path = "children/wait.rs"]
mod wait;
use wait::wait_or_kill;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Set in the process run under `HEAPDELTA=report=...`: the path it reports to.
const CHILD: &str = "HEAPDELTA_TEST_FORKED_REPORT";

/// In the process run under `report=`: forks a child that takes a checkpoint and exits through
/// `exit` (running the exit handlers), and checks that no report was written by it.
fn fork_and_check(report: &Path) {
    heapdelta::checkpoint("parent");
    // SAFETY: the child takes a checkpoint and exits; `exit` runs the inherited handlers.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        heapdelta::checkpoint("child");
        std::process::exit(0);
    }
    let status = wait_or_kill(pid, Duration::from_secs(30)).expect("the child exits");
    assert_eq!(status, 0, "the child failed");
    assert!(!report.exists(), "the forked child wrote the report");
}

#[test]
fn a_forked_child_does_not_write_its_parents_report() {
    if let Some(report) = std::env::var_os(CHILD) {
        fork_and_check(Path::new(&report));
        return;
    }
    let dir = std::env::temp_dir().join(format!("heapdelta-forked-report-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report.json");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_forked_child_does_not_write_its_parents_report",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &report)
        .env("HEAPDELTA", format!("report={}", report.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the process failed: {stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the process did not run the test: {stderr}"
    );
    // The process itself wrote it at its exit, with its own checkpoints only.
    let written = std::fs::read_to_string(&report).expect("the process wrote its report");
    assert!(written.contains("\"parent\"") && !written.contains("\"child\""));
    std::fs::remove_dir_all(&dir).unwrap();
}
