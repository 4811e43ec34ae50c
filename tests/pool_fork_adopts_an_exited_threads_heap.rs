//! `Pool` across `fork()`: a heap whose thread has exited is taken over by the next thread that
//! needs one, the child's included, even when the fork comes while another thread holds that heap
//! for a moment to free a block into it.

use heapdelta::Pool;
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

#[path = "children/wait.rs"]
mod wait;
use wait::wait_or_kill;

static POOL: Pool = Pool::new();
const FORKS: usize = 300;
/// Blocks the exited thread leaves for the others to free (enough to last the forks).
const LEFT: usize = 3_000_000;
/// A child's exit status when its allocation made the pool take a new arena.
const NEW_ARENA: i32 = 10;

/// The layout of every block.
fn layout() -> Layout {
    Layout::from_size_align(32, 8).unwrap()
}

#[test]
fn a_child_adopts_an_exited_threads_heap_that_others_were_freeing_into() {
    let left: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    let started = Barrier::new(3);
    let freeing = Barrier::new(3);
    let new_arenas = thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                // A heap of its own first, so that its frees go to the exited thread's heap
                // (taken for each free) rather than adopting it.
                // SAFETY: non-zero size; the block is freed once with its layout.
                unsafe { POOL.dealloc(POOL.alloc(layout()), layout()) };
                started.wait();
                freeing.wait();
                while !stop.load(Ordering::Relaxed) {
                    let chunk = {
                        let mut blocks = left.lock().unwrap();
                        let keep = blocks.len().saturating_sub(256);
                        blocks.split_off(keep)
                    };
                    if chunk.is_empty() {
                        thread::sleep(Duration::from_millis(1));
                    }
                    for p in chunk {
                        // SAFETY: a block of the pool with this layout, freed once.
                        unsafe { POOL.dealloc(p as *mut u8, layout()) };
                    }
                }
            });
        }
        started.wait();
        let blocks = thread::spawn(|| {
            (0..LEFT)
                // SAFETY: non-zero size; each block is freed once, by the threads above.
                .map(|_| unsafe { POOL.alloc(layout()) } as usize)
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        *left.lock().unwrap() = blocks;
        freeing.wait();
        let mut new_arenas = 0;
        for _ in 0..FORKS {
            thread::sleep(Duration::from_micros(500));
            // SAFETY: the child reads the pool's figures, allocates once and exits with `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // The child's only thread never used the pool: it takes the exited thread's heap,
                // which has free blocks of this class, so no arena is added.
                let before = POOL.stats().arenas_current;
                // SAFETY: non-zero size; `_exit` ends the child at once.
                unsafe {
                    let p = POOL.alloc(layout());
                    let after = POOL.stats().arenas_current;
                    libc::_exit(match (p.is_null(), after == before) {
                        (true, _) => 1,
                        (false, true) => 0,
                        (false, false) => NEW_ARENA,
                    });
                }
            }
            assert!(pid > 0, "fork failed");
            let status = wait_or_kill(pid, Duration::from_secs(10)).expect("a child hung");
            match libc::WEXITSTATUS(status) {
                0 => {}
                NEW_ARENA => new_arenas += 1,
                code => panic!("a child's allocation failed (exit status {code})"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        new_arenas
    });
    assert_eq!(
        new_arenas, 0,
        "{new_arenas} of {FORKS} children took a new arena instead of the exited thread's heap"
    );
}
