//! One complete pymalloc state (obmalloc.c 3.11): `usedpools`, `usable_arenas` sorted by
//! `nfreepools` with `nfp2lasta`, per-arena `freepools`, bump allocation inside a pool and LIFO
//! free lists. Single-threaded: only the thread that owns the heap calls these methods. The
//! counters it keeps for `sys._debugmallocstats()`-style statistics are atomics written only by
//! that owner, so any thread may read them.

use super::arena::{ArenaObj, ArenaTable, NONE};
use super::config::{Geometry, MAX_CLASSES, NFP_LEN};
use super::engine::Engine;
use std::alloc::GlobalAlloc;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// `struct pool_header`, at the start of every pool (48 bytes on 64-bit, as in CPython).
#[repr(C)]
pub(crate) struct PoolHeader {
    /// Blocks handed out (`ref.count`).
    pub count: u32,
    /// Size class, or `DUMMY_SIZE_IDX` for a freshly carved pool.
    pub szidx: u32,
    /// Head of the free list.
    pub freeblock: *mut u8,
    pub nextpool: *mut PoolHeader,
    pub prevpool: *mut PoolHeader,
    /// Index of the arena descriptor in the owning heap's table.
    pub arenaindex: u32,
    /// Index of the owning heap in the pool's heap slots; set when the pool is carved.
    pub heap: u32,
    /// Offset of the next never-touched block.
    pub nextoffset: u32,
    /// Largest valid `nextoffset`.
    pub maxnextoffset: u32,
}

const DUMMY_SIZE_IDX: u32 = 0xffff;

/// Statistics counters of one heap. Written by the owner only (plain load + store), read by anyone.
pub(crate) struct Counters {
    /// Blocks in use per class.
    pub blocks: [AtomicU64; MAX_CLASSES],
    /// Pools holding at least one block, per class.
    pub pools: [AtomicU64; MAX_CLASSES],
    /// Σ `nfreepools` over this heap's live arenas.
    pub unused_pools: AtomicU64,
    /// Large blocks allocated minus freed through this heap (wrapping: frees may happen on a
    /// thread other than the allocating one; only the sum over heaps is meaningful).
    pub large_blocks: AtomicU64,
    /// Same for their bytes.
    pub large_bytes: AtomicU64,
}

/// Adds `d` (wrapping) to a counter only the current thread writes.
#[inline]
pub(crate) fn bump(a: &AtomicU64, d: u64) {
    a.store(a.load(Relaxed).wrapping_add(d), Relaxed);
}

impl Counters {
    pub const fn new() -> Counters {
        Counters {
            blocks: [const { AtomicU64::new(0) }; MAX_CLASSES],
            pools: [const { AtomicU64::new(0) }; MAX_CLASSES],
            unused_pools: AtomicU64::new(0),
            large_blocks: AtomicU64::new(0),
            large_bytes: AtomicU64::new(0),
        }
    }
}

/// Where a heap's arenas and metadata come from: its pool, as a trait object, so that the heap
/// code is not generic over the pool's inner allocator. A reference to it is two words, passed in
/// registers (`engine` says where its calls fold into calls of the inner allocator).
pub(crate) trait ArenaSource {
    fn engine(&self) -> &Engine;
    /// The allocator for arenas and metadata (the arena descriptor table).
    fn inner(&self) -> &dyn GlobalAlloc;
}

impl dyn ArenaSource + '_ {
    #[inline]
    pub fn geo(&self) -> &Geometry {
        &self.engine().geo
    }
}

/// The pymalloc state machine of one heap.
pub(crate) struct HeapState {
    /// Per class, the head of a doubly linked, null-terminated list of partly used pools.
    usedpools: [*mut PoolHeader; MAX_CLASSES],
    arenas: ArenaTable,
    unused_arena_objects: u32,
    usable_arenas: u32,
    nfp2lasta: [u32; NFP_LEN],
    /// This heap's slot index, written into every pool it carves.
    index: u32,
}

#[inline]
fn cls(i: usize) -> usize {
    i & (MAX_CLASSES - 1)
}

#[inline]
fn nfp(n: u32) -> usize {
    n as usize & (NFP_LEN - 1)
}

