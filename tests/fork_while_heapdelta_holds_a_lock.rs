//! `fork()` while another thread holds one of heapdelta's locks (the timeline's, in a checkpoint
//! as the `every=` thread takes them or in `timeline()`; the site cache's, while call sites are
//! resolved for a report; the loader's, which a lookup of an unwind rule holds): the child starts
//! with the lock free, so its own checkpoints, scopes, reports and captures do not wait forever.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

#[path = "children/wait.rs"]
mod wait;
use wait::wait_or_kill;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Forks made in each test, while another thread holds the lock now and then.
const FORKS: usize = 60;

/// Forks `FORKS` times while `busy` runs in a loop on another thread; each child runs `child` and
/// exits. Returns the number of the first fork whose child hung.
fn fork_while(busy: fn(), child: fn()) -> Option<usize> {
    let stop = Arc::new(AtomicBool::new(false));
    let other = {
        let stop = stop.clone();
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                busy();
            }
        })
    };
    let mut hung = None;
    for fork in 0..FORKS {
        // SAFETY: the child runs `child` (heapdelta calls) and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            child();
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
    other.join().unwrap();
    hung
}

/// Allocates a block that stays live from a stack `depth` frames deeper than the caller's.
#[inline(never)]
fn keep_at_depth(depth: usize, kept: &mut Vec<Vec<u8>>) {
    if depth == 0 {
        kept.push(vec![0u8; 64]);
    } else {
        keep_at_depth(depth - 1, kept);
        std::hint::black_box(());
    }
}

#[test]
fn a_child_forked_while_another_thread_resolves_call_sites_can_make_reports() {
    // Many sites, so that resolving them all holds the site cache's lock most of the time.
    let mut kept = Vec::new();
    for depth in 0..200 {
        keep_at_depth(depth, &mut kept);
    }
    let report = || drop(std::hint::black_box(heapdelta::snapshot().folded()));
    let hung = fork_while(report, report);
    assert_eq!(hung, None, "a child hung (fork number {hung:?} of {FORKS})");
    drop(kept);
}

#[test]
fn a_child_forked_while_another_thread_reads_the_timeline_can_take_checkpoints() {
    // A long timeline, so that each read holds the lock for a while.
    let mut kept = Vec::new();
    for step in 0..2_000 {
        kept.push(vec![0u8; 64]);
        heapdelta::checkpoint(format!("step {step}"));
    }
    let hung = fork_while(
        || drop(std::hint::black_box(heapdelta::timeline())),
        || {
            heapdelta::checkpoint("in the child");
            drop(heapdelta::scope("child"));
        },
    );
    assert_eq!(hung, None, "a child hung (fork number {hung:?} of {FORKS})");
    drop(kept);
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[test]
fn a_child_forked_while_another_thread_looks_up_unwind_rules_can_capture() {
    // With the table emptied, each capture looks its frames' rules up in the loaded objects,
    // holding the loader's lock meanwhile.
    let capture = || {
        heapdelta::__internals::forget_unwind_rules();
        let mut out = [0usize; 32];
        std::hint::black_box(heapdelta::__internals::capture_unwind(&mut out, 0));
    };
    let hung = fork_while(capture, capture);
    assert_eq!(hung, None, "a child hung (fork number {hung:?} of {FORKS})");
}
