//! A thread's capture buffer is allocated on its first call site and given back when it exits, so
//! threads that come and go do not leak it.

use std::sync::{Arc, Barrier};

use heapdelta::__internals::live_buffers;
use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

const THREADS: usize = 8;

#[test]
fn threads_that_captured_sites_give_their_buffers_back_when_they_exit() {
    // This thread's own buffer, and the test harness's, may exist already; count from here.
    let before = live_buffers();
    let allocated = Arc::new(Barrier::new(THREADS + 1));
    let counted = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (allocated, counted) = (allocated.clone(), counted.clone());
            std::thread::spawn(move || {
                let v = std::hint::black_box(vec![1u64; 100]);
                allocated.wait();
                // Held until the count is taken.
                counted.wait();
                drop(v);
            })
        })
        .collect();
    allocated.wait();
    let during = live_buffers();
    counted.wait();
    // `join` returns once a thread has exited, its thread-local destructors included.
    for t in threads {
        t.join().unwrap();
    }
    assert!(
        during >= before + THREADS,
        "{before} before, {during} with {THREADS} threads running"
    );
    assert!(
        live_buffers() <= before,
        "{} after the threads exited, {before} before",
        live_buffers()
    );
}
