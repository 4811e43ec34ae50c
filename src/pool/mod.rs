//! Pool mode: a pymalloc-style small-object allocator that reproduces CPython 3.11's counters.
//!
//! Table of contents:
//! * [`config`]: `PoolConfig` and the geometry derived from it;
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
use heap::{bump, ArenaSource, HeapState};
use local::{Heap, SpinLock, MAX_HEAPS, OWNER_SHARED};
use stable::Core;
use stats::RawStats;
use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

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
    geo: Geometry,
    /// Set up on first use (from `inner`); never moves, so the `Pool` value itself may move.
    core: AtomicPtr<Core>,
    /// Copy of `core.uid` (0 until set up): the key of the thread-local heap cache.
    uid: AtomicU64,
}

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

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

/// The current thread's access to a heap: exclusive while this value lives.
struct Ctx<'a> {
    heap: &'a Heap,
    lock: Option<&'a SpinLock>,
}

impl Drop for Ctx<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(l) = self.lock {
            l.unlock();
        }
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
            geo: Geometry::new(config),
            core: AtomicPtr::new(ptr::null_mut()),
            uid: AtomicU64::new(0),
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
        self.raw_stats().into_stats()
    }

    /// Walks every heap and checks pymalloc's invariants (list links, `usable_arenas` order,
    /// `nfp2lasta`, free-list bounds, per-pool block accounting, the counters behind
    /// [`stats`](Pool::stats)); returns the addresses of all free-listed blocks in pools in use.
    /// Pending remote frees are applied first. For tests; `&mut self` ensures no thread uses the
    /// pool meanwhile.
    #[doc(hidden)]
    pub fn check_invariants(&mut self) -> Result<Vec<usize>, String> {
        let mut free = Vec::new();
        let Some(core) = self.core() else {
            return Ok(free);
        };
        for i in 0..MAX_HEAPS {
            if let Some(h) = core.heap(i) {
                // SAFETY: `&mut self`: no other thread uses the pool or its heaps.
                unsafe {
                    h.drain(self);
                    (*h.state.get()).check(&self.geo, &h.counters, &mut free)?;
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

    /// The address-stable state, if set up.
    #[inline]
    fn core(&self) -> Option<&Core> {
        // SAFETY: `core` is null or points at a `Core` that lives until the pool is dropped.
        unsafe { self.core.load(Ordering::Acquire).as_ref() }
    }

    /// The pool's unique id, setting the pool up (and registering it) on first use; 0 only when
    /// out of memory.
    #[inline]
    fn uid(&self) -> u64 {
        // Acquire, pairing with `init`'s release: a thread that sees the id also sees the core
        // published before it (a relaxed pair would let a weakly ordered CPU see the id and a
        // null core, and fail the allocation).
        let u = self.uid.load(Ordering::Acquire);
        if u != 0 {
            return u;
        }
        self.init()
    }

    #[cold]
    fn init(&self) -> u64 {
        if self.core().is_none() {
            let layout = Layout::new::<Core>();
            // SAFETY: `Core` is not zero-sized.
            let p = unsafe { self.inner.alloc(layout) } as *mut Core;
            if p.is_null() {
                return 0;
            }
            let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
            // SAFETY: `p` is fresh memory with `Core`'s layout.
            unsafe { p.write(Core::new(uid, self.geo)) };
            // Registered before it is published, so that from its first use on, `fork()` takes
            // its lock (see `stats::register`).
            stats::register(stats::Entry {
                core: p as usize,
                uid,
            });
            let published =
                self.core
                    .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire);
            if published.is_err() {
                stats::unregister(p as usize, uid);
                // SAFETY: `p` was never published and is no longer registered; `Core` needs no
                // drop.
                unsafe { self.inner.dealloc(p as *mut u8, layout) };
            }
        }
        let uid = self.core().map_or(0, |c| c.uid);
        self.uid.store(uid, Ordering::Release);
        uid
    }

    /// Creates the heap of slot `i` owned by `owner`; false if the slot is taken or out of memory.
    fn create_heap(&self, core: &Core, i: usize, owner: u64) -> bool {
        let Some(slot) = core.heaps.get(i) else {
            return false;
        };
        let layout = Layout::new::<Heap>();
        // SAFETY: `Heap` is not zero-sized.
        let p = unsafe { self.inner.alloc(layout) } as *mut Heap;
        if p.is_null() {
            return false;
        }
        // SAFETY: `p` is fresh memory of `Heap`'s layout.
        unsafe { p.write(Heap::new(i as u32, owner)) };
        if slot
            .compare_exchange(ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `p` was never published; `Heap` has no drop glue that matters.
            unsafe { self.inner.dealloc(p as *mut u8, layout) };
            return false;
        }
        true
    }

    /// Exclusive access to a heap for the current thread: its own (lock-free), or the shared one
    /// (under a spin lock) when it has none. `None` only when out of memory.
    #[inline]
    fn ctx(&self) -> Option<Ctx<'_>> {
        let uid = self.uid();
        if uid == 0 {
            return None;
        }
        if let Some(h) = local::cached(uid) {
            // SAFETY: cached heaps belong to pool `uid`, which is `self` (ids are never reused),
            // and live as long as it; the thread owns the heap, so access is exclusive.
            let heap = unsafe { &*h };
            return Some(Ctx { heap, lock: None });
        }
        self.ctx_slow(uid)
    }

    #[cold]
    fn ctx_slow(&self, uid: u64) -> Option<Ctx<'_>> {
        if let Some(h) = local::cached_slow(uid) {
            // SAFETY: as in `ctx`.
            let heap = unsafe { &*h };
            return Some(Ctx { heap, lock: None });
        }
        let core = self.core()?;
        if !local::skip_claim(uid) {
            if let Some(token) = local::token() {
                if let Some(h) = self.claim(core, token) {
                    local::remember(uid, h);
                    return Some(Ctx {
                        heap: h,
                        lock: None,
                    });
                }
                local::note_no_heap(uid);
            }
        }
        // The shared fallback heap.
        core.shared_lock.lock();
        if core.heap(0).is_none() && !self.create_heap(core, 0, OWNER_SHARED) {
            core.shared_lock.unlock();
            return None;
        }
        match core.heap(0) {
            Some(heap) => Some(Ctx {
                heap,
                lock: Some(&core.shared_lock),
            }),
            None => {
                core.shared_lock.unlock();
                None
            }
        }
    }

    /// Finds or claims a heap for the thread with `token`.
    fn claim<'c>(&self, core: &'c Core, token: u64) -> Option<&'c Heap> {
        for i in 1..MAX_HEAPS {
            if let Some(h) = core.heap(i) {
                if h.owner.load(Ordering::Acquire) == token {
                    return Some(h);
                }
            }
        }
        for i in 1..MAX_HEAPS {
            if let Some(h) = core.heap(i) {
                let o = h.owner.load(Ordering::Acquire);
                if local::is_stale(o)
                    && h.owner
                        .compare_exchange(o, token, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                {
                    return Some(h);
                }
            }
        }
        for i in 1..MAX_HEAPS {
            if core.heap(i).is_none() && self.create_heap(core, i, token) {
                return core.heap(i);
            }
        }
        None
    }

    /// Frees `ptr`, a block of another thread's `heap`, at once when no thread uses that heap: its
    /// owner has exited, or it is the shared heap and its lock is free. The blocks waiting on the
    /// heap's remote list are freed too. Otherwise (`false`) the caller pushes the block on that
    /// list: a heap nobody uses keeps them (counted as waiting, not in use) until a thread adopts it.
    ///
    /// # Safety
    /// `ptr` is a block in use in `heap`, a heap of this pool, and the caller gives it up.
    #[cold]
    unsafe fn free_in_idle_heap(&self, core: &Core, heap: &Heap, ptr: *mut u8) -> bool {
        let free = || {
            // SAFETY: the caller holds exclusive access to `heap` (below) and gives `ptr` up.
            unsafe {
                heap.drain(self);
                (*heap.state.get()).free(self, &heap.counters, ptr);
            }
        };
        if heap.index == 0 {
            // Not while a fork waits for the lock (see `SpinLock::lock`): the block can wait.
            if local::FORK_PENDING.load(Ordering::Acquire) || !core.shared_lock.try_lock() {
                return false;
            }
            free();
            core.shared_lock.unlock();
            return true;
        }
        // Holding the heap gives exclusive access, as in `Core::with_idle_heaps`.
        let Some(_held) = local::IdleHeap::take(heap) else {
            return false;
        };
        free();
        true
    }

    /// Counters summed over all heaps, without allocating, after applying the remote frees
    /// that can be applied without waiting.
    fn raw_stats(&self) -> RawStats {
        let Some(core) = self.core() else {
            return RawStats::new(self.geo);
        };
        if let Some(h) = local::cached(core.uid).or_else(|| local::cached_slow(core.uid)) {
            // SAFETY: the cached heap is the current thread's own heap of this pool.
            unsafe { (*h).drain(self) };
        }
        core.drain_idle(self);
        core.counters()
    }

    /// Counts a large block allocated (`d = 1`) or freed (`d = -1`) on the current thread's heap.
    fn count_large(&self, blocks: i64, bytes: i64) {
        if let Some(ctx) = self.ctx() {
            bump(&ctx.heap.counters.large_blocks, blocks as u64);
            bump(&ctx.heap.counters.large_bytes, bytes as u64);
        }
    }

    /// Counts `p`, a block of `layout` the inner allocator just returned (or null), as large.
    #[inline]
    fn counted_large(&self, p: *mut u8, layout: Layout) -> *mut u8 {
        if !p.is_null() {
            self.count_large(1, layout.size() as i64);
        }
        p
    }

    /// `address_in_range`: whether `p` lies in one of this pool's arenas.
    #[inline]
    fn owns(&self, p: *mut u8) -> bool {
        self.core()
            .is_some_and(|c| c.map.contains(&self.geo, p as usize))
    }

    #[inline]
    fn is_small(&self, layout: Layout) -> bool {
        layout.size() <= self.geo.max_small && layout.align() <= self.geo.alignment
    }
}

