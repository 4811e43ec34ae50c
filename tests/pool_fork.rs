//! `Pool` across `fork()`: a child whose thread has no heap of its own allocates from the shared
//! heap, whose lock other parent threads may have held at the moment of the fork.

use heapdelta::{Pool, PoolConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

#[path = "children/wait.rs"]
mod wait;
use wait::wait_or_kill;

static POOL: Pool = Pool::with_config(System, PoolConfig::CPYTHON);

/// Heap slots per pool a thread can own (the other one is the shared heap).
const OWNED_HEAPS: usize = Pool::<System>::HEAP_SLOTS - 1;
/// Threads without a heap of their own, keeping the shared heap's lock busy.
const SHARERS: usize = 4;

#[test]
fn a_child_allocates_from_the_shared_heap_whoever_held_its_lock_at_the_fork() {
    let layout = Layout::from_size_align(32, 8).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Every heap slot is taken by a parent thread (which then waits), and four more threads keep
    // the shared heap's lock busy, so forks often happen while one of them holds it.
    // The owners take their heaps before the sharers start, so that none of these goes to a
    // sharer.
    let owned = Arc::new(Barrier::new(OWNED_HEAPS + 1));
    let done = Arc::new(Barrier::new(OWNED_HEAPS + 1));
    let owners: Vec<_> = (0..OWNED_HEAPS)
        .map(|_| {
            let (owned, done) = (owned.clone(), done.clone());
            thread::spawn(move || {
                // SAFETY: non-zero size; the block is freed once with its layout.
                unsafe { POOL.dealloc(POOL.alloc(layout), layout) };
                owned.wait();
                done.wait();
            })
        })
        .collect();
    owned.wait();
    let ready = Arc::new(Barrier::new(SHARERS + 1));
    let sharers: Vec<_> = (0..SHARERS)
        .map(|_| {
            let (stop, ready) = (stop.clone(), ready.clone());
            thread::spawn(move || {
                // SAFETY: non-zero size; each block is freed once with its layout.
                unsafe { POOL.dealloc(POOL.alloc(layout), layout) };
                ready.wait();
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: as above.
                    unsafe { POOL.dealloc(POOL.alloc(layout), layout) };
                }
            })
        })
        .collect();
    ready.wait();
    let mut stuck = 0;
    for _ in 0..20 {
        // SAFETY: the child only allocates from the pool and exits with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // The child's only thread never used the pool and finds every slot owned by a
            // parent thread that does not exist here: it takes the shared heap.
            // SAFETY: non-zero size; `_exit` ends the child at once.
            unsafe {
                let p = POOL.alloc(layout);
                libc::_exit(i32::from(p.is_null()));
            }
        }
        assert!(pid > 0, "fork failed");
        match wait_or_kill(pid, Duration::from_secs(5)) {
            Some(status) => assert_eq!(status, 0, "the child's allocation failed"),
            None => stuck += 1,
        }
    }
    stop.store(true, Ordering::Relaxed);
    done.wait();
    for w in owners.into_iter().chain(sharers) {
        w.join().unwrap();
    }
    assert_eq!(
        stuck, 0,
        "{stuck} of 20 children never got the shared heap's lock"
    );
}
