//! A `HEAPDELTA` override that repeats the tracker's own call-site settings is dropped when it is
//! read, so the inlined paths stay open (every event under an override takes an out-of-line
//! path); one that changes them is kept.

#[path = "children/rerun.rs"]
mod rerun;
use rerun::rerun_under;

use heapdelta::__internals::settings_overridden;
use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new().depth(32);

/// Set in the child process, which runs under the override; its value is whether the override
/// must be kept.
const CHILD: &str = "HEAPDELTA_TEST_OWN_SETTINGS_CHILD";

/// In the child: after the process's first allocations (which read `HEAPDELTA`), whether the
/// override is in force.
fn check_in_child(kept: bool) {
    let _ = std::hint::black_box(vec![1u8; 64]);
    assert_eq!(settings_overridden(), kept);
}

#[test]
fn exact_sites_and_the_trackers_depth_are_dropped() {
    if std::env::var_os(CHILD).is_some() {
        return check_in_child(false);
    }
    rerun_under(
        "exact_sites_and_the_trackers_depth_are_dropped",
        CHILD,
        "sites=exact,depth=32",
    );
}

#[test]
fn another_depth_is_kept() {
    if std::env::var_os(CHILD).is_some() {
        return check_in_child(true);
    }
    rerun_under("another_depth_is_kept", CHILD, "depth=16");
}