impl<A: GlobalAlloc> ArenaSource for Pool<A> {
    type Inner = A;

    fn inner(&self) -> &A {
        &self.inner
    }

    fn geo(&self) -> &Geometry {
        &self.geo
    }

    fn arena_alloc(&self) -> *mut u8 {
        let Ok(layout) = Layout::from_size_align(self.geo.arena_size, self.geo.pool_size) else {
            return ptr::null_mut();
        };
        // SAFETY: the layout is non-empty.
        let p = unsafe { self.inner.alloc(layout) };
        if p.is_null() {
            return p;
        }
        let marked = self
            .core()
            .filter(|c| c.map.mark(&self.inner, &self.geo, p as usize, true));
        let Some(core) = marked else {
            // SAFETY: `p` was just allocated with `layout` and never handed out.
            unsafe { self.inner.dealloc(p, layout) };
            return ptr::null_mut();
        };
        // Counted in the total before it is live (see `Core::counters`).
        core.arenas_total.fetch_add(1, Ordering::Release);
        let cur = core
            .arenas_current
            .fetch_add(1, Ordering::Release)
            .wrapping_add(1);
        core.arenas_highwater.fetch_max(cur, Ordering::Relaxed);
        p
    }

    unsafe fn arena_free(&self, base: *mut u8) {
        if let Some(core) = self.core() {
            core.map.mark(&self.inner, &self.geo, base as usize, false);
            core.arenas_current.fetch_sub(1, Ordering::Relaxed);
        }
        if let Ok(layout) = Layout::from_size_align(self.geo.arena_size, self.geo.pool_size) {
            // SAFETY: `base` came from `arena_alloc` with this layout (caller).
            unsafe { self.inner.dealloc(base, layout) };
        }
    }
}

