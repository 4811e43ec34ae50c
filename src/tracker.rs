//! The shim: `Tracker`, a `GlobalAlloc` that wraps another allocator and counts every block.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

use crate::callsite;
use crate::header::{self, Header, HEADER_SIZE};
use crate::record::{bad_header, Recording};
use crate::thread;

/// How call sites are recorded.
///
/// ```
/// use heapdelta::{CallSites, Tracker};
/// static SAMPLED: Tracker = Tracker::new().call_sites(CallSites::Sampled { mean_bytes: 512 * 1024 });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallSites {
    /// Every allocation records its call site.
    Exact,
    /// Allocations are sampled with a probability proportional to their size (on average one
    /// sample every `mean_bytes` bytes); per-site figures are scaled to unbiased estimates, while
    /// totals and size classes stay exact. Each thread's random sequence starts from a fixed
    /// seed, so a run of the same program repeats the same sample; `HEAPDELTA=seed=N` draws
    /// another.
    Sampled {
        /// Mean bytes between two samples; 0 or 1 samples every allocation (exact sites, at the
        /// sampled path's cost).
        mean_bytes: u64,
    },
    /// No call sites: counters only.
    Off,
}

/// Most frames a call site keeps.
pub const MAX_DEPTH: usize = callsite::STACK_WORDS;

/// The tracking allocator. Install it as the global allocator:
///
/// ```
/// #[global_allocator]
/// static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
///
/// fn main() {
///     let v = vec![0u8; 1000];
///     assert!(heapdelta::is_installed());
///     assert!(heapdelta::snapshot().totals().live_bytes >= 1000);
///     drop(v);
/// }
/// ```
///
/// Every block carries an 8-byte header (more for alignments above 8) in front of the bytes the
/// program asked for; byte figures in reports never include it. One tracker per process: all
/// trackers share the process-wide counters.
///
/// heapdelta's own allocations (symbol tables, snapshots, reports) are not counted. They come
/// from the inner allocator when it is zero-sized, as `System` is, and from `System` when it
/// holds state (a [`Pool`](crate::Pool), a reference to one, any allocator that is not
/// zero-sized), so that such an allocator's own figures (a pool's reserved bytes) hold only the
/// program's blocks; a block that `realloc` moves between the two (one of the program's grown
/// while heapdelta runs, one of heapdelta's grown by the program) is copied across. A zero-sized
/// wrapper around a pool kept elsewhere is not told apart: wrap a reference to the pool instead.
#[derive(Debug)]
pub struct Tracker<A = System> {
    inner: A,
    rec: Recording,
}

impl Tracker<System> {
    /// A tracker over the system allocator, recording exact call sites 32 frames deep.
    ///
    /// `const`, so it can initialise the `#[global_allocator]` static; the `HEAPDELTA`
    /// environment variable (`sites=`, `depth=`) can still change these settings at run time.
    ///
    /// ```
    /// #[global_allocator]
    /// static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    ///
    /// fn main() {
    ///     let (v, growth) = heapdelta::measure(|| vec![0u32; 10]);
    ///     assert!(heapdelta::is_installed());
    ///     assert_eq!(growth.live_bytes(), 40);
    ///     drop(v);
    /// }
    /// ```
    pub const fn new() -> Self {
        Tracker::wrap(System)
    }
}

impl Default for Tracker<System> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: GlobalAlloc> Tracker<A> {
    /// A tracker over `inner`, e.g. a [`Pool`](crate::Pool), or, for less overhead, a reference
    /// to a pool kept in a static of its own (the tracker's settings are then constants to the
    /// compiler; see the `GlobalAlloc` implementation for `&Pool`):
    ///
    /// ```
    /// use heapdelta::{Pool, Tracker};
    /// static GLOBAL: Tracker<Pool> = Tracker::wrap(Pool::new());
    ///
    /// static POOL: Pool = Pool::new();
    /// static CHEAPER: Tracker<&Pool> = Tracker::wrap(&POOL);
    /// ```
    pub const fn wrap(inner: A) -> Self {
        Tracker {
            inner,
            rec: Recording {
                mode: CallSites::Exact,
                depth: 32,
            },
        }
    }

