//! `HEAPDELTA=depth=0` keeps no frame, as `Tracker::depth(0)` does: every block is counted at one
//! site, with no frame.

#[path = "children/rerun.rs"]
mod rerun;
use rerun::rerun_under;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Set in the child process, which runs under the override.
const CHILD: &str = "HEAPDELTA_TEST_DEPTH_ZERO_CHILD";

#[test]
fn depth_zero_from_the_environment_counts_every_block_at_one_site_without_frames() {
    if std::env::var_os(CHILD).is_some() {
        let (kept, delta) = heapdelta::measure(|| (vec![1u8; 100], String::from("abc")));
        let sites = delta.sites();
        assert_eq!(sites.len(), 1, "{delta}");
        assert!(sites[0].site.frames().is_empty(), "{}", sites[0].site);
        assert_eq!(sites[0].live_blocks, 2);
        drop(kept);
        return;
    }
    let stderr = rerun_under(
        "depth_zero_from_the_environment_counts_every_block_at_one_site_without_frames",
        CHILD,
        "depth=0",
    );
    assert!(!stderr.contains("bad depth"), "{stderr}");
}
