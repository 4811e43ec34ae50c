//! Under a `HEAPDELTA` sampling override, every sampled block is weighed with the override's mean,
//! the process's first blocks included: they are recorded while `HEAPDELTA` is being read.

use std::process::Command;

use heapdelta::{CallSites, Tracker};

/// A mean of one byte samples nearly every block: a block weighed with it is plain to see.
#[global_allocator]
static GLOBAL: Tracker = Tracker::new().call_sites(CallSites::Sampled { mean_bytes: 1 });

/// Set in the child process, which runs under the override.
const CHILD: &str = "HEAPDELTA_TEST_OVERRIDE_CHILD";
/// The override's mean: a block sampled with it stands for about this many bytes.
const MEAN: u64 = 1 << 30;

#[test]
fn every_sampled_block_is_weighed_with_the_overrides_mean() {
    if std::env::var_os(CHILD).is_some() {
        let delta = heapdelta::checkpoint("start");
        for site in delta.sites() {
            assert!(
                site.allocated_bytes >= MEAN / 2,
                "{} was weighed with another mean: {} bytes",
                site.site,
                site.allocated_bytes
            );
        }
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "every_sampled_block_is_weighed_with_the_overrides_mean",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("HEAPDELTA", format!("sites=sampled:{MEAN}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed: {stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child did not run the test: {stderr}"
    );
}
