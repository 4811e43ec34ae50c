//! Frees other threads have made but not yet folded into the global figure do not make a thread's
//! view of the live heap, and so the peak, higher than the heap ever was.
//!
//! The tracker here is not the global allocator, so the only events it counts are this test's.

use std::sync::{mpsc, Barrier};

use heapdelta::{CallSites, Tracker};

#[path = "direct/blocks.rs"]
mod direct;
use direct::{blocks, free, peak};

static T: Tracker = Tracker::new().call_sites(CallSites::Off);

const KIB: usize = 1024;

#[test]
fn frees_other_threads_have_not_folded_do_not_raise_the_peak() {
    const WORKERS: usize = 4;
    // 800 KiB, then freed by four threads that stay alive, 200 KiB each.
    let mut made = blocks(&T, 800, KIB);
    assert_eq!(peak(), (800 * KIB as u64, 800));
    let (freed, wait_freed) = mpsc::channel();
    let done = Barrier::new(WORKERS + 1);
    let after = std::thread::scope(|s| {
        for _ in 0..WORKERS {
            let share = made.split_off(made.len() - 200);
            let (freed, done) = (freed.clone(), &done);
            s.spawn(move || {
                free(&T, share);
                freed.send(()).unwrap();
                done.wait();
            });
        }
        for _ in 0..WORKERS {
            wait_freed.recv().unwrap();
        }
        // The heap is empty: 700 KiB now stays below the 800 KiB it was.
        free(&T, blocks(&T, 700, KIB));
        let after = peak();
        done.wait();
        after
    });
    assert_eq!(after, (800 * KIB as u64, 800));
}
