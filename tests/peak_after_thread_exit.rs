//! Allocations that a thread-local destructor makes after heapdelta's own (at thread exit) are
//! checked against the peak like any other.
//!
//! The tracker here is not the global allocator, so the only events it counts are this test's.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;

use heapdelta::{CallSites, Tracker};

static T: Tracker = Tracker::new().call_sites(CallSites::Off);

/// Frees the block it holds, after allocating 90,000 B more for a moment.
struct LastWords(Cell<Option<(usize, Layout)>>);

impl Drop for LastWords {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(90_000, 8).unwrap();
        // SAFETY: the size is not zero; each block is freed with the layout it was allocated with.
        unsafe {
            let p = T.alloc(layout);
            T.dealloc(p, layout);
            if let Some((held, held_layout)) = self.0.take() {
                T.dealloc(held as *mut u8, held_layout);
            }
        }
    }
}

thread_local! {
    // Registered before the thread's first tracked event, so its destructor runs after
    // heapdelta's.
    static LAST_WORDS: LastWords = const { LastWords(Cell::new(None)) };
}

#[test]
fn an_allocation_in_a_late_thread_local_destructor_can_make_the_peak() {
    std::thread::spawn(|| {
        LAST_WORDS.with(|_| ());
        let big = Layout::from_size_align(100_000, 8).unwrap();
        let held = Layout::from_size_align(50_000, 8).unwrap();
        // SAFETY: non-zero sizes; `big` is freed with its layout, `held` by `LastWords`.
        unsafe {
            let p = T.alloc(big);
            T.dealloc(p, big);
            let h = T.alloc(held);
            LAST_WORDS.with(|w| w.0.set(Some((h as usize, held))));
        }
    })
    .join()
    .unwrap();
    let t = heapdelta::snapshot().totals();
    assert_eq!((t.peak_bytes, t.peak_blocks), (140_000, 2));
    assert_eq!((t.live_bytes, t.live_blocks), (0, 0));
}
