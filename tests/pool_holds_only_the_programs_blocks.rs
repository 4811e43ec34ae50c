//! Under `Tracker<Pool>`, heapdelta's own allocations (snapshots, symbols, reports) come from the
//! system allocator: the pool's figures hold only the program's blocks.
//!
//! Run without the test harness (`harness = false` in Cargo.toml): the pool's figures are
//! process-wide and compared exactly, and the harness's main thread allocates while a test runs
//! (on a loaded machine, 224 bytes of it landed between the two snapshots about once in 15 runs).

use heapdelta::{CallSites, Pool, Snapshot, Tracker};

#[global_allocator]
static GLOBAL: Tracker<Pool> = Tracker::wrap(Pool::new()).call_sites(CallSites::Exact);

/// Small blocks of the program's own, allocated from one call site.
#[inline(never)]
fn program_data() -> Vec<Vec<u8>> {
    (0..500).map(|i| vec![i as u8; 24 + i % 200]).collect()
}

fn pool_bytes_in_use(s: &Snapshot) -> u64 {
    s.pool().expect("a pool is in use").bytes_in_use
}

fn main() {
    heapdeltas_own_work_leaves_the_pools_blocks_as_they_were();
    println!("pool_holds_only_the_programs_blocks: heapdelta's own work leaves the pool's blocks as they were: ok");
}

fn heapdeltas_own_work_leaves_the_pools_blocks_as_they_were() {
    let before = heapdelta::snapshot();
    let kept = program_data();
    let with_data = heapdelta::snapshot();
    assert!(pool_bytes_in_use(&with_data) > pool_bytes_in_use(&before) + 500 * 24);
    // heapdelta's own work: symbols resolved (their tables are many small blocks), a report
    // formatted, a snapshot written out.
    let growth = with_data.since(&before);
    assert!(!growth.sites().is_empty());
    let report = growth.to_string();
    let mut json = Vec::new();
    with_data
        .write_json_to(&mut json)
        .expect("written to memory");
    let after = heapdelta::snapshot();
    assert_eq!(
        pool_bytes_in_use(&after),
        pool_bytes_in_use(&with_data),
        "a report of {} bytes and a file of {}",
        report.len(),
        json.len()
    );
    drop(kept);
}
