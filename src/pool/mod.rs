//! Pool mode: a pymalloc-style small-object allocator that reproduces CPython 3.11's counters.
//!
//! Table of contents:
//! * [`config`]: `PoolConfig` and the geometry derived from it;
//! * [`engine`]: everything a pool does apart from its inner allocator's type (not generic);
//! * [`stable`]: the address-stable part of a pool (heap slots, arena map, arena counters);
//! * [`map`]: which addresses belong to an arena (`address_in_range`);
//! * [`arena`]: arena descriptors;
//! * [`heap`]: the single-threaded pymalloc state machine (usedpools, usable_arenas, nfp2lasta);
//! * [`local`]: which heap a thread uses, remote frees;
//! * [`stats`]: `PoolStats`, `ClassStats`, `pool_stats()`;
//! * [`replay`]: the trace replay used by the tests and `examples/replay_trace.rs`.
//!
//! This file holds `Pool` itself and its `GlobalAlloc` implementation.

mod arena;
mod config;
mod engine;
mod heap;
mod local;
mod map;
#[doc(hidden)]
pub mod replay;
mod stable;
mod stats;

pub use config::PoolConfig;
pub(crate) use stats::{global_pool, lock_for_fork, reset_in_child, unlock_after_fork};
pub use stats::{pool_stats, ClassStats, PoolStats};

use config::Geometry;
use engine::Engine;
use heap::ArenaSource;
use local::{Heap, MAX_HEAPS};
use stable::Core;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::Ordering;

/// A pymalloc-style allocator: requests up to `max_small` bytes (512 for
/// [`PoolConfig::CPYTHON`]) are served from pools of same-size blocks inside arenas obtained from
/// the inner allocator `A`; larger requests, and requests aligned above `alignment`, pass through
/// to `A`.
///
/// With one thread, a `Pool` behaves exactly as CPython 3.11's `obmalloc.c` (size classes, pool
/// layout, `usedpools`/`freepools`/`usable_arenas` ordering, the rule keeping one wholly free
/// arena, realloc's in-place rule), with every arena pool-aligned so it holds exactly
/// `arena_size / pool_size` pools; its [`stats`](Pool::stats) equal `sys._debugmallocstats()`.
/// Which allocator owns a block is decided by its address, as in CPython: a large block
/// reallocated down to 100 bytes stays with the inner allocator.
///
/// # Threads
/// Each thread allocates from its own heap, a complete pymalloc state with its own arenas, so
/// there is no lock on the allocation path. A block freed by a thread other than its heap's owner
/// is pushed on that heap's lock-free remote list and really freed when the owner next allocates;
/// when the owner has exited, or the block is the shared
/// heap's and no thread holds that heap's lock, it is freed at once, with any blocks still waiting
/// on the list (unless another thread is freeing into or reading that heap at that moment, or a
/// fork is in progress: then it waits on the list too). When a thread exits its heap is adopted by
/// the next thread that needs one; nothing is lost. Blocks pushed while the owner ran and not yet
/// freed when it exits wait until then, or until another block is freed into that heap or
/// [`Pool::stats`] runs. Blocks waiting on a remote list are not counted as in use. With
/// several threads:
/// * every counter is the sum over heaps; `arenas_*` are counted for the whole pool, but each heap
///   keeps its own arenas (and its own one wholly free arena), so more arenas are live than one
///   CPython heap would hold for the same blocks;
/// * statistics read while other threads allocate may be very slightly skewed between fields.
///
/// A replay on one thread uses exactly one heap and matches CPython exactly.
///
/// A thread's heap is its own because nothing else runs on that thread while it allocates: as
/// with `malloc`, a signal handler that allocates while the pool is serving its thread breaks
/// that (allocating in a handler is not async-signal-safe, with any allocator).
///
/// Threads beyond the heap slots (255 per pool) or the thread records (1,024 live threads), and
/// threads whose thread-locals are being torn down, share one fallback heap under a short lock
/// (spinning, then sleeping); a thread that found every heap slot taken looks through them again
/// every 1,024 operations, in case one has become free (one that found every thread record taken
/// keeps the shared heap for its life). `fork()` waits for that lock to be
/// free in every pool, so the child starts with it free; the forking thread keeps its own heap in
/// the child, or takes the shared one. Heaps owned by the parent's other threads are never adopted
/// in the child (one may have been mid-operation): their memory stays reserved there. Heaps of
/// threads that have exited are adopted in the child as in the parent: `fork()` also waits for a
/// thread freeing a block into one of them to finish (a drain and a free), which under heavy
/// cross-thread freeing on a busy machine can add tens of milliseconds to a fork. An inner
/// allocator with `fork()` handlers of its own that take its locks before heapdelta's (registered
/// after heapdelta's first use) could make that wait, or the one for the shared heap's lock,
/// last forever: `System` takes its locks after every handler.
///
/// The inner allocator `A` must not allocate through the global allocator when the `Pool` is the
/// global allocator: it is called with the shared heap's lock held.
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// let pool = heapdelta::Pool::new();
/// let l = Layout::from_size_align(100, 8).unwrap();
/// // SAFETY: the layout has a non-zero size.
/// let p = unsafe { pool.alloc(l) };
/// assert!(!p.is_null());
/// assert_eq!(pool.stats().classes[6].blocks_in_use, 1); // 100 bytes: the 112-byte class
/// // SAFETY: `p` came from this pool with `l`.
/// unsafe { pool.dealloc(p, l) };
/// ```
///
/// As the global allocator (alone or under a `Tracker`):
/// ```
/// #[global_allocator]
/// static GLOBAL: heapdelta::Pool = heapdelta::Pool::new();
/// fn main() {
///     let v = vec![1u8; 100];
///     let stats = heapdelta::pool_stats().expect("the global allocator is a pool");
///     println!("{} bytes reserved", stats.bytes_reserved);
///     assert!(stats.classes[6].blocks_in_use >= 1); // `v`, in the 112-byte class
///     drop(v);
/// }
/// ```
pub struct Pool<A: GlobalAlloc = System> {
    inner: A,
    engine: Engine,
}

