//! `fork()` while another thread holds heapdelta's timeline (a checkpoint, as the `every=` thread
//! takes them, or `timeline()`): the child starts with the lock free, so its own checkpoints and
//! scopes do not wait forever.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

#[path = "children/wait.rs"]
mod wait;
use wait::wait_or_kill;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Forks made while the other thread reads the timeline.
const FORKS: usize = 60;

#[test]
fn a_child_forked_while_another_thread_reads_the_timeline_can_take_checkpoints() {
    // A long timeline, so that each read holds the lock for a while.
    let mut kept = Vec::new();
    for step in 0..2_000 {
        kept.push(vec![0u8; 64]);
        heapdelta::checkpoint(format!("step {step}"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::hint::black_box(heapdelta::timeline());
            }
        })
    };
    let mut hung = None;
    for fork in 0..FORKS {
        // SAFETY: the child only takes a checkpoint and a scope, then leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            heapdelta::checkpoint("in the child");
            drop(heapdelta::scope("child"));
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) };
        }
        match wait_or_kill(pid, Duration::from_secs(10)) {
            Some(status) => assert_eq!(status, 0, "the child failed"),
            None => {
                hung = Some(fork);
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    assert_eq!(hung, None, "a child hung (fork number {hung:?} of {FORKS})");
    drop(kept);
}
