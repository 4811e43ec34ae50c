//! `keep_checkpoints` bounds the timeline to the first checkpoint and the latest ones, and
//! `HEAPDELTA=keep=` overrides it.

use std::process::Command;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Set in the child: `keep_checkpoints(3)` then five checkpoints, their labels printed.
const CHILD: &str = "HEAPDELTA_TEST_KEEP_CHILD";
const TEST: &str = "the_child";

fn labels() -> Vec<String> {
    heapdelta::timeline()
        .checkpoints()
        .iter()
        .filter_map(|c| c.label().map(str::to_string))
        .collect()
}

fn five_steps() {
    for step in 1..=5 {
        heapdelta::checkpoint(format!("step {step}"));
    }
}

/// In the child: keeps three checkpoints and prints the labels the timeline holds.
#[test]
fn the_child() {
    if std::env::var_os(CHILD).is_some() {
        heapdelta::keep_checkpoints(3);
        five_steps();
        println!("labels: {}", labels().join(", "));
    }
}

fn child_labels(heapdelta_env: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("HEAPDELTA", heapdelta_env)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split_once("labels: ").map(|(_, labels)| labels))
        .unwrap_or_else(|| panic!("no labels line in {stdout}"))
        .to_string()
}

#[test]
fn keep_checkpoints_holds_the_first_and_the_latest() {
    assert_eq!(child_labels(""), "step 1, step 4, step 5");
}

#[test]
fn heapdelta_keep_overrides_keep_checkpoints() {
    assert_eq!(child_labels("keep=4"), "step 1, step 3, step 4, step 5");
}
