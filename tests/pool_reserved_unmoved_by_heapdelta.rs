//! Under `Tracker<Pool>`, heapdelta's own threads and its exit report take nothing from the pool:
//! the checkpoint thread of `HEAPDELTA=every=` gets no pool heap, and the exit snapshot, taken
//! once the main thread's pool heap is gone, reads the pool without allocating in it.

use std::process::Command;
use std::time::Duration;

use heapdelta::{Pool, Timeline, Tracker};

#[global_allocator]
static GLOBAL: Tracker<Pool> = Tracker::wrap(Pool::new());

/// Set in the child process.
const CHILD: &str = "HEAPDELTA_TEST_POOL_REPORT_CHILD";
const TEST: &str = "neither_the_checkpoint_thread_nor_the_exit_report_takes_an_arena";

/// Runs this test in a child process with `HEAPDELTA` set to `report=<a file>` and `extra`, and
/// reads back its exit report.
fn run_child(extra: &str) -> Timeline {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--test-threads=1"])
        .env(CHILD, "1")
        .env("HEAPDELTA", format!("report={}{extra}", path.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed: {stderr}");
    Timeline::read_json(&path).unwrap()
}

/// Arenas ever allocated and live at the snapshot labelled `label`.
fn arenas(timeline: &Timeline, label: &str) -> (u64, u64) {
    let snapshot = timeline
        .checkpoints()
        .iter()
        .find(|c| c.label() == Some(label))
        .unwrap_or_else(|| panic!("no {label:?} snapshot in {timeline}"));
    let pool = snapshot.pool().expect("pool figures");
    (pool.arenas_allocated_total, pool.arenas_current)
}

#[test]
fn neither_the_checkpoint_thread_nor_the_exit_report_takes_an_arena() {
    if std::env::var_os(CHILD).is_some() {
        // Timed checkpoints run meanwhile, when `every=` is set: the first ones before the
        // program's own.
        std::thread::sleep(Duration::from_millis(250));
        heapdelta::checkpoint("start");
        std::thread::sleep(Duration::from_millis(350));
        heapdelta::checkpoint("end");
        return;
    }
    let timed = run_child(",every=0.1");
    let untimed = run_child("");
    assert!(
        timed.checkpoints().len() >= 4,
        "no timed checkpoint: {timed}"
    );
    assert_eq!(arenas(&timed, "start"), arenas(&untimed, "start"));
    for t in [&timed, &untimed] {
        assert_eq!(arenas(t, "end"), arenas(t, "start"), "{t}");
        assert_eq!(arenas(t, "exit"), arenas(t, "end"), "{t}");
    }
}
