//! A thread's run of new highs, raised into the peak later, is raised to what the live heap was
//! when the thread reached it, not to that plus what other threads folded in since.
//!
//! The tracker here is not the global allocator, so the only events it counts are this test's.

use std::sync::mpsc;

use heapdelta::{CallSites, Tracker};

#[path = "direct/blocks.rs"]
mod direct;
use direct::{blocks, free, peak};

static T: Tracker = Tracker::new().call_sites(CallSites::Off);

#[test]
fn a_high_published_after_other_threads_folded_is_not_raised_by_their_folds() {
    let (reached, wait_reached) = mpsc::channel();
    let (release, wait_release) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        // 60,000 B of new highs, below the 64-KiB slack: kept by the thread, not yet raised.
        free(&T, blocks(&T, 60, 1000));
        reached.send(()).unwrap();
        // The thread publishes its high when it exits, after the main thread's fold.
        let _ = wait_release.recv();
    });
    wait_reached.recv().unwrap();
    // 257 KiB: folded into the global figure at 256 KiB.
    let kept = blocks(&T, 257, 1024);
    assert_eq!(peak(), (257 * 1024, 257));
    release.send(()).unwrap();
    worker.join().unwrap();
    assert_eq!(
        peak(),
        (257 * 1024, 257),
        "after the worker published its high"
    );
    free(&T, kept);
}
