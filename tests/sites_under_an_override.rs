//! `HEAPDELTA=sites=` records the call sites it asks for over a tracker built without them, with
//! the same figures as a tracker built with them.

#[path = "children/rerun.rs"]
mod rerun;
use rerun::rerun_under;
#[path = "common/sites.rs"]
mod sites;
use sites::sites_of;

use heapdelta::{CallSites, Tracker};

#[global_allocator]
static GLOBAL: Tracker = Tracker::new().call_sites(CallSites::Off);

/// Set in the child process, which runs under the override.
const CHILD: &str = "HEAPDELTA_TEST_SITES_OVERRIDE_CHILD";

#[inline(never)]
fn load_rows(kept: &mut Vec<Vec<u64>>) {
    for i in 0..40 {
        kept.push(vec![i; 8]);
    }
}

#[inline(never)]
fn load_names(kept: &mut Vec<String>) {
    for i in 0..25 {
        kept.push(format!("name number {i:04}"));
    }
}

/// In the child: the two functions' blocks, each at a site of its own named after it.
fn sites_are_named_and_counted() {
    let (mut rows, mut names) = (Vec::with_capacity(40), Vec::with_capacity(25));
    let ((), delta) = heapdelta::measure(|| {
        load_rows(&mut rows);
        load_names(&mut names);
    });
    let blocks_at = |function: &str| -> i64 {
        sites_of(&delta, function)
            .iter()
            .map(|s| s.live_blocks)
            .sum()
    };
    assert_eq!(blocks_at("load_rows"), 40, "{delta}");
    assert_eq!(blocks_at("load_names"), 25, "{delta}");
    assert_eq!(delta.live_blocks(), 65, "{delta}");
}

#[test]
fn exact_sites_from_the_environment_are_named_and_counted() {
    if std::env::var_os(CHILD).is_some() {
        sites_are_named_and_counted();
        return;
    }
    rerun_under(
        "exact_sites_from_the_environment_are_named_and_counted",
        CHILD,
        "sites=exact",
    );
}

#[test]
fn sites_sampled_at_every_byte_from_the_environment_are_named_and_counted() {
    if std::env::var_os(CHILD).is_some() {
        sites_are_named_and_counted();
        return;
    }
    rerun_under(
        "sites_sampled_at_every_byte_from_the_environment_are_named_and_counted",
        CHILD,
        "sites=sampled:1",
    );
}
