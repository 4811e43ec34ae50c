//! Without a tracker as the global allocator the queries return zeros, and say once on stderr
//! why, so that a program lacking the `#[global_allocator]` line does not read "nothing grew".

use std::process::Command;

/// Set in the child (see `the_child`).
const CHILD: &str = "HEAPDELTA_TEST_NO_TRACKER_CHILD";

/// In the child: the three queries, twice each, or (`CHILD=measure`) only `measure`, or
/// (`CHILD=guarded`) only `is_installed`, twice, as a program that guards its queries with it, or
/// (`CHILD=both`) a checkpoint, then `is_installed`.
#[test]
fn the_child() {
    if std::env::var_os(CHILD).is_some_and(|v| v == "both") {
        let _ = heapdelta::checkpoint("step 1");
        assert!(!heapdelta::is_installed());
    } else if std::env::var_os(CHILD).is_some_and(|v| v == "guarded") {
        for _ in 0..2 {
            assert!(!heapdelta::is_installed());
        }
    } else if std::env::var_os(CHILD).is_some_and(|v| v == "measure") {
        let (kept, d) = heapdelta::measure(|| vec![0u8; 4096]);
        assert_eq!(d.allocated_blocks(), 0);
        assert_eq!(d.peak_added_bytes(), Some(0));
        drop(kept);
    } else if std::env::var_os(CHILD).is_some() {
        for step in 1..=2 {
            let delta = heapdelta::checkpoint(format!("step {step}"));
            assert_eq!(delta.live_bytes(), 0);
            let _ = heapdelta::snapshot();
            let _ = heapdelta::timeline();
        }
    }
}

/// The child's stderr, run with `HEAPDELTA` set to `heapdelta` if given, in mode `mode`.
fn child_stderr_in(mode: &str, heapdelta: Option<&str>) -> String {
    let mut child = Command::new(std::env::current_exe().expect("the test binary"));
    child
        .args(["the_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env_remove("HEAPDELTA");
    if let Some(value) = heapdelta {
        child.env("HEAPDELTA", value);
    }
    let out = child.output().expect("the child runs");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The child's stderr after the three queries.
fn child_stderr(heapdelta: Option<&str>) -> String {
    child_stderr_in("1", heapdelta)
}

#[test]
fn measure_without_a_tracker_says_that_nothing_is_counted() {
    let stderr = child_stderr_in("measure", None);
    assert!(
        stderr.contains("no heapdelta::Tracker is the global allocator"),
        "{stderr}"
    );
}

#[test]
fn queries_without_a_tracker_say_that_heapdelta_is_not_read() {
    let stderr = child_stderr(Some("report=never-written.json"));
    assert!(stderr.contains("HEAPDELTA, set here"), "{stderr}");
    assert!(!std::path::Path::new("never-written.json").exists());
}

#[test]
fn queries_without_a_tracker_say_once_that_nothing_is_counted() {
    let stderr = child_stderr(None);
    assert!(!stderr.contains("HEAPDELTA"), "{stderr}");
    let said = stderr
        .matches("no heapdelta::Tracker is the global allocator")
        .count();
    assert_eq!(said, 1, "{stderr}");
    assert!(stderr.contains("#[global_allocator]"), "{stderr}");
}

#[test]
fn is_installed_without_a_tracker_says_once_that_heapdelta_is_not_read() {
    let stderr = child_stderr_in("guarded", Some("report=never-written.json"));
    let said = stderr
        .matches("HEAPDELTA is set, but no heapdelta::Tracker")
        .count();
    assert_eq!(said, 1, "{stderr}");
}

#[test]
fn heapdelta_unread_is_said_once_by_a_query_and_is_installed_together() {
    let stderr = child_stderr_in("both", Some("report=never-written.json"));
    assert_eq!(stderr.matches("HEAPDELTA").count(), 1, "{stderr}");
    assert!(stderr.contains("HEAPDELTA, set here"), "{stderr}");
}

#[test]
fn is_installed_without_a_tracker_or_heapdelta_says_nothing() {
    let stderr = child_stderr_in("guarded", None);
    assert!(!stderr.contains("heapdelta"), "{stderr}");
}