impl Pool<System> {
    /// A pool over the system allocator with [`PoolConfig::CPYTHON`]; usable in a `static`.
    ///
    /// ```
    /// static POOL: heapdelta::Pool = heapdelta::Pool::new();
    /// assert_eq!(POOL.stats().arenas_current, 0);
    /// ```
    pub const fn new() -> Self {
        Pool::with_config(System, PoolConfig::CPYTHON)
    }
}

impl Default for Pool<System> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: GlobalAlloc> Pool<A> {
    /// Heap slots per pool: one is the shared fallback heap, the others are threads' own (for
    /// tests that fill them).
    #[doc(hidden)]
    pub const HEAP_SLOTS: usize = MAX_HEAPS;

    /// A pool over `inner` shaped by `config`; usable in a `static`.
    ///
    /// # Panics
    /// If `config` breaks the rules listed at [`PoolConfig`] (at compile time in a `static`).
    ///
    /// ```
    /// use heapdelta::{Pool, PoolConfig};
    /// let legacy = Pool::with_config(std::alloc::System, PoolConfig::CPYTHON_LEGACY);
    /// assert_eq!(legacy.stats().classes.len(), 32);
    /// ```
    pub const fn with_config(inner: A, config: PoolConfig) -> Self {
        Pool {
            inner,
            engine: Engine::new(Geometry::new(config)),
        }
    }

    /// The pool's statistics, with the meaning of CPython's `sys._debugmallocstats()`.
    ///
    /// Blocks freed by other threads are handed back to their heaps first where that can be done
    /// without waiting (the calling thread's own heap, the shared heap, and heaps of exited
    /// threads). Never deadlocks, also when this pool is the global allocator: the counters are
    /// copied out before the result (which allocates) is built.
    ///
    /// ```
    /// let pool = heapdelta::Pool::new();
    /// let s = pool.stats();
    /// assert_eq!(s.classes.len(), 32);
    /// assert_eq!((s.arenas_current, s.bytes_in_use, s.large_blocks), (0, 0, 0));
    /// ```
    pub fn stats(&self) -> PoolStats {
        Engine::raw_stats(self).into_stats()
    }

    /// Walks every heap and checks pymalloc's invariants (list links, `usable_arenas` order,
    /// `nfp2lasta`, free-list bounds, per-pool block accounting, the counters behind
    /// [`stats`](Pool::stats)); returns the addresses of all free-listed blocks in pools in use.
    /// Pending remote frees are applied first. For tests; `&mut self` ensures no thread uses the
    /// pool meanwhile.
    #[doc(hidden)]
    pub fn check_invariants(&mut self) -> Result<Vec<usize>, String> {
        let mut free = Vec::new();
        let Some(core) = self.engine.core() else {
            return Ok(free);
        };
        let src: &dyn ArenaSource = self;
        for i in 0..MAX_HEAPS {
            if let Some(h) = core.heap(i) {
                // SAFETY: `&mut self`: no other thread uses the pool or its heaps.
                unsafe {
                    h.drain(src);
                    (*h.state.get()).check(&self.engine.geo, &h.counters, &mut free)?;
                }
                let waiting = &h.remote.0.waiting;
                if let Some(k) =
                    (0..waiting.len()).find(|&k| waiting[k].load(Ordering::Relaxed) != 0)
                {
                    return Err(format!(
                        "heap {i}: blocks of class {k} counted as waiting after a drain"
                    ));
                }
            }
        }
        Ok(free)
    }
}