impl HeapState {
    pub const fn new(index: u32) -> HeapState {
        HeapState {
            usedpools: [ptr::null_mut(); MAX_CLASSES],
            arenas: ArenaTable::new(),
            unused_arena_objects: NONE,
            usable_arenas: NONE,
            nfp2lasta: [NONE; NFP_LEN],
            index,
        }
    }

    #[inline]
    fn ao(&self, i: u32) -> *mut ArenaObj {
        self.arenas.get(i)
    }

    /// `pymalloc_alloc`: a block of class `idx`, or null when out of memory.
    ///
    /// # Safety
    /// Owner thread only; `idx < geo.nclasses`.
    #[inline]
    pub unsafe fn alloc(&mut self, src: &dyn ArenaSource, c: &Counters, idx: usize) -> *mut u8 {
        let pool = self.usedpools[cls(idx)];
        let bp;
        if !pool.is_null() {
            // SAFETY: a pool on `usedpools` is a live pool header of this heap with at least one
            // block on its free list (full pools are unlinked).
            unsafe {
                (*pool).count = (*pool).count.wrapping_add(1);
                bp = (*pool).freeblock;
                let next = *(bp as *mut *mut u8);
                (*pool).freeblock = next;
                if next.is_null() {
                    self.pool_extend(src.geo(), pool, idx);
                }
            }
        } else {
            // SAFETY: owner thread, as required of our caller.
            bp = unsafe { self.allocate_from_new_pool(src, c, idx) };
            if bp.is_null() {
                return bp;
            }
        }
        bump(&c.blocks[cls(idx)], 1);
        bp
    }

    /// `pymalloc_pool_extend`: bump-allocate an untouched block onto the free list, or unlink the
    /// now full pool.
    ///
    /// # Safety
    /// `pool` is the head of `usedpools[idx]` and its free list is empty.
    #[inline]
    unsafe fn pool_extend(&mut self, geo: &Geometry, pool: *mut PoolHeader, idx: usize) {
        // SAFETY: `pool` is a live pool header (caller); offsets stay inside the pool.
        unsafe {
            if (*pool).nextoffset <= (*pool).maxnextoffset {
                let fb = (pool as *mut u8).add((*pool).nextoffset as usize);
                (*pool).freeblock = fb;
                (*pool).nextoffset = (*pool).nextoffset.wrapping_add(geo.class_size(idx) as u32);
                *(fb as *mut *mut u8) = ptr::null_mut();
                return;
            }
            // Full: unlink (it is the head of the list).
            let next = (*pool).nextpool;
            self.usedpools[cls(idx)] = next;
            if !next.is_null() {
                (*next).prevpool = ptr::null_mut();
            }
        }
    }

    /// `new_arena`: a descriptor with a fresh arena, or `NONE`.
    fn new_arena(&mut self, src: &dyn ArenaSource, c: &Counters) -> u32 {
        if self.unused_arena_objects == NONE {
            // `usable_arenas` is empty, as in CPython, so no descriptor is on a list.
            self.unused_arena_objects = self.arenas.grow(src.inner());
            if self.unused_arena_objects == NONE {
                return NONE;
            }
        }
        let i = self.unused_arena_objects;
        let ao = self.ao(i);
        if ao.is_null() {
            return NONE;
        }
        let base = src.arena_alloc();
        if base.is_null() {
            return NONE;
        }
        let pools = src.geo().pools_per_arena;
        // SAFETY: `ao` points at descriptor `i` of our table.
        unsafe {
            self.unused_arena_objects = (*ao).nextarena;
            (*ao).address = base as usize;
            (*ao).pool_address = base as usize;
            (*ao).nfreepools = pools;
            (*ao).ntotalpools = pools;
            (*ao).freepools = ptr::null_mut();
        }
        bump(&c.unused_pools, pools as u64);
        i
    }

