//! While other threads allocate and free, every snapshot's peak is at least the one before it
//! reported, and at least its own live figure: a user trial saw a timeline's peak fall 17% from
//! one checkpoint to the next, the first having reported its own live figure, read while threads
//! churned, as its peak.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[test]
fn snapshots_taken_while_threads_churn_report_peaks_that_never_fall() {
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
    let mut last_peak = 0;
    let mut falls = Vec::new();
    let mut above = Vec::new();
    for k in 0..3_000 {
        let t = heapdelta::snapshot().totals();
        if t.peak_bytes < last_peak {
            falls.push((k, last_peak, t.peak_bytes));
        }
        if t.live_bytes > t.peak_bytes {
            above.push((k, t.live_bytes, t.peak_bytes));
        }
        last_peak = last_peak.max(t.peak_bytes);
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(
        falls.is_empty(),
        "peak fell (snapshot, before, after): {falls:?}"
    );
    assert!(
        above.is_empty(),
        "live above peak (snapshot, live, peak): {above:?}"
    );
}
