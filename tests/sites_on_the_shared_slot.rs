//! Threads beyond heapdelta's private counter slots count into a shared one, and their
//! allocations still get call sites.

#[path = "common/threads.rs"]
mod threads;
use threads::while_threads_hold;

use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

/// More threads than there are private slots (255), all alive at once.
const THREADS: usize = 300;
/// A size nothing else in the test allocates.
const SIZE: usize = 77_777;

#[test]
fn threads_beyond_the_private_slots_record_call_sites() {
    let before = heapdelta::snapshot();
    let grown = while_threads_hold(
        THREADS,
        || vec![1u8; SIZE],
        || heapdelta::snapshot().since(&before),
    );
    let at_sites: i64 = grown
        .sites()
        .iter()
        .filter(|s| s.live_bytes > 0 && s.live_bytes % SIZE as i64 == 0)
        .map(|s| s.live_blocks)
        .sum();
    assert_eq!(at_sites, THREADS as i64, "blocks of {SIZE} B at call sites");
}
