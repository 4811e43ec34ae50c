//! A thread's capture buffer is allocated on its first call site and given back when it exits, so
//! threads that come and go do not leak it.

#[path = "common/threads.rs"]
mod threads;
use threads::while_threads_hold;

use heapdelta::__internals::live_buffers;
use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

const THREADS: usize = 8;

#[test]
fn threads_that_captured_sites_give_their_buffers_back_when_they_exit() {
    // This thread's own buffer, and the test harness's, may exist already; count from here.
    let before = live_buffers();
    let during = while_threads_hold(THREADS, || vec![1u64; 100], live_buffers);
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