    /// Sets how call sites are recorded (default [`CallSites::Exact`]). `HEAPDELTA=sites=`
    /// overrides it at run time.
    ///
    /// ```
    /// use heapdelta::{CallSites, Tracker};
    /// static GLOBAL: Tracker = Tracker::new().call_sites(CallSites::Off);
    /// ```
    pub const fn call_sites(mut self, mode: CallSites) -> Self {
        self.rec.mode = mode;
        self
    }

    /// Sets how many frames are kept per call site (default 32, at most 64). With 0 no frame is
    /// kept: every block is counted at one site, `(unknown)`. `HEAPDELTA=depth=` overrides it at
    /// run time.
    ///
    /// ```
    /// static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new().depth(16);
    /// ```
    pub const fn depth(mut self, frames: usize) -> Self {
        self.rec.depth = if frames > MAX_DEPTH {
            MAX_DEPTH
        } else {
            frames
        };
        self
    }

    /// Whether heapdelta's own allocations (made while the thread is inside heapdelta, with an
    /// untracked header) come from `System` rather than the inner allocator: when the inner
    /// allocator holds state, as a [`Pool`](crate::Pool) or a reference to one does, so that its
    /// own figures (a pool's reserved and in-use bytes) hold only the program's blocks. A
    /// zero-sized allocator such as `System` keeps them, and the check costs nothing there.
    const OWN_FROM_SYSTEM: bool = std::mem::size_of::<A>() != 0;

    /// Gets the inner block for `layout` from `inner_alloc`, records it and writes its header;
    /// heapdelta's own blocks come from `system_alloc` instead when `OWN_FROM_SYSTEM`.
    ///
    /// # Safety
    /// `inner_alloc` and `system_alloc` must return null or a block of the layout they are given.
    #[inline(always)]
    unsafe fn alloc_with(
        &self,
        layout: Layout,
        inner_alloc: impl FnOnce(Layout) -> *mut u8,
        system_alloc: impl FnOnce(Layout) -> *mut u8,
    ) -> *mut u8 {
        if Self::OWN_FROM_SYSTEM && thread::own_to_system() {
            // SAFETY: the prefix is that of `layout.align()`; the caller's contract.
            return unsafe {
                place_own(layout.size(), header::prefix(layout.align()), system_alloc)
            };
        }
        if layout.align() <= HEADER_SIZE {
            // Nearly every request: the prefix is the header alone, a constant the inner
            // allocator's own alignment checks fold with.
            // SAFETY: `HEADER_SIZE` is `prefix(layout.align())`; the caller's contract.
            unsafe { self.place(layout.size(), HEADER_SIZE, inner_alloc) }
        } else {
            // SAFETY: as above, for this alignment's prefix.
            unsafe { self.alloc_aligned(layout, inner_alloc) }
        }
    }

    /// `alloc_with` for alignments above the header's.
    ///
    /// # Safety
    /// As for `alloc_with`.
    #[inline(never)]
    unsafe fn alloc_aligned(
        &self,
        layout: Layout,
        inner_alloc: impl FnOnce(Layout) -> *mut u8,
    ) -> *mut u8 {
        // SAFETY: the prefix is `prefix(layout.align())`; the caller's contract.
        unsafe { self.place(layout.size(), header::prefix(layout.align()), inner_alloc) }
    }

