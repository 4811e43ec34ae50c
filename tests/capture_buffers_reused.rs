//! A thread that exits leaves its capture buffer to the threads after it, which take it rather
//! than map a new one. (A file of its own: another test's thread, starting or exiting, would map or
//! give back a buffer while this one counts.)

#[path = "common/threads.rs"]
mod threads;
use threads::while_threads_hold;

use heapdelta::__internals::mapped_buffers;
use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

const THREADS: usize = 8;

#[test]
fn threads_after_those_that_exited_take_their_buffers_rather_than_map_new_ones() {
    while_threads_hold(THREADS, || vec![1u64; 100], || ());
    let mapped = mapped_buffers();
    while_threads_hold(THREADS, || vec![1u64; 100], || ());
    assert_eq!(
        mapped_buffers(),
        mapped,
        "buffers mapped by the second threads"
    );
}
