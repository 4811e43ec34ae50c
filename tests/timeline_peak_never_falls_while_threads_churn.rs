//! While other threads allocate and free, a timeline's peak never falls from one checkpoint to
//! the next, and the file it writes reads back: a user trial saw a timeline's peak fall 17% from
//! one checkpoint to the next, the first having reported its own live figure, read while threads
//! churned, as its peak.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[test]
fn checkpoints_taken_while_threads_churn_keep_peaks_that_never_fall() {
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
    for (k, pair) in totals.windows(2).enumerate() {
        assert!(
            pair[1].peak_bytes >= pair[0].peak_bytes,
            "the peak fell from checkpoint {k} to {}: {} → {}",
            k + 1,
            pair[0].peak_bytes,
            pair[1].peak_bytes
        );
    }
    for (k, t) in totals.iter().enumerate() {
        assert!(t.live_bytes <= t.peak_bytes, "checkpoint {k}: {t:?}");
    }
    let mut file = Vec::new();
    timeline.write_json_to(&mut file).unwrap();
    let back = heapdelta::Timeline::read_json_from(&file[..]).expect("the timeline reads back");
    assert_eq!(back.checkpoints().len(), totals.len());
}