    /// `allocate_from_new_pool` (kept out of line: the fast path is `alloc`).
    ///
    /// # Safety
    /// Owner thread only; `idx < nclasses`; `usedpools[idx]` is empty.
    #[inline(never)]
    unsafe fn allocate_from_new_pool(
        &mut self,
        src: &dyn ArenaSource,
        c: &Counters,
        idx: usize,
    ) -> *mut u8 {
        let geo = *src.geo();
        if self.usable_arenas == NONE {
            let a = self.new_arena(src, c);
            if a == NONE {
                return ptr::null_mut();
            }
            self.usable_arenas = a;
            let ao = self.ao(a);
            // SAFETY: `a` is a valid descriptor index just set up by `new_arena`.
            unsafe {
                (*ao).nextarena = NONE;
                (*ao).prevarena = NONE;
                self.nfp2lasta[nfp((*ao).nfreepools)] = a;
            }
        }
        let ua = self.usable_arenas;
        let ao = self.ao(ua);
        if ao.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: `ao` is the head of `usable_arenas`, a live descriptor with a live arena and at
        // least one free pool; pool headers written below lie inside that arena.
        unsafe {
            let nf = (*ao).nfreepools;
            if self.nfp2lasta[nfp(nf)] == ua {
                self.nfp2lasta[nfp(nf)] = NONE;
            }
            if nf > 1 {
                self.nfp2lasta[nfp(nf.wrapping_sub(1))] = ua;
            }
            let mut pool = (*ao).freepools;
            if !pool.is_null() {
                (*ao).freepools = (*pool).nextpool;
            } else {
                pool = (*ao).pool_address as *mut PoolHeader;
                (*pool).arenaindex = ua;
                (*pool).heap = self.index;
                (*pool).szidx = DUMMY_SIZE_IDX;
                (*ao).pool_address = (*ao).pool_address.wrapping_add(geo.pool_size);
            }
            (*ao).nfreepools = nf.wrapping_sub(1);
            bump(&c.unused_pools, u64::MAX);
            if nf <= 1 {
                self.usable_arenas = (*ao).nextarena;
                let na = self.ao(self.usable_arenas);
                if !na.is_null() {
                    (*na).prevarena = NONE;
                }
            }
            // Front-link to the (empty) used list.
            (*pool).nextpool = ptr::null_mut();
            (*pool).prevpool = ptr::null_mut();
            self.usedpools[cls(idx)] = pool;
            (*pool).count = 1;
            bump(&c.pools[cls(idx)], 1);
            if (*pool).szidx == idx as u32 {
                // An emptied pool of the same class: at least two blocks are on its free list.
                let bp = (*pool).freeblock;
                (*pool).freeblock = *(bp as *mut *mut u8);
                return bp;
            }
            let size = geo.class_size(idx);
            (*pool).szidx = idx as u32;
            let bp = (pool as *mut u8).add(geo.overhead);
            (*pool).nextoffset = (geo.overhead + 2 * size) as u32;
            (*pool).maxnextoffset = (geo.pool_size - size) as u32;
            let fb = bp.add(size);
            (*pool).freeblock = fb;
            *(fb as *mut *mut u8) = ptr::null_mut();
            bp
        }
    }

    /// `pymalloc_free` for a block `p` in a pool of this heap.
    ///
    /// # Safety
    /// Owner thread only; `p` is a block in use handed out by this heap.
    #[inline]
    pub unsafe fn free(&mut self, src: &dyn ArenaSource, c: &Counters, p: *mut u8) {
        let pool = (p as usize & !(src.geo().pool_size - 1)) as *mut PoolHeader;
        // SAFETY: `p` is in a live pool of this heap (caller), so `pool` is its header.
        unsafe {
            let lastfree = (*pool).freeblock;
            *(p as *mut *mut u8) = lastfree;
            (*pool).freeblock = p;
            (*pool).count = (*pool).count.wrapping_sub(1);
            let idx = (*pool).szidx as usize;
            bump(&c.blocks[cls(idx)], u64::MAX);
            if lastfree.is_null() {
                // The pool was full: link it at the front of usedpools (insert_to_usedpool).
                let head = self.usedpools[cls(idx)];
                (*pool).nextpool = head;
                (*pool).prevpool = ptr::null_mut();
                if !head.is_null() {
                    (*head).prevpool = pool;
                }
                self.usedpools[cls(idx)] = pool;
                if (*pool).count != 0 {
                    return;
                }
                // A one-block pool cannot occur (geometry requires two blocks), but stay sound.
            } else if (*pool).count != 0 {
                return;
            }
            bump(&c.pools[cls(idx)], u64::MAX);
            self.insert_to_freepool(src, c, pool, idx);
        }
    }

