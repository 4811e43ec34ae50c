//! A relative `HEAPDELTA=report=` path names a file in the directory the process started in, even
//! when the program changes its directory before it exits.

use std::path::Path;
use std::process::Command;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Set in the child: the directory it moves to before exiting.
const MOVE_TO: &str = "HEAPDELTA_TEST_MOVE_TO";
const TEST: &str = "the_child";

/// In the child: takes a checkpoint and moves to another directory.
#[test]
fn the_child() {
    if let Some(dir) = std::env::var_os(MOVE_TO) {
        heapdelta::checkpoint("before the move");
        std::env::set_current_dir(dir).unwrap();
    }
}

#[test]
fn a_relative_report_path_is_resolved_where_the_process_started() {
    let root = std::env::temp_dir().join(format!("heapdelta-relative-{}", std::process::id()));
    let (start, elsewhere) = (root.join("start"), root.join("elsewhere"));
    std::fs::create_dir_all(&start).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .current_dir(&start)
        .env(MOVE_TO, &elsewhere)
        .env("HEAPDELTA", "report=report.json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = |dir: &Path| dir.join("report.json").exists();
    assert!(written(&start), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!written(&elsewhere));
    std::fs::remove_dir_all(&root).unwrap();
}
