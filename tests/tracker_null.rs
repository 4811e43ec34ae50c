//! Failed allocations are returned as null and counted nowhere.

use std::alloc::{GlobalAlloc, Layout};
use std::ptr;
use std::sync::Mutex;

use heapdelta::{CallSites, Tracker};

/// An inner allocator that always fails.
struct Failing;

// SAFETY: never hands out memory, so there is nothing to get wrong.
unsafe impl GlobalAlloc for Failing {
    unsafe fn alloc(&self, _: Layout) -> *mut u8 {
        ptr::null_mut()
    }
    unsafe fn dealloc(&self, _: *mut u8, _: Layout) {}
    unsafe fn realloc(&self, _: *mut u8, _: Layout, _: usize) -> *mut u8 {
        ptr::null_mut()
    }
}

static FAILING: Tracker<Failing> = Tracker::wrap(Failing).call_sites(CallSites::Off);
static REAL: Tracker = Tracker::new().call_sites(CallSites::Off);
/// The tests compare process-wide counters, so they run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn a_null_from_the_inner_allocator_is_returned_and_leaves_the_counters_untouched() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = heapdelta::snapshot().totals();
    let layout = Layout::from_size_align(64, 8).unwrap();
    // SAFETY: non-zero size; a null result is never used.
    unsafe {
        assert!(FAILING.alloc(layout).is_null());
        assert!(FAILING.alloc_zeroed(layout).is_null());
    }
    assert_eq!(heapdelta::snapshot().totals(), before);
}

#[test]
fn a_failed_realloc_keeps_the_old_block_and_its_counts() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let layout = Layout::from_size_align(64, 8).unwrap();
    // SAFETY: non-zero size.
    let p = unsafe { REAL.alloc(layout) };
    assert!(!p.is_null());
    let before = heapdelta::snapshot().totals();
    // SAFETY: `p` is live with `layout`; the size is too large for any allocator.
    let q = unsafe { REAL.realloc(p, layout, isize::MAX as usize - 4) };
    assert!(q.is_null());
    assert_eq!(heapdelta::snapshot().totals(), before);
    // SAFETY: the failed realloc left `p` live with `layout`.
    unsafe { REAL.dealloc(p, layout) };
}

#[test]
fn a_size_whose_header_arithmetic_would_overflow_returns_null() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = heapdelta::snapshot().totals();
    for align in [1usize, 8, 16, 4096] {
        let size = isize::MAX as usize - align + 1;
        let layout = Layout::from_size_align(size, align).unwrap();
        // SAFETY: non-zero size; a null result is never used.
        unsafe {
            assert!(REAL.alloc(layout).is_null(), "align {align}");
            assert!(REAL.alloc_zeroed(layout).is_null(), "align {align}");
        }
    }
    assert_eq!(heapdelta::snapshot().totals(), before);
}

#[test]
fn an_alignment_whose_header_arithmetic_would_overflow_returns_null() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = heapdelta::snapshot().totals();
    // 2^62 is the largest alignment a `Layout` of one byte accepts.
    for align in [1usize << 61, 1 << 62] {
        let layout = Layout::from_size_align(1, align).unwrap();
        // SAFETY: non-zero size; a null result is never used.
        unsafe {
            assert!(REAL.alloc(layout).is_null(), "align {align}");
            assert!(REAL.alloc_zeroed(layout).is_null(), "align {align}");
        }
    }
    assert_eq!(heapdelta::snapshot().totals(), before);
}
