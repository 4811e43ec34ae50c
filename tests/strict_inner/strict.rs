//! A strict, non-zero-sized inner allocator for `Tracker<Strict>`.
//!
//! Every block it hands out is a `System` block offset by `pad = max(align, 64)` bytes, so a
//! strict block wrongly given to `System` is an invalid `free` (glibc aborts, valgrind reports),
//! and every live block (address, size, alignment) is kept in a fixed lock-free table, so a
//! `System` block (or any unknown address, or a wrong layout) given to it aborts loudly.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

const SLOTS: usize = 1 << 20;
const EMPTY: usize = 0;
const GONE: usize = 1;
static ADDRS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(EMPTY) }; SLOTS];
static SIZES: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static ALIGNS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
pub static LIVE: AtomicUsize = AtomicUsize::new(0);
pub static CALLS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    /// When set, every allocation of the inner allocator on this thread fails (returns null).
    pub static FAIL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Non-zero-sized, as `Pool` and `&Pool` are.
pub struct Strict {
    pub id: u64,
}

fn die(msg: &str, addr: usize, a: usize, b: usize) -> ! {
    let mut buf = [0u8; 256];
    let mut n = 0;
    let mut put = |s: &[u8]| {
        for &c in s {
            if n < buf.len() {
                buf[n] = c;
                n += 1;
            }
        }
    };
    put(b"STRICT ALLOCATOR: ");
    put(msg.as_bytes());
    for v in [addr, a, b] {
        put(b" 0x");
        for i in (0..16).rev() {
            put(&[b"0123456789abcdef"[(v >> (i * 4)) & 15]]);
        }
    }
    put(b"\n");
    // SAFETY: writing a stack buffer to fd 2.
    unsafe { libc::write(2, buf.as_ptr().cast(), n) };
    std::process::abort()
}

fn hash(addr: usize) -> usize {
    (addr >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16 & (SLOTS - 1)
}

fn insert(addr: usize, size: usize, align: usize) {
    let mut i = hash(addr);
    for _ in 0..SLOTS {
        let cur = ADDRS[i].load(Ordering::Acquire);
        if cur == EMPTY || cur == GONE {
            if ADDRS[i]
                .compare_exchange(cur, addr, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                SIZES[i].store(size, Ordering::Release);
                ALIGNS[i].store(align, Ordering::Release);
                LIVE.fetch_add(1, Ordering::AcqRel);
                return;
            }
            continue;
        }
        if cur == addr {
            die("address handed out twice", addr, size, align);
        }
        i = (i + 1) & (SLOTS - 1);
    }
    die(
        "table full (addr, live, size)",
        addr,
        LIVE.load(Ordering::Relaxed),
        size,
    );
}

fn find(addr: usize) -> Option<usize> {
    let mut i = hash(addr);
    for _ in 0..SLOTS {
        let cur = ADDRS[i].load(Ordering::Acquire);
        if cur == EMPTY {
            return None;
        }
        if cur == addr {
            return Some(i);
        }
        i = (i + 1) & (SLOTS - 1);
    }
    None
}

/// Whether `addr` is the start of a live block of the strict allocator.
pub fn owns(addr: usize) -> bool {
    find(addr).is_some()
}

/// Whether the user pointer `p` of a tracker block of alignment `align` lives in the strict
/// allocator (its inner block starts `max(align, 8)` bytes before it).
pub fn owns_user(p: *const u8, align: usize) -> bool {
    owns(p as usize - align.max(8))
}

fn remove(addr: usize, layout: Layout, what: &str) {
    let Some(i) = find(addr) else {
        die(what, addr, layout.size(), layout.align());
    };
    let (s, a) = (
        SIZES[i].load(Ordering::Acquire),
        ALIGNS[i].load(Ordering::Acquire),
    );
    if s != layout.size() || a != layout.align() {
        die(
            "layout mismatch (addr, recorded size<<32|align, given size<<32|align)",
            addr,
            s << 32 | a,
            layout.size() << 32 | layout.align(),
        );
    }
    ADDRS[i].store(GONE, Ordering::Release);
    LIVE.fetch_sub(1, Ordering::AcqRel);
}

fn pad(align: usize) -> usize {
    align.max(64)
}

fn sys_layout(layout: Layout) -> Layout {
    Layout::from_size_align(layout.size() + pad(layout.align()), pad(layout.align())).unwrap()
}

// SAFETY: every block is a `System` block of `sys_layout(layout)` offset by `pad(align)` (a
// multiple of the alignment, at least 64), and every free or resize is checked against the table
// of blocks handed out before it reaches `System` with the layout it was allocated with.
unsafe impl GlobalAlloc for Strict {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        CALLS.fetch_add(1, Ordering::Relaxed);
        if FAIL.try_with(|f| f.get()).unwrap_or(false) || layout.size() > isize::MAX as usize / 4 {
            return ptr::null_mut();
        }
        // SAFETY: `sys_layout` has a non-zero size.
        let base = unsafe { System.alloc(sys_layout(layout)) };
        if base.is_null() {
            return base;
        }
        // SAFETY: the `System` block has `pad + size` bytes.
        let p = unsafe { base.add(pad(layout.align())) };
        insert(p as usize, layout.size(), layout.align());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { self.alloc(layout) };
        if !p.is_null() {
            // SAFETY: `p` has `layout.size()` writable bytes.
            unsafe { ptr::write_bytes(p, 0, layout.size()) };
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        CALLS.fetch_add(1, Ordering::Relaxed);
        remove(
            p as usize,
            layout,
            "dealloc of an unknown block (addr, size, align)",
        );
        // SAFETY: `remove` found `p` handed out with this layout, so `p - pad` is the `System`
        // block allocated with `sys_layout(layout)`.
        unsafe { System.dealloc(p.sub(pad(layout.align())), sys_layout(layout)) };
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if find(p as usize).is_none() {
            die(
                "realloc of an unknown block (addr, size, align)",
                p as usize,
                layout.size(),
                layout.align(),
            );
        }
        let new_layout = Layout::from_size_align(new_size, layout.align()).unwrap();
        // SAFETY: `new_size` is non-zero (the caller's contract).
        let q = unsafe { self.alloc(new_layout) };
        if q.is_null() {
            return q;
        }
        // SAFETY: both blocks hold the bytes copied and do not overlap (`q` is fresh); `p` is a
        // block of ours (checked above) with `layout`.
        unsafe {
            ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
            self.dealloc(p, layout);
        }
        q
    }
}

/// Runs `f` inside heapdelta (the thread's `busy` guard set), as its own work is.
pub fn inside<R>(f: impl FnOnce() -> R) -> R {
    heapdelta::__internals::untracked(f)
}

pub const ALIGNS_TO_TRY: [usize; 13] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// Writes `n` bytes derived from `seed` at `p`.
///
/// # Safety
/// `p` must have `n` writable bytes.
pub unsafe fn fill(p: *mut u8, n: usize, seed: u8) {
    for i in 0..n {
        // SAFETY: `i < n`; the caller's contract.
        unsafe { *p.add(i) = seed.wrapping_add(i as u8).wrapping_mul(31) };
    }
}

/// Checks the `n` bytes `fill` wrote at `p` with `seed`.
///
/// # Safety
/// `p` must have `n` readable, initialised bytes.
pub unsafe fn check(p: *const u8, n: usize, seed: u8) {
    for i in 0..n {
        let want = seed.wrapping_add(i as u8).wrapping_mul(31);
        // SAFETY: `i < n`; the caller's contract.
        let got = unsafe { *p.add(i) };
        assert_eq!(got, want, "byte {i} of {n}");
    }
}
