//! Totals equal a hand-kept model over a deterministic sequence of operations.
//!
//! The tracker here is not the global allocator, so the only events it counts are the ones this
//! test makes, and the process-wide totals must equal the model exactly (the peak too: one thread).

use std::alloc::{GlobalAlloc, Layout};

use heapdelta::{CallSites, Totals, Tracker};

static T: Tracker = Tracker::new().call_sites(CallSites::Off);

#[derive(Default)]
struct Model {
    live_bytes: u64,
    live_blocks: u64,
    peak_bytes: u64,
    peak_blocks: u64,
    total_bytes: u64,
    total_blocks: u64,
}

impl Model {
    fn alloc(&mut self, size: usize) {
        self.live_bytes += size as u64;
        self.live_blocks += 1;
        self.total_bytes += size as u64;
        self.total_blocks += 1;
        if self.live_bytes > self.peak_bytes {
            self.peak_bytes = self.live_bytes;
            self.peak_blocks = self.live_blocks;
        }
    }
    fn free(&mut self, size: usize) {
        self.live_bytes -= size as u64;
        self.live_blocks -= 1;
    }
    fn totals(&self) -> Totals {
        Totals {
            live_bytes: self.live_bytes,
            live_blocks: self.live_blocks,
            peak_bytes: self.peak_bytes,
            peak_blocks: self.peak_blocks,
            total_bytes: self.total_bytes,
            total_blocks: self.total_blocks,
        }
    }
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn fill(p: *mut u8, n: usize, byte: u8) {
    // SAFETY: `p` points to a live block of at least `n` bytes.
    unsafe { std::ptr::write_bytes(p, byte, n) }
}

fn check(p: *mut u8, n: usize, byte: u8) {
    // SAFETY: `p` points to a live block of at least `n` bytes, all initialised by `fill`.
    let s = unsafe { std::slice::from_raw_parts(p, n) };
    assert!(
        s.iter().all(|&b| b == byte),
        "block contents were not preserved"
    );
}

#[test]
fn totals_equal_a_hand_kept_model_over_alloc_realloc_dealloc_with_alignments_1_to_4096() {
    let mut model = Model::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut live: Vec<(*mut u8, Layout, u8)> = Vec::with_capacity(512);
    for step in 0..20_000u32 {
        let op = rng.next() % 10;
        if live.len() < 8 || op < 4 {
            let align = 1usize << (rng.next() % 13);
            let size = match rng.next() % 4 {
                0 => 1 + (rng.next() % 16) as usize,
                1 => 1 + (rng.next() % 512) as usize,
                2 => 1 + (rng.next() % 70_000) as usize,
                _ => align,
            };
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: non-zero size.
            let p = unsafe {
                if step % 3 == 0 {
                    T.alloc_zeroed(layout)
                } else {
                    T.alloc(layout)
                }
            };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "alignment {align} not honoured");
            if step % 3 == 0 {
                check(p, size, 0);
            }
            let byte = (step % 251) as u8;
            fill(p, size, byte);
            model.alloc(size);
            live.push((p, layout, byte));
        } else if op < 7 {
            let i = (rng.next() % live.len() as u64) as usize;
            let (p, layout, byte) = live[i];
            // grow, shrink a little (often in place), shrink a lot, or grow a lot (moves)
            let new_size = match rng.next() % 4 {
                0 => layout.size() + 1 + (rng.next() % 64) as usize,
                1 => (layout.size() - layout.size() / 8).max(1),
                2 => (layout.size() / 4).max(1),
                _ => layout.size() * 3 + 5000,
            };
            // SAFETY: `p` is live with `layout`; `new_size` is non-zero and small.
            let q = unsafe { T.realloc(p, layout, new_size) };
            assert!(!q.is_null());
            assert_eq!(q as usize % layout.align(), 0);
            check(q, layout.size().min(new_size), byte);
            fill(q, new_size, byte);
            model.free(layout.size());
            model.alloc(new_size);
            live[i] = (
                q,
                Layout::from_size_align(new_size, layout.align()).unwrap(),
                byte,
            );
        } else {
            let i = (rng.next() % live.len() as u64) as usize;
            let (p, layout, byte) = live.swap_remove(i);
            check(p, layout.size(), byte);
            // SAFETY: `p` is live with `layout`.
            unsafe { T.dealloc(p, layout) };
            model.free(layout.size());
        }
        if step % 1000 == 0 {
            assert_eq!(
                heapdelta::snapshot().totals(),
                model.totals(),
                "at step {step}"
            );
        }
    }
    assert_eq!(heapdelta::snapshot().totals(), model.totals());
    for (p, layout, _) in live.drain(..) {
        // SAFETY: `p` is live with `layout`.
        unsafe { T.dealloc(p, layout) };
        model.free(layout.size());
    }
    let end = heapdelta::snapshot().totals();
    assert_eq!(end, model.totals());
    assert_eq!((end.live_bytes, end.live_blocks), (0, 0));
}
