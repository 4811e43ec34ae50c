//! What a pool does, apart from the type of its inner allocator: set-up, which heap a thread
//! uses, the block paths and the pass-through of large blocks. `Pool<A>` holds an `Engine` and
//! its `A`, and hands the engine itself as `&dyn ArenaSource` (the engine and the inner
//! allocator, as `&dyn GlobalAlloc`). Every method taking `src` requires that `src` is the pool
//! holding this engine (`src.engine()` is `self`), as `Pool` always passes it.
//!
//! Not generic, so compiled in this crate: a debug build of a program that optimizes heapdelta
//! (`[profile.dev.package.heapdelta] opt-level = 3`) runs the pool's paths optimized. A generic
//! function, or one marked `#[inline]`, is compiled in the crate that calls it, at that crate's
//! level; so the entry points are inlined only when debug assertions are off (release builds).
//! Inlined into `Pool<A>`, the calls through `src` become calls of `A` itself; the functions
//! kept out of line (a new arena or pool, the set-up, a thread's first heap) make them through
//! the table.

use super::config::Geometry;
use super::heap::{bump, ArenaSource, HeapState};
use super::local::{self, Heap, SpinLock, MAX_HEAPS, OWNER_SHARED};
use super::stable::Core;
use super::stats::{self, RawStats};
use std::alloc::Layout;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

/// A pool without its inner allocator.
pub(crate) struct Engine {
    pub geo: Geometry,
    /// Set up on first use (from the inner allocator); never moves, so the `Pool` value itself
    /// may move.
    core: AtomicPtr<Core>,
    /// Copy of `core.uid` (0 until set up): the key of the thread-local heap cache.
    uid: AtomicU64,
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

impl Engine {
    pub const fn new(geo: Geometry) -> Engine {
        Engine {
            geo,
            core: AtomicPtr::new(ptr::null_mut()),
            uid: AtomicU64::new(0),
        }
    }

    /// `GlobalAlloc::alloc` of the pool `src`.
    ///
    /// # Safety
    /// `GlobalAlloc::alloc`'s contract; `src` is the pool holding this engine.
    #[cfg_attr(not(debug_assertions), inline)]
    pub unsafe fn alloc(&self, src: &dyn ArenaSource, layout: Layout) -> *mut u8 {
        if !self.is_small(layout) {
            // SAFETY: same contract as ours.
            return self.counted_large(src, unsafe { src.inner().alloc(layout) }, layout);
        }
        let idx = self.geo.class_of(layout.size());
        let Some(ctx) = self.ctx(src) else {
            return ptr::null_mut();
        };
        // SAFETY: `ctx` gives this thread exclusive access to the heap; `idx < nclasses` because
        // `size <= max_small`.
        unsafe {
            ctx.heap.drain(src);
            (*ctx.heap.state.get()).alloc(src, &ctx.heap.counters, idx)
        }
    }

    /// `GlobalAlloc::alloc_zeroed` of the pool `src`: large requests go to the inner
    /// allocator's own `alloc_zeroed`, which can hand out fresh zero pages without touching them
    /// (`calloc`); small blocks are zeroed here.
    ///
    /// # Safety
    /// As for [`Engine::alloc`].
    #[cfg_attr(not(debug_assertions), inline)]
    pub unsafe fn alloc_zeroed(&self, src: &dyn ArenaSource, layout: Layout) -> *mut u8 {
        if !self.is_small(layout) {
            // SAFETY: same contract as ours.
            return self.counted_large(src, unsafe { src.inner().alloc_zeroed(layout) }, layout);
        }
        // SAFETY: same contract as ours.
        let p = unsafe { self.alloc(src, layout) };
        if !p.is_null() {
            // SAFETY: `alloc` returned a block of at least `layout.size()` writable bytes.
            unsafe { ptr::write_bytes(p, 0, layout.size()) };
        }
        p
    }