    /// Unlinks the now empty `pool` from `usedpools` and files it with its arena (§6).
    ///
    /// # Safety
    /// `pool` is an empty pool of this heap on `usedpools[idx]`.
    #[inline(never)]
    unsafe fn insert_to_freepool(
        &mut self,
        src: &dyn ArenaSource,
        c: &Counters,
        pool: *mut PoolHeader,
        idx: usize,
    ) {
        // SAFETY: all pointers and indices below are live pool headers / descriptors of this heap.
        unsafe {
            let next = (*pool).nextpool;
            let prev = (*pool).prevpool;
            if prev.is_null() {
                self.usedpools[cls(idx)] = next;
            } else {
                (*prev).nextpool = next;
            }
            if !next.is_null() {
                (*next).prevpool = prev;
            }
            let ai = (*pool).arenaindex;
            let ao = self.ao(ai);
            if ao.is_null() {
                return;
            }
            (*pool).nextpool = (*ao).freepools;
            (*ao).freepools = pool;
            let nf = (*ao).nfreepools;
            let lastnf = self.nfp2lasta[nfp(nf)];
            if lastnf == ai {
                let p = (*ao).prevarena;
                let pa = self.ao(p);
                self.nfp2lasta[nfp(nf)] = if !pa.is_null() && (*pa).nfreepools == nf {
                    p
                } else {
                    NONE
                };
            }
            let nf = nf.wrapping_add(1);
            (*ao).nfreepools = nf;
            bump(&c.unused_pools, 1);

            if nf == (*ao).ntotalpools && (*ao).nextarena != NONE && src.geo().release {
                // Case 1: free the arena (the last wholly free one in the list is kept).
                let (pv, nx) = ((*ao).prevarena, (*ao).nextarena);
                if pv == NONE {
                    self.usable_arenas = nx;
                } else {
                    (*self.ao(pv)).nextarena = nx;
                }
                let na = self.ao(nx);
                if !na.is_null() {
                    (*na).prevarena = pv;
                }
                (*ao).nextarena = self.unused_arena_objects;
                self.unused_arena_objects = ai;
                let base = (*ao).address as *mut u8;
                (*ao).address = 0;
                bump(&c.unused_pools, (nf as u64).wrapping_neg());
                src.arena_free(base);
                return;
            }
            if nf == 1 {
                // Case 2: the arena was full and on no list: push it at the head.
                (*ao).nextarena = self.usable_arenas;
                (*ao).prevarena = NONE;
                let ua = self.ao(self.usable_arenas);
                if !ua.is_null() {
                    (*ua).prevarena = ai;
                }
                self.usable_arenas = ai;
                if self.nfp2lasta[1] == NONE {
                    self.nfp2lasta[1] = ai;
                }
                return;
            }
            if self.nfp2lasta[nfp(nf)] == NONE {
                self.nfp2lasta[nfp(nf)] = ai;
            }
            if ai == lastnf {
                // Case 4: still in order.
                return;
            }
            let last = self.ao(lastnf);
            if last.is_null() || (*ao).nextarena == NONE {
                return;
            }
            // Case 3: move `ao` to just after `lastnf`.
            let (pv, nx) = ((*ao).prevarena, (*ao).nextarena);
            if pv != NONE {
                (*self.ao(pv)).nextarena = nx;
            } else {
                self.usable_arenas = nx;
            }
            (*self.ao(nx)).prevarena = pv;
            (*ao).prevarena = lastnf;
            (*ao).nextarena = (*last).nextarena;
            let an = self.ao((*ao).nextarena);
            if !an.is_null() {
                (*an).prevarena = ai;
            }
            (*last).nextarena = ai;
        }
    }

    /// The block size of the pool block `p` (its class size).
    ///
    /// # Safety
    /// `p` is a block in use in a live pool.
    #[inline]
    pub unsafe fn block_class(geo: &Geometry, p: *mut u8) -> usize {
        let pool = (p as usize & !(geo.pool_size - 1)) as *const PoolHeader;
        // SAFETY: `pool` is the header of the live pool holding `p` (caller); `szidx` does not
        // change while a block of the pool is in use.
        unsafe { (*pool).szidx as usize }
    }

