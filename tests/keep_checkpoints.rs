//! `keep_checkpoints` bounds the timeline to the first checkpoint and the latest ones, and
//! `HEAPDELTA=keep=` overrides it.

#[path = "children/rerun.rs"]
mod rerun;

use rerun::{rerun, rerun_under};

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Set in the child (see `the_child`).
const CHILD: &str = "HEAPDELTA_TEST_KEEP_CHILD";
const TEST: &str = "the_child";

fn labels() -> Vec<String> {
    heapdelta::timeline()
        .checkpoints()
        .iter()
        .filter_map(|c| c.label().map(str::to_string))
        .collect()
}

fn steps(steps: std::ops::RangeInclusive<u32>) {
    for step in steps {
        heapdelta::checkpoint(format!("step {step}"));
    }
}

/// In the child: keeps three checkpoints and prints the labels the timeline holds after five
/// steps, then lifts the bound and prints them again after two more.
#[test]
fn the_child() {
    if std::env::var_os(CHILD).is_some() {
        heapdelta::keep_checkpoints(3);
        steps(1..=5);
        println!("labels: {}", labels().join(", "));
        heapdelta::keep_checkpoints(0);
        steps(6..=7);
        println!("lifted: {}", labels().join(", "));
    }
}

/// The labels the child printed after `prefix`, with `HEAPDELTA` set to `heapdelta_env`.
fn child_labels(heapdelta_env: &str, prefix: &str) -> String {
    let (stdout, _) = rerun(TEST, CHILD, "1", heapdelta_env);
    stdout
        .lines()
        .find_map(|l| l.split_once(prefix).map(|(_, labels)| labels))
        .unwrap_or_else(|| panic!("no labels line in {stdout}"))
        .to_string()
}

#[test]
fn keep_checkpoints_holds_the_first_and_the_latest() {
    assert_eq!(child_labels("", "labels: "), "step 1, step 4, step 5");
}

#[test]
fn keep_checkpoints_of_zero_keeps_every_checkpoint_from_then_on() {
    assert_eq!(
        child_labels("", "lifted: "),
        "step 1, step 4, step 5, step 6, step 7"
    );
}

#[test]
fn heapdelta_keep_overrides_keep_checkpoints() {
    assert_eq!(
        child_labels("keep=4", "labels: "),
        "step 1, step 3, step 4, step 5"
    );
    assert_eq!(
        child_labels("keep=4", "lifted: "),
        "step 1, step 5, step 6, step 7"
    );
}

/// Set in the child of `many_checkpoints`.
const MANY_CHILD: &str = "HEAPDELTA_TEST_MANY_CHECKPOINTS_CHILD";
const MANY_TEST: &str = "the_child_of_many_checkpoints";

/// In the child: 10,001 checkpoints, as a loop that checkpoints every frame takes in three
/// minutes (with `MANY_CHILD=lift`, bounded to 20,000 until the last).
#[test]
fn the_child_of_many_checkpoints() {
    if let Ok(how) = std::env::var(MANY_CHILD) {
        let lift = how == "lift";
        if lift {
            heapdelta::keep_checkpoints(20_000);
        }
        for frame in 0..=10_000 {
            if lift && frame == 10_000 {
                heapdelta::keep_checkpoints(0);
            }
            heapdelta::checkpoint(format!("frame {frame}"));
        }
    }
}

/// What the child of many checkpoints wrote on stderr, with `HEAPDELTA` set to `heapdelta_env`.
fn many_checkpoints(heapdelta_env: &str) -> String {
    rerun_under(MANY_TEST, MANY_CHILD, heapdelta_env)
}

#[test]
fn a_timeline_without_a_bound_says_once_at_10000_checkpoints_how_to_keep_fewer() {
    let stderr = many_checkpoints("");
    assert_eq!(
        stderr
            .matches("the timeline holds 10,000 checkpoints")
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("HEAPDELTA=keep=n"), "{stderr}");
}

#[test]
fn a_bounded_timeline_says_nothing_of_its_size() {
    let stderr = many_checkpoints("keep=600");
    assert!(!stderr.contains("the timeline holds"), "{stderr}");
}

#[test]
fn a_bound_lifted_over_more_than_10000_checkpoints_says_so_too() {
    let (_, stderr) = rerun(MANY_TEST, MANY_CHILD, "lift", "");
    assert_eq!(
        stderr
            .matches("the timeline holds 10,000 checkpoints")
            .count(),
        1,
        "{stderr}"
    );
}
