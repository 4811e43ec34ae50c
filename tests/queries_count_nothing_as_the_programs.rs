//! heapdelta's queries allocate as heapdelta's own work: nothing they do is counted as the
//! program's, so no site of the program's appears at the line that called them. (Reading files:
//! `comparisons.rs`.)

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[test]
fn pool_stats_counts_nothing_as_the_programs() {
    // Without a pool: its probe allocation (which finds a pool under the tracker) is not counted.
    let (stats, m) = heapdelta::measure(heapdelta::pool_stats);
    assert!(stats.is_none());
    assert_eq!(m.allocated_blocks(), 0, "{m}");
}