    /// `GlobalAlloc::dealloc` of the pool `src`.
    ///
    /// # Safety
    /// As for [`Engine::alloc`].
    #[cfg_attr(not(debug_assertions), inline)]
    pub unsafe fn dealloc(&self, src: &dyn ArenaSource, ptr: *mut u8, layout: Layout) {
        if !self.owns(ptr) {
            // SAFETY: not in our arenas, so it came from `inner` with this layout.
            unsafe { src.inner().dealloc(ptr, layout) };
            self.count_large(src, -1, -(layout.size() as i64));
            return;
        }
        // SAFETY: `ptr` is a block in use in one of our pools (caller contract + address).
        let owner = unsafe { HeapState::block_heap(&self.geo, ptr) };
        if let Some(ctx) = self.ctx(src) {
            if ctx.heap.index == owner {
                // SAFETY: exclusive access through `ctx`; the block belongs to this heap.
                unsafe { (*ctx.heap.state.get()).free(src, &ctx.heap.counters, ptr) };
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
        if unsafe { free_in_idle_heap(src, core, heap, ptr) } {
            return;
        }
        // SAFETY: the block is in use in a live pool, at least 8 bytes and 8-aligned; we give it
        // up.
        unsafe { heap.push_remote(ptr, HeapState::block_class(&self.geo, ptr)) };
    }

    /// `GlobalAlloc::realloc` of the pool `src`.
    ///
    /// # Safety
    /// As for [`Engine::alloc`].
    #[cfg_attr(not(debug_assertions), inline)]
    pub unsafe fn realloc(
        &self,
        src: &dyn ArenaSource,
        ptr: *mut u8,
        layout: Layout,
        new_size: usize,
    ) -> *mut u8 {
        if !self.owns(ptr) {
            // A block of the inner allocator stays there, even when it shrinks (CPython's rule).
            // SAFETY: same contract as ours; the block came from `inner` with `layout`.
            let p = unsafe { src.inner().realloc(ptr, layout, new_size) };
            if !p.is_null() {
                self.count_large(src, 0, new_size as i64 - layout.size() as i64);
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
        let new = unsafe { self.alloc(src, new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least `min(old, new)` bytes and are distinct.
            unsafe {
                ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(src, ptr, layout);
            }
        }
        new
    }

    /// The address-stable state, if set up.
    #[inline]
    pub fn core(&self) -> Option<&Core> {
        // SAFETY: `core` is null or points at a `Core` that lives until the pool is dropped.
        unsafe { self.core.load(Ordering::Acquire).as_ref() }
    }

    /// The core's pointer as published (null until set up), for the pool being dropped to free.
    pub fn core_ptr(&mut self) -> *mut Core {
        *self.core.get_mut()
    }

    /// Forgets the core, which the pool being dropped has freed.
    pub fn forget_core(&mut self) {
        *self.core.get_mut() = ptr::null_mut();
    }

    /// The pool's unique id, setting the pool up (and registering it) on first use; 0 only when
    /// out of memory.
    #[inline]
    fn uid(&self, src: &dyn ArenaSource) -> u64 {
        // Acquire, pairing with `init`'s release: a thread that sees the id also sees the core
        // published before it (a relaxed pair would let a weakly ordered CPU see the id and a
        // null core, and fail the allocation).
        let u = self.uid.load(Ordering::Acquire);
        if u != 0 {
            return u;
        }
        self.init(src)
    }

    #[cold]
    fn init(&self, src: &dyn ArenaSource) -> u64 {
        if self.core().is_none() {
            let layout = Layout::new::<Core>();
            // SAFETY: `Core` is not zero-sized.
            let p = unsafe { src.inner().alloc(layout) } as *mut Core;
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
                unsafe { src.inner().dealloc(p as *mut u8, layout) };
            }
        }
        let uid = self.core().map_or(0, |c| c.uid);
        self.uid.store(uid, Ordering::Release);
        uid
    }

    /// Creates the heap of slot `i` owned by `owner`; false if the slot is taken or out of memory.
    fn create_heap(&self, src: &dyn ArenaSource, core: &Core, i: usize, owner: u64) -> bool {
        let Some(slot) = core.heaps.get(i) else {
            return false;
        };
        let layout = Layout::new::<Heap>();
        // SAFETY: `Heap` is not zero-sized.
        let p = unsafe { src.inner().alloc(layout) } as *mut Heap;
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
            unsafe { src.inner().dealloc(p as *mut u8, layout) };
            return false;
        }
        true
    }

    /// Exclusive access to a heap for the current thread: its own (lock-free), or the shared one
    /// (under a spin lock) when it has none. `None` only when out of memory.
    #[inline]
    fn ctx(&self, src: &dyn ArenaSource) -> Option<Ctx<'_>> {
        let uid = self.uid(src);
        if uid == 0 {
            return None;
        }
        if let Some(h) = local::cached(uid) {
            // SAFETY: cached heaps belong to pool `uid`, which is `self` (ids are never reused),
            // and live as long as it; the thread owns the heap, so access is exclusive.
            let heap = unsafe { &*h };
            return Some(Ctx { heap, lock: None });
        }
        self.ctx_slow(src, uid)
    }

    #[cold]
    fn ctx_slow(&self, src: &dyn ArenaSource, uid: u64) -> Option<Ctx<'_>> {
        if let Some(h) = local::cached_slow(uid) {
            // SAFETY: as in `ctx`.
            let heap = unsafe { &*h };
            return Some(Ctx { heap, lock: None });
        }
        let core = self.core()?;
        if !local::skip_claim(uid) {
            if let Some(token) = local::token() {
                if let Some(h) = self.claim(src, core, token) {
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
        if core.heap(0).is_none() && !self.create_heap(src, core, 0, OWNER_SHARED) {
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
    fn claim<'c>(&self, src: &dyn ArenaSource, core: &'c Core, token: u64) -> Option<&'c Heap> {
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
            if core.heap(i).is_none() && self.create_heap(src, core, i, token) {
                return core.heap(i);
            }
        }
        None
    }

    /// Counters summed over all heaps, without allocating, after applying the remote frees
    /// that can be applied without waiting.
    pub fn raw_stats(src: &dyn ArenaSource) -> RawStats {
        let engine = src.engine();
        let Some(core) = engine.core() else {
            return RawStats::new(engine.geo);
        };
        if let Some(h) = local::cached(core.uid).or_else(|| local::cached_slow(core.uid)) {
            // SAFETY: the cached heap is the current thread's own heap of this pool.
            unsafe { (*h).drain(src) };
        }
        core.drain_idle(src);
        core.counters()
    }

    /// Counts a large block allocated (`d = 1`) or freed (`d = -1`) on the current thread's heap.
    fn count_large(&self, src: &dyn ArenaSource, blocks: i64, bytes: i64) {
        if let Some(ctx) = self.ctx(src) {
            bump(&ctx.heap.counters.large_blocks, blocks as u64);
            bump(&ctx.heap.counters.large_bytes, bytes as u64);
        }
    }

    /// Counts `p`, a block of `layout` the inner allocator just returned (or null), as large.
    #[inline]
    fn counted_large(&self, src: &dyn ArenaSource, p: *mut u8, layout: Layout) -> *mut u8 {
        if !p.is_null() {
            self.count_large(src, 1, layout.size() as i64);
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

/// Frees `ptr`, a block of another thread's `heap`, at once when no thread uses that heap: its
/// owner has exited, or it is the shared heap and its lock is free. The blocks waiting on the
/// heap's remote list are freed too. Otherwise (`false`) the caller pushes the block on that
/// list: a heap nobody uses keeps them (counted as waiting, not in use) until a thread adopts it.
///
/// # Safety
/// `ptr` is a block in use in `heap`, a heap of `src`'s pool, and the caller gives it up.
#[cold]
unsafe fn free_in_idle_heap(src: &dyn ArenaSource, core: &Core, heap: &Heap, ptr: *mut u8) -> bool {
    let free = || {
        // SAFETY: the caller holds exclusive access to `heap` (below) and gives `ptr` up.
        unsafe {
            heap.drain(src);
            (*heap.state.get()).free(src, &heap.counters, ptr);
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

impl dyn ArenaSource + '_ {
    /// A new pool-aligned arena, already marked in the arena map and counted; null on failure.
    pub fn arena_alloc(&self) -> *mut u8 {
        let geo = self.geo();
        let Ok(layout) = Layout::from_size_align(geo.arena_size, geo.pool_size) else {
            return ptr::null_mut();
        };
        // SAFETY: the layout is non-empty.
        let p = unsafe { self.inner().alloc(layout) };
        if p.is_null() {
            return p;
        }
        let marked = self
            .engine()
            .core()
            .filter(|c| c.map.mark(self.inner(), geo, p as usize, true));
        let Some(core) = marked else {
            // SAFETY: `p` was just allocated with `layout` and never handed out.
            unsafe { self.inner().dealloc(p, layout) };
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

    /// Unmarks, uncounts and frees an arena from `arena_alloc`.
    ///
    /// # Safety
    /// `base` came from `arena_alloc` and no block in it is in use.
    pub unsafe fn arena_free(&self, base: *mut u8) {
        let geo = self.geo();
        if let Some(core) = self.engine().core() {
            core.map.mark(self.inner(), geo, base as usize, false);
            core.arenas_current.fetch_sub(1, Ordering::Relaxed);
        }
        if let Ok(layout) = Layout::from_size_align(geo.arena_size, geo.pool_size) {
            // SAFETY: `base` came from `arena_alloc` with this layout (caller).
            unsafe { self.inner().dealloc(base, layout) };
        }
    }
}
