//! The main example shows the leak: the leaking function as the top growing site, growing at
//! every step, and `Vec<f32>` as the top growing type; with `--fixed`, nothing grows.

use std::path::PathBuf;
use std::process::Command;

/// `cargo test` builds the examples next to the test binaries' `deps` directory.
fn example() -> PathBuf {
    let me = std::env::current_exe().expect("test binary path");
    let dir = me
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target directory");
    dir.join("examples")
        .join(format!("training_leak{}", std::env::consts::EXE_SUFFIX))
}

fn run(args: &[&str]) -> String {
    let out = Command::new(example())
        .args(args)
        .output()
        .expect("the example runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_leaking_run_names_the_leaking_function_and_type_as_growing_at_every_step() {
    let out = run(&["--steps", "6"]);
    let mut lines = out
        .lines()
        .skip_while(|l| !l.starts_with("growing at every step"));
    let header = lines.next().unwrap_or_default();
    assert!(header.contains("last 5 steps"), "{out}");
    let top = lines.next().unwrap_or_default();
    assert!(
        top.contains("Node::forward (examples/training_leak.rs:"),
        "{out}"
    );
    assert!(top.contains("[Vec<f32>]"), "{out}");
    let types = out
        .lines()
        .find(|l| l.trim_start().starts_with("types:"))
        .unwrap_or_default();
    assert!(
        types.trim_start().starts_with("types: Vec<f32> +341 blk"),
        "{types}"
    );
}

#[test]
fn the_fixed_run_reports_nothing_growing() {
    let out = run(&["--fixed", "--steps", "6"]);
    assert!(out.contains("growing at every step: none"), "{out}");
    let last_step = out
        .lines()
        .rfind(|l| l.starts_with("| step 6 |"))
        .unwrap_or_default();
    assert!(last_step.contains("added +0 B"), "{last_step}");
}

#[test]
fn a_bad_argument_is_one_clear_error() {
    let out = Command::new(example())
        .arg("--stpes")
        .output()
        .expect("the example runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument \"--stpes\""));
}
