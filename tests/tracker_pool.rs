//! `Tracker<Pool>`: checkpoints show what the pool keeps reserved next to what is live.

use heapdelta::{CallSites, Pool, Tracker};

#[global_allocator]
static GLOBAL: Tracker<Pool> = Tracker::wrap(Pool::new()).call_sites(CallSites::Off);

#[test]
fn after_freeing_most_small_blocks_live_falls_but_reserved_stays_and_is_reported() {
    let mut blocks: Vec<Box<[u8; 48]>> = (0..200_000).map(|_| Box::new([1; 48])).collect();
    let peak = heapdelta::checkpoint("peak");
    let reserved_at_peak = peak.pool().expect("a pool is in use").bytes_reserved;
    // keep every 100th block: the survivors are spread over every arena
    let mut i = 0;
    blocks.retain(|_| {
        i += 1;
        i % 100 == 0
    });
    blocks.shrink_to_fit();
    let after = heapdelta::checkpoint("after");
    let pool = after.pool().expect("a pool is in use");
    let live = after.totals().expect("process totals").live_bytes;
    assert!(after.live_bytes() < -(150_000 * 48));
    assert!(
        pool.bytes_reserved * 10 >= reserved_at_peak * 9,
        "reserved {} vs {reserved_at_peak} at the peak",
        pool.bytes_reserved
    );
    assert!(
        pool.bytes_reserved > 20 * live,
        "reserved {} for {live} live",
        pool.bytes_reserved
    );
    let text = after.to_string();
    assert!(
        text.lines().next().unwrap_or("").contains("| reserved "),
        "{text}"
    );
    assert!(text.contains("free in used pools"), "{text}");
    assert!(text.contains("class  64 B"), "{text}");
    drop(blocks);
}

#[test]
fn blocks_above_the_pools_limit_are_shown_beside_reserved() {
    // Past the pool's 512-byte limit: kept by the inner allocator, not in the arenas, so live
    // can exceed reserved by such blocks. (Small, beside the other test of this file.)
    let big = vec![0u8; 4096];
    let step = heapdelta::checkpoint("a large block");
    let pool = step.pool().expect("a pool is in use");
    assert!(pool.large_bytes >= 4096, "{pool:?}");
    let text = step.to_string();
    let first = text.lines().next().unwrap_or("");
    assert!(first.contains("| large "), "{text}");
    assert!(
        text.contains("large blocks, from the inner allocator: "),
        "{text}"
    );
    drop(big);
}

#[test]
fn pool_stats_counts_nothing_as_the_programs() {
    let (stats, m) = heapdelta::measure(heapdelta::pool_stats);
    assert!(stats.is_some_and(|s| !s.classes.is_empty()));
    assert_eq!(m.allocated_blocks(), 0, "{m}");
}