// SAFETY: small blocks come from arenas this pool owns exclusively, are aligned to
// `geo.alignment` (pool-aligned arenas, block offsets multiples of the alignment) and are at
// least `layout.size()` bytes (the class size rounds up); a block is handed out once until freed
// (pymalloc invariants, checked by tests/pool_props.rs). Other layouts go to `inner` unchanged.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Pool<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !self.is_small(layout) {
            // SAFETY: same contract as ours.
            return self.counted_large(unsafe { self.inner.alloc(layout) }, layout);
        }
        let idx = self.geo.class_of(layout.size());
        let Some(ctx) = self.ctx() else {
            return ptr::null_mut();
        };
        // SAFETY: `ctx` gives this thread exclusive access to the heap; `idx < nclasses` because
        // `size <= max_small`.
        unsafe {
            ctx.heap.drain(self);
            (*ctx.heap.state.get()).alloc(self, &ctx.heap.counters, idx)
        }
    }

    /// Large requests go to the inner allocator's own `alloc_zeroed`, which can hand out fresh
    /// zero pages without touching them (`calloc`); small blocks are zeroed here.
    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !self.is_small(layout) {
            // SAFETY: same contract as ours.
            return self.counted_large(unsafe { self.inner.alloc_zeroed(layout) }, layout);
        }
        // SAFETY: same contract as ours.
        let p = unsafe { self.alloc(layout) };
        if !p.is_null() {
            // SAFETY: `alloc` returned a block of at least `layout.size()` writable bytes.
            unsafe { ptr::write_bytes(p, 0, layout.size()) };
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.owns(ptr) {
            // SAFETY: not in our arenas, so it came from `inner` with this layout.
            unsafe { self.inner.dealloc(ptr, layout) };
            self.count_large(-1, -(layout.size() as i64));
            return;
        }
        // SAFETY: `ptr` is a block in use in one of our pools (caller contract + address).
        let owner = unsafe { HeapState::block_heap(&self.geo, ptr) };
        if let Some(ctx) = self.ctx() {
            if ctx.heap.index == owner {
                // SAFETY: exclusive access through `ctx`; the block belongs to this heap.
                unsafe { (*ctx.heap.state.get()).free(self, &ctx.heap.counters, ptr) };
                return;
            }
        }
        let Some(core) = self.core() else {
            return;
        };
        let Some(heap) = core.heap(owner as usize) else {
            return;
        };
        // SAFETY: the block is in use in `heap`, given up by the caller.
        if unsafe { self.free_in_idle_heap(core, heap, ptr) } {
            return;
        }
        // SAFETY: the block is in use in a live pool, at least 8 bytes and 8-aligned; we give it
        // up.
        unsafe { heap.push_remote(ptr, HeapState::block_class(&self.geo, ptr)) };
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.owns(ptr) {
            // A block of the inner allocator stays there, even when it shrinks (CPython's rule).
            // SAFETY: same contract as ours; the block came from `inner` with `layout`.
            let p = unsafe { self.inner.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                self.count_large(0, new_size as i64 - layout.size() as i64);
            }
            return p;
        }
        // SAFETY: `ptr` is a block in use in one of our pools.
        let size = self
            .geo
            .class_size(unsafe { HeapState::block_class(&self.geo, ptr) });
        if new_size <= size && 4 * new_size > 3 * size {
            return ptr;
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return ptr::null_mut();
        };
        // SAFETY: `new_layout` is non-zero-sized when `new_size` is (the caller's contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least `min(old, new)` bytes and are distinct.
            unsafe {
                ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        new
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

/// Dropping a pool returns every arena and all metadata to the inner allocator; blocks still
/// in use become invalid, as with any allocator that goes away.
impl<A: GlobalAlloc> Drop for Pool<A> {
    fn drop(&mut self) {
        let p = *self.core.get_mut();
        if p.is_null() {
            return;
        }
        // SAFETY: `p` is our core; `&mut self` means no thread uses the pool.
        let uid = unsafe { (*p).uid };
        stats::unregister(p as usize, uid);
        for i in 0..MAX_HEAPS {
            // SAFETY: as above.
            let h = unsafe { (*p).heaps[i].swap(ptr::null_mut(), Ordering::AcqRel) };
            if h.is_null() {
                continue;
            }
            // SAFETY: we own every heap now; each was allocated by `inner` with
            // `Layout::new::<Heap>()` in `create_heap`. `release_all` uses the core (still alive).
            unsafe {
                (*(*h).state.get()).release_all(&*self);
                self.inner.dealloc(h as *mut u8, Layout::new::<Heap>());
            }
        }
        // SAFETY: nobody else uses the map or the core; the core came from `inner` in `init`.
        unsafe {
            (*p).map.free_all(&self.inner, &self.geo);
            self.inner.dealloc(p as *mut u8, Layout::new::<Core>());
        }
        *self.core.get_mut() = ptr::null_mut();
    }
}