    /// The heap slot owning the pool block `p`.
    ///
    /// # Safety
    /// `p` is a block in use in a live pool.
    #[inline]
    pub unsafe fn block_heap(geo: &Geometry, p: *mut u8) -> u32 {
        let pool = (p as usize & !(geo.pool_size - 1)) as *const PoolHeader;
        // SAFETY: as in `block_class`; `heap` is written only when the pool is carved (again if
        // its arena's memory is released and reused), while none of its blocks is in use.
        unsafe { (*pool).heap }
    }

    /// Checks the heap's structural invariants and its counters; pushes the address of every
    /// free-listed block of a pool in use on `free`. For tests (`Pool::check_invariants`).
    ///
    /// # Safety
    /// Nobody else uses the heap meanwhile.
    pub unsafe fn check(
        &self,
        geo: &Geometry,
        c: &Counters,
        free: &mut Vec<usize>,
    ) -> Result<(), String> {
        let mut blocks = [0u64; MAX_CLASSES];
        let mut pools = [0u64; MAX_CLASSES];
        let mut unused = 0u64;
        let mut in_used_lists = 0usize;
        // SAFETY: (all blocks below) exclusive access (caller); we only follow pointers that the
        // invariants being checked keep inside live arenas, and stop at the first violation.
        unsafe {
            for idx in 0..geo.nclasses {
                let mut prev: *mut PoolHeader = ptr::null_mut();
                let mut p = self.usedpools[cls(idx)];
                while !p.is_null() {
                    if (*p).prevpool != prev {
                        return Err(format!("class {idx}: broken prevpool"));
                    }
                    if (*p).szidx as usize != idx {
                        return Err(format!(
                            "class {idx}: pool of class {} on its list",
                            (*p).szidx
                        ));
                    }
                    let n = (*p).count as usize;
                    if n == 0 || n >= geo.numblocks(idx) {
                        return Err(format!("class {idx}: used pool with count {n}"));
                    }
                    in_used_lists += 1;
                    prev = p;
                    p = (*p).nextpool;
                }
            }
            let mut used_pools_seen = 0usize;
            for ai in 0..self.arenas.len() {
                let ao = self.ao(ai);
                if (*ao).address == 0 {
                    continue;
                }
                let base = (*ao).address;
                if !base.is_multiple_of(geo.pool_size) {
                    return Err(format!("arena {ai} not pool-aligned"));
                }
                let carved = ((*ao).pool_address - base) / geo.pool_size;
                let mut empty = 0u32;
                for k in 0..carved {
                    let pool = (base + k * geo.pool_size) as *mut PoolHeader;
                    if (*pool).arenaindex != ai || (*pool).heap != self.index {
                        return Err(format!("arena {ai} pool {k}: wrong arena or heap index"));
                    }
                    let n = (*pool).count as usize;
                    if n == 0 {
                        empty += 1;
                        continue;
                    }
                    let idx = (*pool).szidx as usize;
                    if idx >= geo.nclasses {
                        return Err(format!("arena {ai} pool {k}: class {idx}"));
                    }
                    let size = geo.class_size(idx);
                    let nb = geo.numblocks(idx);
                    let mut fl = 0usize;
                    let mut b = (*pool).freeblock;
                    while !b.is_null() {
                        let off = (b as usize).wrapping_sub(pool as usize);
                        if off < geo.overhead
                            || off >= (*pool).nextoffset as usize
                            || !(off - geo.overhead).is_multiple_of(size)
                        {
                            return Err(format!("arena {ai} pool {k}: stray free block"));
                        }
                        fl += 1;
                        if fl > nb {
                            return Err(format!("arena {ai} pool {k}: free list cycle"));
                        }
                        free.push(b as usize);
                        b = *(b as *mut *mut u8);
                    }
                    let (next, max) = ((*pool).nextoffset as usize, (*pool).maxnextoffset as usize);
                    let untouched = if next <= max {
                        (max - next) / size + 1
                    } else {
                        0
                    };
                    if n + fl + untouched != nb {
                        return Err(format!(
                            "arena {ai} pool {k}: {n} used + {fl} free + {untouched} untouched != {nb}"
                        ));
                    }
                    if (n == nb) != (*pool).freeblock.is_null() {
                        return Err(format!("arena {ai} pool {k}: full iff free list empty"));
                    }
                    if n < nb {
                        used_pools_seen += 1;
                    }
                    blocks[idx] += n as u64;
                    pools[idx] += 1;
                }
                let mut fp = 0u32;
                let mut p = (*ao).freepools;
                while !p.is_null() {
                    if (*p).count != 0 || (*p).arenaindex != ai {
                        return Err(format!("arena {ai}: non-empty pool on freepools"));
                    }
                    fp += 1;
                    if fp > (*ao).ntotalpools {
                        return Err(format!("arena {ai}: freepools cycle"));
                    }
                    p = (*p).nextpool;
                }
                if fp != empty
                    || (*ao).nfreepools as usize
                        != empty as usize + (geo.pools_per_arena as usize - carved)
                {
                    return Err(format!(
                        "arena {ai}: nfreepools {} but {empty} empty + uncarved",
                        (*ao).nfreepools
                    ));
                }
                unused += (*ao).nfreepools as u64;
            }
            if used_pools_seen != in_used_lists {
                return Err(format!(
                    "{used_pools_seen} partly used pools but {in_used_lists} on usedpools"
                ));
            }
            // usable_arenas: ascending nfreepools, and nfp2lasta names the rightmost of each count.
            let mut last = [NONE; NFP_LEN];
            let mut prev = NONE;
            let mut prevnf = 0;
            let mut a = self.usable_arenas;
            let mut listed = 0u32;
            while a != NONE {
                let ao = self.ao(a);
                if ao.is_null() || (*ao).address == 0 || (*ao).prevarena != prev {
                    return Err(format!("usable_arenas broken at {a}"));
                }
                let nf = (*ao).nfreepools;
                if nf == 0 || nf < prevnf {
                    return Err(format!("usable_arenas not sorted at {a}"));
                }
                last[nfp(nf)] = a;
                prev = a;
                prevnf = nf;
                listed += 1;
                a = (*ao).nextarena;
            }
            for (nf, (&have, &want)) in self.nfp2lasta.iter().zip(&last).enumerate().skip(1) {
                if have != want {
                    return Err(format!(
                        "nfp2lasta[{nf}] = {have} but the rightmost is {want}"
                    ));
                }
            }
            let with_free = (0..self.arenas.len())
                .filter(|&i| (*self.ao(i)).address != 0 && (*self.ao(i)).nfreepools > 0)
                .count() as u32;
            if with_free != listed {
                return Err(format!(
                    "{with_free} arenas with free pools but {listed} usable"
                ));
            }
        }
        for i in 0..geo.nclasses {
            let (b, p) = (c.blocks[i].load(Relaxed), c.pools[i].load(Relaxed));
            if (b, p) != (blocks[i], pools[i]) {
                return Err(format!(
                    "class {i}: counters ({b}, {p}) but walk ({}, {})",
                    blocks[i], pools[i]
                ));
            }
        }
        if c.unused_pools.load(Relaxed) != unused {
            return Err("unused_pools counter differs from the walk".into());
        }
        Ok(())
    }

    /// Returns every arena and the descriptor table to `src` (used when the `Pool` is dropped).
    ///
    /// # Safety
    /// No block of this heap is used afterwards.
    pub unsafe fn release_all(&mut self, src: &dyn ArenaSource) {
        for i in 0..self.arenas.len() {
            let ao = self.ao(i);
            // SAFETY: `i` is in range of the table.
            unsafe {
                if !ao.is_null() && (*ao).address != 0 {
                    src.arena_free((*ao).address as *mut u8);
                    (*ao).address = 0;
                }
            }
        }
        // SAFETY: the table came from `src.inner()`.
        unsafe { self.arenas.free(src.inner()) };
        self.usable_arenas = NONE;
        self.unused_arena_objects = NONE;
    }
}
