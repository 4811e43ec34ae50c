//! The peak's block count is exact after long runs of events below the peak that change the
//! block count but not the bytes, both at a new peak and after the thread's pending change is
//! folded into the global figure: a guard for any cheaper way of keeping that count, since the
//! model test (`tracker_model.rs`) does not catch a count that drifts during such runs.
//!
//! The tracker here is not the global allocator, so the only events it counts are this test's.

use std::alloc::{GlobalAlloc, Layout};

use heapdelta::{CallSites, Tracker};

static T: Tracker = Tracker::new().call_sites(CallSites::Off);

struct Blocks(Vec<(*mut u8, Layout)>);

impl Blocks {
    fn add(&mut self, n: usize, size: usize) {
        for _ in 0..n {
            let layout = Layout::from_size_align(size, 8).unwrap();
            // SAFETY: the size is not zero.
            let p = unsafe { T.alloc(layout) };
            assert!(!p.is_null());
            self.0.push((p, layout));
        }
    }

    /// Frees the first `n` blocks of `size` bytes.
    fn remove(&mut self, n: usize, size: usize) {
        for _ in 0..n {
            let i = self.0.iter().position(|(_, l)| l.size() == size).unwrap();
            let (p, layout) = self.0.swap_remove(i);
            // SAFETY: `p` is live with `layout`.
            unsafe { T.dealloc(p, layout) };
        }
    }

    /// Frees and allocates again one block of `size` bytes, `n` times: the live figures end
    /// where they started, and never exceed them.
    fn churn(&mut self, n: usize, size: usize) {
        for _ in 0..n {
            self.remove(1, size);
            self.add(1, size);
        }
    }
}

impl Drop for Blocks {
    fn drop(&mut self) {
        for (p, layout) in self.0.drain(..) {
            // SAFETY: `p` is live with `layout`.
            unsafe { T.dealloc(p, layout) };
        }
    }
}

fn peak() -> (u64, u64) {
    let t = heapdelta::snapshot().totals();
    (t.peak_bytes, t.peak_blocks)
}

#[test]
fn the_peak_block_count_is_exact_after_long_runs_below_the_peak() {
    let mut blocks = Blocks(Vec::with_capacity(512));
    blocks.add(100, 64);
    assert_eq!(peak(), (6400, 100));
    // Thousands of events below the peak; then 50 blocks more at the same bytes: 50 of 64 B
    // become 100 of 32 B.
    blocks.churn(3000, 64);
    blocks.remove(50, 64);
    blocks.add(100, 32);
    assert_eq!(peak(), (6400, 100));
    blocks.add(1, 8);
    assert_eq!(peak(), (6408, 151), "a new peak after the run");

    // A fall large enough to be folded into the global figure, after another such run, then a
    // new peak counted from that figure.
    blocks.add(1, 300_000);
    blocks.churn(3000, 32);
    blocks.remove(10, 64);
    blocks.add(20, 32);
    blocks.remove(1, 300_000);
    blocks.add(1, 400_000);
    assert_eq!(peak(), (6408 + 400_000, 162), "a new peak after a fold");
}
