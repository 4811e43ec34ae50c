//! A program's own `GlobalAlloc` around the tracker (one that counts, say) is the allocator's, not
//! the program's: sites are named after the code that allocated, not after the wrapper's `alloc`
//! (a user trial found every site named `alloc<heapdelta::tracker::Tracker<…>>` at its wrapper's
//! line).

#[path = "common/sites.rs"]
mod sites;
use sites::sites_of;

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

struct Counting<A> {
    inner: A,
    calls: AtomicUsize,
}

// SAFETY: every method forwards its arguments unchanged to the inner allocator, which upholds the
// contract; the counter only counts.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.counted(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.realloc(ptr, layout, new_size) }
    }
}

impl<A: GlobalAlloc> Counting<A> {
    /// A helper of the wrapper's, between its `alloc` and the tracker (a review found sites named
    /// after such a helper).
    ///
    /// # Safety
    /// As `GlobalAlloc::alloc`.
    #[inline(never)]
    unsafe fn counted(&self, layout: Layout) -> *mut u8 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.alloc(layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting<heapdelta::Tracker> = Counting {
    inner: heapdelta::Tracker::new(),
    calls: AtomicUsize::new(0),
};

#[inline(never)]
fn load_rows(out: &mut Vec<Vec<u8>>) {
    for _ in 0..40 {
        out.push(vec![1u8; 300]);
    }
}

#[inline(never)]
fn grow_index(out: &mut Vec<u64>) {
    for i in 0..5_000 {
        out.push(i);
    }
}

#[test]
fn sites_are_named_after_the_code_that_allocated_not_the_wrapper() {
    let mut rows = Vec::with_capacity(100);
    let mut index = Vec::new();
    let ((), delta) = heapdelta::measure(|| {
        load_rows(&mut rows);
        grow_index(&mut index);
    });
    assert!(GLOBAL.calls.load(Ordering::Relaxed) > 0);
    let rows_sites = sites_of(&delta, "load_rows");
    let rows_blocks: i64 = rows_sites.iter().map(|s| s.live_blocks).sum();
    assert_eq!(rows_blocks, 40, "{delta}");
    let index_sites = sites_of(&delta, "grow_index");
    assert_eq!(index_sites.len(), 1, "{delta}");
    assert_eq!(index_sites[0].site.type_name(), "Vec<u64>", "{delta}");
}

/// The live blocks of the sites named after `arena`'s `GlobalAlloc::alloc`.
fn blocks_of_sites_in(delta: &heapdelta::Delta, arena: &str) -> i64 {
    let alloc = format!("::{arena} as core::alloc::global::GlobalAlloc>::alloc");
    sites_of(delta, &alloc).iter().map(|s| s.live_blocks).sum()
}

/// A program's own allocator type, called by its code (not the global allocator): it takes each
/// block from the global one, as a chunk it keeps.
struct Arena {
    chunks: Mutex<Vec<Vec<u8>>>,
}

// SAFETY: each block is a chunk of its own, kept (never moved: a `Vec`'s buffer stays put when the
// `Vec` itself moves) until the arena is dropped; `dealloc` frees nothing.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut chunk = vec![0u8; layout.size() + layout.align()];
        let offset = chunk.as_ptr().align_offset(layout.align());
        // SAFETY: `offset < align`, within the chunk of `size + align` bytes.
        let p = unsafe { chunk.as_mut_ptr().add(offset) };
        self.chunks.lock().unwrap().push(chunk);
        p
    }
    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[inline(never)]
fn parse_into(arena: &Arena) {
    for _ in 0..30 {
        // SAFETY: a non-zero size; the block is left to the arena.
        std::hint::black_box(unsafe { arena.alloc(Layout::from_size_align(200, 8).unwrap()) });
    }
}

#[test]
fn a_programs_own_allocator_called_by_its_code_keeps_its_frames() {
    let arena = Arena {
        chunks: Mutex::new(Vec::with_capacity(100)),
    };
    let ((), delta) = heapdelta::measure(|| parse_into(&arena));
    assert_eq!(blocks_of_sites_in(&delta, "Arena"), 30, "{delta}");
}

/// A program's own allocator type that takes each block from the global allocator directly
/// (`std::alloc::alloc`), and marks it: not a tail call, so its frame is on the stack.
struct DirectArena;

// SAFETY: blocks come from the global allocator with the layout asked for and go back to it with
// the same.
unsafe impl GlobalAlloc for DirectArena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's non-zero-sized layout.
        let p = unsafe { std::alloc::alloc(layout) };
        if !p.is_null() {
            // SAFETY: `p` holds at least one byte.
            unsafe { p.write(0xA5) };
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above, with `layout`.
        unsafe { std::alloc::dealloc(ptr, layout) }
    }
}

#[inline(never)]
fn parse_into_direct(arena: &DirectArena, kept: &mut Vec<*mut u8>) {
    for _ in 0..30 {
        // SAFETY: a non-zero size; the block is freed by the test.
        kept.push(unsafe { arena.alloc(Layout::from_size_align(200, 8).unwrap()) });
    }
}

#[test]
fn a_programs_own_allocator_that_takes_from_the_global_one_keeps_its_frames() {
    let mut kept = Vec::with_capacity(30);
    let ((), delta) = heapdelta::measure(|| parse_into_direct(&DirectArena, &mut kept));
    assert_eq!(blocks_of_sites_in(&delta, "DirectArena"), 30, "{delta}");
    for p in kept {
        // SAFETY: each block came from `DirectArena::alloc` with this layout.
        unsafe { DirectArena.dealloc(p, Layout::from_size_align(200, 8).unwrap()) };
    }
}
