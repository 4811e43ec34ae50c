//! `HEAPDELTA=depth=0` keeps no frame, as `Tracker::depth(0)` does: every block is counted at one
//! site, with no frame.

use std::process::Command;

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
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "depth_zero_from_the_environment_counts_every_block_at_one_site_without_frames",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("HEAPDELTA", "depth=0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed: {stderr}");
    assert!(!stderr.contains("bad depth"), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child did not run the test: {stderr}"
    );
}
