//! Under a `HEAPDELTA` sampling override, every sampled block is weighed with the override's mean,
//! the process's first blocks included: they are recorded while `HEAPDELTA` is being read.

#[path = "children/rerun.rs"]
mod rerun;
use rerun::rerun_under;

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
    rerun_under(
        "every_sampled_block_is_weighed_with_the_overrides_mean",
        CHILD,
        &format!("sites=sampled:{MEAN}"),
    );
}
