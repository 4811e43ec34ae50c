//! 8 threads × 100,000 mixed operations: totals exact at the end, never negative in between.
//!
//! The tracker is used directly (the global allocator stays `System`), so every counted event is
//! one of the operations below and an independent count of them must match exactly.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use heapdelta::{CallSites, Tracker};

static T: Tracker = Tracker::new().call_sites(CallSites::Off);

const THREADS: usize = 8;
const OPS: usize = 100_000;
const MAX_LIVE: usize = 64;
const MAX_SIZE: u64 = 2048;

#[derive(Default)]
struct Count {
    bytes: AtomicU64,
    blocks: AtomicU64,
}

#[test]
fn eight_threads_of_mixed_operations_give_exact_totals_and_never_negative_snapshots() {
    let allocated = Arc::new(Count::default());
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut seen = 0u32;
            while !done.load(Ordering::Acquire) || seen == 0 {
                let t = heapdelta::snapshot().totals();
                // A negative live figure would wrap to a huge number.
                assert!(t.live_blocks < 1 << 40, "live blocks {}", t.live_blocks);
                assert!(t.live_bytes < 1 << 50, "live bytes {}", t.live_bytes);
                assert!(t.live_bytes <= t.total_bytes && t.live_blocks <= t.total_blocks);
                assert!(t.peak_bytes >= t.live_bytes);
                seen += 1;
            }
            seen
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|k| {
            let allocated = Arc::clone(&allocated);
            std::thread::spawn(move || {
                let mut rng = 0x2545_F491_4F6C_DD1Du64 ^ (k as u64 + 1);
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut live: Vec<(*mut u8, Layout)> = Vec::with_capacity(MAX_LIVE);
                let (mut bytes, mut blocks) = (0u64, 0u64);
                for _ in 0..OPS {
                    let r = next();
                    if live.len() < MAX_LIVE && (live.is_empty() || r % 3 == 0) {
                        let size = 1 + (next() % MAX_SIZE) as usize;
                        let layout = Layout::from_size_align(size, 8).unwrap();
                        // SAFETY: non-zero size.
                        let p = unsafe { T.alloc(layout) };
                        assert!(!p.is_null());
                        live.push((p, layout));
                        bytes += size as u64;
                        blocks += 1;
                    } else if r % 3 == 1 {
                        let i = (next() % live.len() as u64) as usize;
                        let (p, layout) = live[i];
                        let size = 1 + (next() % MAX_SIZE) as usize;
                        // SAFETY: `p` is live with `layout`.
                        let q = unsafe { T.realloc(p, layout, size) };
                        assert!(!q.is_null());
                        live[i] = (q, Layout::from_size_align(size, 8).unwrap());
                        bytes += size as u64;
                        blocks += 1;
                    } else {
                        let (p, layout) = live.swap_remove((next() % live.len() as u64) as usize);
                        // SAFETY: `p` is live with `layout`.
                        unsafe { T.dealloc(p, layout) };
                    }
                }
                for (p, layout) in live {
                    // SAFETY: `p` is live with `layout`.
                    unsafe { T.dealloc(p, layout) };
                }
                allocated.bytes.fetch_add(bytes, Ordering::Relaxed);
                allocated.blocks.fetch_add(blocks, Ordering::Relaxed);
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    assert!(watcher.join().unwrap() > 0);
    let t = heapdelta::snapshot().totals();
    assert_eq!(t.total_bytes, allocated.bytes.load(Ordering::Relaxed));
    assert_eq!(t.total_blocks, allocated.blocks.load(Ordering::Relaxed));
    assert_eq!((t.live_bytes, t.live_blocks), (0, 0));
    assert!(t.peak_bytes <= THREADS as u64 * MAX_LIVE as u64 * MAX_SIZE);
}
