//! A timeline whose checkpoints were taken while other threads allocated and freed has every
//! checkpoint's live figure within its peak, and the file it writes reads back (a first attempt at
//! keeping peaks from falling lowered live figures below their size classes, and wrote files the
//! reader refused).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[test]
fn checkpoints_taken_while_threads_churn_write_a_timeline_that_reads_back() {
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut held: Vec<Vec<u8>> = Vec::new();
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    // A batch of blocks held for a while, then let go: the heap rises and falls.
                    held.push(vec![1u8; 1 + (i * 7919) % 600]);
                    if held.len() > 2_000 {
                        held.clear();
                    }
                    i += 1;
                }
            })
        })
        .collect();
    for k in 0..2_000 {
        heapdelta::checkpoint(format!("c{k}"));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let timeline = heapdelta::timeline();
    let totals: Vec<_> = timeline.checkpoints().iter().map(|c| c.totals()).collect();
    for (k, t) in totals.iter().enumerate() {
        assert!(t.live_bytes <= t.peak_bytes, "checkpoint {k}: {t:?}");
    }
    let mut file = Vec::new();
    timeline.write_json_to(&mut file).unwrap();
    let back = heapdelta::Timeline::read_json_from(&file[..]).expect("the timeline reads back");
    assert_eq!(back.checkpoints().len(), totals.len());
}