    /// Gets an inner block of `prefix + size` bytes aligned to `prefix`, records it and writes
    /// its header.
    ///
    /// # Safety
    /// `prefix` must be `header::prefix` of the requested alignment, and `inner_alloc` must
    /// return null or a block of the layout it is given.
    #[inline(always)]
    unsafe fn place(
        &self,
        size: usize,
        prefix: usize,
        inner_alloc: impl FnOnce(Layout) -> *mut u8,
    ) -> *mut u8 {
        let Some(outer) = header::outer_for(size, prefix) else {
            return ptr::null_mut();
        };
        let base = inner_alloc(outer);
        if base.is_null() {
            return base;
        }
        // SAFETY: `base` has `outer.size() = prefix + size` bytes, so `user` is in bounds and the
        // header fits in the prefix.
        unsafe {
            let user = base.add(prefix);
            self.rec.on_alloc(size).write(user);
            user
        }
    }

    /// `realloc` when heapdelta's own blocks come from `System` (`OWN_FROM_SYSTEM`) and the old
    /// block is one of them, or the new one will be (`thread::own_to_system`): the block stays
    /// with `System` when both hold, and otherwise moves to the allocator the new block belongs
    /// to, the old one counted as freed if it was tracked.
    ///
    /// # Safety
    /// `ptr` must be a block of this tracker allocated with `layout`, `old` its header, `new_size`
    /// valid for `realloc`, and `outer` the outer layouts of the old block and the new one.
    #[cold]
    #[inline(never)]
    unsafe fn realloc_own(
        &self,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
        old: Header,
        (old_outer, new_outer): (Layout, Layout),
    ) -> *mut u8 {
        let prefix = header::prefix(layout.align());
        let to_system = thread::own_to_system();
        if to_system && old.is_from_system() {
            // SAFETY: the old block is `System`'s, allocated with `old_outer`; `new_outer.size()`
            // is non-zero and valid for that alignment.
            let base = unsafe { System.realloc(ptr.sub(prefix), old_outer, new_outer.size()) };
            if base.is_null() {
                return base;
            }
            // SAFETY: `base` holds `prefix + new_size` bytes, the untracked header copied along.
            return unsafe { base.add(prefix) };
        }
        // SAFETY: `prefix` is that of `layout.align()`; the closures return null or a block of
        // the layout they are given.
        let new = unsafe {
            if to_system {
                place_own(new_size, prefix, |outer| System.alloc(outer))
            } else {
                self.place(new_size, prefix, |outer| self.inner.alloc(outer))
            }
        };
        if new.is_null() {
            return new;
        }
        // SAFETY: both blocks hold at least the bytes copied and do not overlap (the new one is
        // fresh); the old one is then given back to the allocator it came from, with its layout.
        unsafe {
            ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            if old.is_from_system() {
                System.dealloc(ptr.sub(prefix), old_outer);
            } else {
                self.rec.on_free(old, layout.size());
                self.inner.dealloc(ptr.sub(prefix), old_outer);
            }
        }
        new
    }
}

/// Gets a block of `size` bytes for heapdelta's own use from `system_alloc` (see
/// `Tracker::OWN_FROM_SYSTEM`), with the header that says so.
///
/// # Safety
/// `prefix` must be `header::prefix` of the requested alignment, and `system_alloc` must return
/// null or a block of the layout it is given.
#[cold]
#[inline(never)]
unsafe fn place_own(
    size: usize,
    prefix: usize,
    system_alloc: impl FnOnce(Layout) -> *mut u8,
) -> *mut u8 {
    let Some(outer) = header::outer_for(size, prefix) else {
        return ptr::null_mut();
    };
    let base = system_alloc(outer);
    if base.is_null() {
        return base;
    }
    // SAFETY: `base` has `prefix + size` bytes, so `user` is in bounds and the header fits in the
    // prefix.
    unsafe {
        let user = base.add(prefix);
        Header::OWN_FROM_SYSTEM.write(user);
        user
    }
}

/// Reads and checks the header of a block the tracker handed out.
///
/// # Safety
/// `ptr` must come from this tracker.
#[inline]
unsafe fn checked_header(ptr: *mut u8) -> Header {
    // SAFETY: the caller passes a block of ours, so the header precedes it.
    let h = unsafe { Header::read(ptr) };
    if !h.is_valid() {
        bad_header();
    }
    h
}

