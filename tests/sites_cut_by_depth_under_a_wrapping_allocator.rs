//! Under a program's own `GlobalAlloc` around the tracker, a call site whose capture stops at
//! `Tracker::depth` before any frame of the program's still says so, rather than being named after
//! the wrapper (a review).

use std::alloc::{GlobalAlloc, Layout};

struct Wrapper<A>(A);

// SAFETY: every method forwards its arguments unchanged to the inner allocator.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Wrapper<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

/// Three frames: the wrapper, and the standard library's compiled code under `format!`.
#[global_allocator]
static GLOBAL: Wrapper<heapdelta::Tracker> = Wrapper(heapdelta::Tracker::new().depth(3));

#[test]
fn a_site_cut_before_the_programs_frames_is_not_named_after_the_wrapper() {
    let mut kept: Vec<String> = Vec::with_capacity(100);
    let ((), delta) = heapdelta::measure(|| {
        for i in 0..100 {
            kept.push(format!("{i:>40}"));
        }
    });
    let named_after_the_wrapper: i64 = delta
        .sites()
        .iter()
        .filter(|s| s.site.to_string().contains("Wrapper"))
        .map(|s| s.live_blocks)
        .sum();
    assert_eq!(named_after_the_wrapper, 0, "{:#?}", delta.sites());
    let cut: i64 = delta
        .sites()
        .iter()
        .filter(|s| {
            let name = s.site.to_string();
            name.starts_with("(stack cut at 3 frames") || name.starts_with("(only allocator frames")
        })
        .map(|s| s.live_blocks)
        .sum();
    assert_eq!(cut, 100, "{:#?}", delta.sites());
}
