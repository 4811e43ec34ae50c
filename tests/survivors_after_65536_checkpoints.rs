//! A block keeps the whole checkpoint count of its birth, so one freed 65,536 checkpoints after
//! it was born is counted as an older block freed, not as one born in the step.

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new().call_sites(heapdelta::CallSites::Off);

#[test]
fn a_block_freed_65536_checkpoints_after_its_birth_is_counted_as_older() {
    heapdelta::keep_checkpoints(2);
    heapdelta::checkpoint("born");
    let old = std::hint::black_box(vec![7u8; 1000]);
    for _ in 0..65_536 {
        heapdelta::checkpoint("tick");
    }
    drop(old);
    let step = heapdelta::checkpoint("freed");
    let survivors = step
        .survivors()
        .expect("a step between consecutive checkpoints");
    assert_eq!(survivors.freed_older_bytes, 1000, "{survivors:?}");
    assert_eq!(survivors.freed_older_blocks, 1);
}
