//! `Pool::alloc_zeroed`: large requests use the inner allocator's own zeroed allocation (which
//! `calloc` serves with untouched zero pages), small blocks come back zeroed even when reused.

use heapdelta::{Pool, PoolConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The large request of the test.
const LARGE: usize = 64 << 20;
/// Calls to the inner allocator's `alloc_zeroed`, and to its `alloc` for `LARGE` bytes.
static ZEROED: AtomicUsize = AtomicUsize::new(0);
static PLAIN: AtomicUsize = AtomicUsize::new(0);

/// `System`, counting calls.
struct Counting;

// SAFETY: forwards every call to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() == LARGE {
            PLAIN.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ZEROED.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[test]
fn a_large_zeroed_request_goes_to_the_inner_alloc_zeroed() {
    let pool = Pool::with_config(Counting, PoolConfig::CPYTHON);
    let l = Layout::from_size_align(LARGE, 8).unwrap();
    // SAFETY: non-zero size; the block is freed with the same layout.
    unsafe {
        let p = pool.alloc_zeroed(l);
        assert!(!p.is_null());
        assert_eq!(*p.add(l.size() - 1), 0);
        pool.dealloc(p, l);
    }
    assert_eq!(ZEROED.load(Ordering::Relaxed), 1);
    assert_eq!(PLAIN.load(Ordering::Relaxed), 0);
    assert_eq!(pool.stats().large_blocks, 0);
}

#[test]
fn a_reused_small_block_comes_back_zeroed() {
    let pool = Pool::with_config(System, PoolConfig::CPYTHON);
    let l = Layout::from_size_align(100, 8).unwrap();
    // SAFETY: non-zero size; each block is freed once with its layout.
    unsafe {
        let p = pool.alloc(l);
        p.write_bytes(0xAB, l.size());
        pool.dealloc(p, l);
        let q = pool.alloc_zeroed(l);
        assert_eq!(q, p, "the freed block is reused (LIFO free list)");
        assert!((0..l.size()).all(|i| *q.add(i) == 0));
        pool.dealloc(q, l);
    }
}