// SAFETY: small blocks come from arenas this pool owns exclusively, are aligned to
// `geo.alignment` (pool-aligned arenas, block offsets multiples of the alignment) and are at
// least `layout.size()` bytes (the class size rounds up); a block is handed out once until freed
// (pymalloc invariants, checked by tests/pool_props.rs). Other layouts go to `inner` unchanged.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Pool<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on with this pool's inner allocator.
        unsafe { self.engine.alloc(self, layout) }
    }

    /// Large requests go to the inner allocator's own `alloc_zeroed`, which can hand out fresh
    /// zero pages without touching them (`calloc`); small blocks are zeroed here.
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { self.engine.alloc_zeroed(self, layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as in `alloc`.
        unsafe { self.engine.dealloc(self, ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { self.engine.realloc(self, ptr, layout, new_size) }
    }
}

/// A reference to a pool allocates from that pool. This lets a tracker wrap a pool kept in a
/// static of its own, and that is the cheaper way to track one. A `Pool` holds atomics, so a
/// static containing one is not read-only, and the compiler cannot treat the tracker's settings
/// in `Tracker<Pool>` as constants. `Tracker<&Pool>` holds only a reference and its settings, so
/// they fold away (the README's Cost section has the measured difference).
///
/// ```
/// use heapdelta::{CallSites, Pool, Tracker};
///
/// static POOL: Pool = Pool::new();
/// #[global_allocator]
/// static GLOBAL: Tracker<&Pool> = Tracker::wrap(&POOL).call_sites(CallSites::Off);
///
/// fn main() {
///     let v = vec![0u8; 100];
///     assert!(POOL.stats().bytes_in_use >= 100);
///     drop(v);
/// }
/// ```
// SAFETY: every call is forwarded unchanged to the pool, whose own implementation upholds the
// `GlobalAlloc` contract.
unsafe impl<A: GlobalAlloc> GlobalAlloc for &Pool<A> {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { (**self).alloc(layout) }
    }

    #[inline(always)]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { (**self).alloc_zeroed(layout) }
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { (**self).dealloc(ptr, layout) }
    }

    #[inline(always)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        unsafe { (**self).realloc(ptr, layout, new_size) }
    }
}

impl<A: GlobalAlloc> ArenaSource for Pool<A> {
    #[inline]
    fn engine(&self) -> &Engine {
        &self.engine
    }

    #[inline]
    fn inner(&self) -> &dyn GlobalAlloc {
        &self.inner
    }
}

/// Dropping a pool returns every arena and all metadata to the inner allocator; blocks still
/// in use become invalid, as with any allocator that goes away.
impl<A: GlobalAlloc> Drop for Pool<A> {
    fn drop(&mut self) {
        // The pointer the core was published with, which may free it (one made from the shared
        // reference `Engine::core` gives may only read its plain fields).
        let p = self.engine.core_ptr();
        if p.is_null() {
            return;
        }
        let src: &dyn ArenaSource = self;
        // SAFETY: `p` is our core; `&mut self` means no thread uses the pool.
        let uid = unsafe { (*p).uid };
        stats::unregister(p as usize, uid);
        for i in 0..MAX_HEAPS {
            // SAFETY: as above.
            let h = unsafe { (*p).heaps[i].swap(std::ptr::null_mut(), Ordering::AcqRel) };
            if h.is_null() {
                continue;
            }
            // SAFETY: we own every heap now; each was allocated by `inner` with
            // `Layout::new::<Heap>()` in `create_heap`. `release_all` uses the core (still alive).
            unsafe {
                (*(*h).state.get()).release_all(src);
                self.inner.dealloc(h as *mut u8, Layout::new::<Heap>());
            }
        }
        // SAFETY: nobody else uses the map or the core; the core came from `inner` in `init`.
        unsafe {
            (*p).map.free_all(&self.inner, &self.engine.geo);
            self.inner.dealloc(p as *mut u8, Layout::new::<Core>());
        }
        self.engine.forget_core();
    }
}