// SAFETY: every block handed out is a block of the inner allocator, or of `System` for heapdelta's
// own blocks under a stateful inner allocator (`OWN_FROM_SYSTEM`), offset by `prefix`, which keeps
// the requested alignment and leaves room for the header; the same offset and outer layout are
// recomputed from the caller's layout on dealloc/realloc, and the header's `FROM_SYSTEM` flag says
// which of the two allocators a block goes back to (`realloc_own` moves a block between them with
// a copy), so each allocator only ever sees blocks and layouts it handed out.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Tracker<A> {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: `outer` has a non-zero size (it includes the header).
        unsafe {
            self.alloc_with(
                layout,
                |outer| self.inner.alloc(outer),
                |outer| System.alloc(outer),
            )
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            self.alloc_with(
                layout,
                |outer| self.inner.alloc_zeroed(outer),
                |outer| System.alloc_zeroed(outer),
            )
        }
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was returned by `alloc` with this layout (GlobalAlloc contract), so the
        // header precedes it; `on_free` checks its magic bits.
        let h = unsafe { Header::read(ptr) };
        let own = self.rec.on_free(h, layout.size());
        // SAFETY: the block was allocated with `layout`, so `outer_for` accepted its size and
        // prefix then, and `ptr - prefix` is the inner block, allocated with that outer layout,
        // by `System` when `on_free` says it is one of heapdelta's own.
        unsafe {
            let prefix = header::prefix(layout.align());
            let outer = header::outer_of_allocated(layout.size(), prefix);
            if own {
                System.dealloc(ptr.sub(prefix), outer)
            } else {
                self.inner.dealloc(ptr.sub(prefix), outer)
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let prefix = header::prefix(layout.align());
        let (Some(old_outer), Some(new_outer)) = (
            header::outer_layout(layout),
            header::outer_for(new_size, layout.align()),
        ) else {
            return ptr::null_mut();
        };
        // SAFETY: `ptr` is one of our blocks (GlobalAlloc contract).
        let old = unsafe { checked_header(ptr) };
        if Self::OWN_FROM_SYSTEM && (old.is_from_system() || thread::own_to_system()) {
            // SAFETY: as below; `old` is the block's header.
            return unsafe { self.realloc_own(ptr, layout, new_size, old, (old_outer, new_outer)) };
        }
        // SAFETY: the inner block starts `prefix` bytes before `ptr` and was allocated with
        // `old_outer`; `new_outer.size()` is non-zero and a valid size for that alignment.
        let base = unsafe {
            self.inner
                .realloc(ptr.sub(prefix), old_outer, new_outer.size())
        };
        if base.is_null() {
            return base;
        }
        self.rec.on_free(old, layout.size());
        // SAFETY: `base` holds `prefix + new_size` bytes with the old alignment.
        unsafe {
            let user = base.add(prefix);
            self.rec.on_alloc(new_size).write(user);
            user
        }
    }
}

/// Whether a [`Tracker`] is serving allocations in this process (it is the global allocator).
///
/// Without a tracker every query still works but returns empty figures: a program can check
/// this before trusting a report. The first call that finds no tracker says once on stderr that
/// `HEAPDELTA`, if it is set, does nothing.
///
/// ```
/// #[global_allocator]
/// static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
///
/// fn main() {
///     assert!(heapdelta::is_installed());
/// }
/// ```
///
/// ```
/// // Without `#[global_allocator] static GLOBAL: heapdelta::Tracker = ...` this is false and
/// // the queries return empty data.
/// if !heapdelta::is_installed() {
///     assert_eq!(heapdelta::snapshot().totals().live_bytes, 0);
/// }
/// ```
pub fn is_installed() -> bool {
    crate::checkpoint::installed_or_hint()
}
