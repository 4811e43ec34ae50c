//! `Tracker<&Pool>`: a tracker over a pool kept in a static of its own allocates from that pool
//! and reports what it keeps reserved, as `Tracker<Pool>` does.

use heapdelta::{CallSites, Pool, Tracker};

static POOL: Pool = Pool::new();

#[global_allocator]
static GLOBAL: Tracker<&Pool> = Tracker::wrap(&POOL).call_sites(CallSites::Off);

const BLOCKS: u64 = 10_000;

/// Blocks in use in the pool's 64-byte class (a 48-byte block and its 8-byte header).
fn in_use_of_64() -> u64 {
    POOL.stats()
        .classes
        .iter()
        .find(|c| c.size == 64)
        .map_or(0, |c| c.blocks_in_use)
}

#[test]
fn a_tracker_over_a_pool_static_allocates_from_it_and_reports_its_reserve() {
    heapdelta::checkpoint("start");
    let before = in_use_of_64();
    let blocks: Vec<Box<[u8; 48]>> = (0..BLOCKS).map(|_| Box::new([1; 48])).collect();
    let step = heapdelta::checkpoint("kept");
    assert!(in_use_of_64() >= before + BLOCKS);
    assert!(step.live_bytes() >= (BLOCKS * 48) as i64);
    let pool = step.pool().expect("the pool's figures are in the report");
    assert!(
        pool.bytes_reserved >= BLOCKS * 64,
        "{}",
        pool.bytes_reserved
    );
    assert!(step.to_string().contains("| reserved "), "{step}");
    drop(blocks);
}
