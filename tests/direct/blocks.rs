//! Blocks taken from a tracker called directly, not installed as the global allocator, so that the
//! only events the process-wide counters see are the test's own.

use std::alloc::{GlobalAlloc, Layout};

use heapdelta::Tracker;

/// `n` blocks of `size` bytes from `t`, as addresses (which cross threads) and layouts.
pub fn blocks(t: &Tracker, n: usize, size: usize) -> Vec<(usize, Layout)> {
    let layout = Layout::from_size_align(size, 8).unwrap();
    // SAFETY: the size is not zero.
    (0..n)
        .map(|_| (unsafe { t.alloc(layout) } as usize, layout))
        .collect()
}

/// Frees blocks that came from `blocks(t, ..)`.
pub fn free(t: &Tracker, blocks: Vec<(usize, Layout)>) {
    for (p, layout) in blocks {
        // SAFETY: each block came from `t.alloc` with `layout`.
        unsafe { t.dealloc(p as *mut u8, layout) };
    }
}

/// The peak: bytes and blocks.
pub fn peak() -> (u64, u64) {
    let t = heapdelta::snapshot().totals();
    (t.peak_bytes, t.peak_blocks)
}
