//! The peak never falls below a live figure a snapshot reported: when threads hold more than the
//! global peak knows of (their growth below the fold threshold), the snapshot that sees it raises
//! the peak for every later one.

use std::sync::{Arc, Barrier};

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[test]
fn a_later_snapshot_keeps_the_live_figure_an_earlier_one_saw_as_its_peak_floor() {
    let held = Arc::new(Barrier::new(5));
    let freed = Arc::new(Barrier::new(5));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (held, freed) = (held.clone(), freed.clone());
            std::thread::spawn(move || {
                // 200,000 B per thread: below the 256-KiB fold threshold, so no thread folds it
                // into the global figure, and the four together are more than any one's view.
                let blocks: Vec<Vec<u8>> = (0..100).map(|_| vec![1u8; 2000]).collect();
                held.wait();
                freed.wait();
                drop(blocks);
            })
        })
        .collect();
    held.wait();
    let all_held = heapdelta::snapshot().totals();
    freed.wait();
    for w in workers {
        w.join().unwrap();
    }
    let after = heapdelta::snapshot().totals();
    assert!(all_held.live_bytes >= 800_000, "{all_held:?}");
    assert!(
        after.peak_bytes >= all_held.live_bytes,
        "peak {} after a snapshot saw {} live",
        after.peak_bytes,
        all_held.live_bytes
    );
}
