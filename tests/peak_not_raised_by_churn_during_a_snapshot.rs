//! A snapshot or checkpoint taken while another thread allocates and frees large blocks does not
//! make the peak more than the heap ever held: the counters it reads can add a block allocated and freed during
//! the read to the live figure, and the peak is raised only to what the heap certainly held.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[test]
fn snapshots_during_another_threads_churn_leave_the_peak_at_what_the_heap_held() {
    let start = heapdelta::snapshot().totals();
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                drop(std::hint::black_box(Vec::<u8>::with_capacity(300_000)));
                drop(std::hint::black_box(Vec::<u8>::with_capacity(1_000_000)));
            }
        })
    };
    for k in 0..5_000 {
        // Checkpoints too: each step starts from the one before (a review found a version that
        // carried a checkpoint's peak forward keep a figure the heap never held).
        match k % 2 {
            0 => drop(std::hint::black_box(heapdelta::snapshot())),
            _ => drop(std::hint::black_box(heapdelta::checkpoint("churned"))),
        }
    }
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();
    heapdelta::checkpoint("end");
    let end = heapdelta::timeline()
        .checkpoints()
        .last()
        .expect("the end checkpoint")
        .totals();
    // The heap held at most what it held at the start, one 1,000,000-byte block, and what the
    // test's snapshots and thread allocate around it (well under 256 KiB).
    let bound = start.peak_bytes.max(start.live_bytes) + 1_000_000 + 256 * 1024;
    assert!(
        end.peak_bytes <= bound,
        "peak {} above {bound} (started at {})",
        end.peak_bytes,
        start.peak_bytes
    );
}
