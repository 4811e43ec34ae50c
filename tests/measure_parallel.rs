//! `measure` counts only the calling thread, so two tests can use it at the same time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

static ARRIVED: AtomicUsize = AtomicUsize::new(0);

/// Waits (up to 10 s) until both tests are running, so their work overlaps.
fn meet() {
    ARRIVED.fetch_add(1, Ordering::SeqCst);
    let start = Instant::now();
    while ARRIVED.load(Ordering::SeqCst) < 2 && start.elapsed() < Duration::from_secs(10) {
        std::thread::yield_now();
    }
}

fn churn_and_keep(keep: usize, size: usize) -> Vec<Vec<u8>> {
    let mut kept = Vec::with_capacity(keep);
    for i in 0..keep * 10 {
        let v = vec![1u8; size];
        if i % 10 == 0 {
            kept.push(v);
        }
    }
    kept
}

#[test]
fn measure_in_one_parallel_test_sees_only_its_thread() {
    meet();
    let (kept, d) = heapdelta::measure(|| churn_and_keep(1000, 100));
    assert_eq!(d.live_bytes(), 1000 * 100 + 1000 * 24);
    assert_eq!(d.live_blocks(), 1001);
    assert_eq!(d.allocated_blocks(), 10_001);
    drop(kept);
}

#[test]
fn measure_in_another_parallel_test_sees_only_its_thread() {
    meet();
    let (kept, d) = heapdelta::measure(|| churn_and_keep(300, 1000));
    assert_eq!(d.live_bytes(), 300 * 1000 + 300 * 24);
    assert_eq!(d.live_blocks(), 301);
    assert_eq!(d.allocated_blocks(), 3001);
    drop(kept);
}
