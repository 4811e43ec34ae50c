//! The part of a pool that never moves: allocated from the inner allocator on first use, so a
//! `Pool` value may be moved between uses, and `pool_stats()` can reach it by address.

use super::config::{Geometry, MAX_CLASSES};
use super::heap::ArenaSource;
use super::local::{Heap, IdleHeap, SpinLock, FORK_PENDING, MAX_HEAPS};
use super::map::ArenaMap;
use super::stats::RawStats;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// Address-stable pool state.
pub(crate) struct Core {
    /// The pool's unique id (never reused within a process).
    pub uid: u64,
    pub geo: Geometry,
    /// Which addresses are in arenas.
    pub map: ArenaMap,
    /// Heap slots (0 is the shared fallback heap); a heap lives until the pool is dropped.
    pub heaps: [AtomicPtr<Heap>; MAX_HEAPS],
    pub arenas_total: AtomicU64,
    pub arenas_current: AtomicU64,
    pub arenas_highwater: AtomicU64,
    /// Guards the shared fallback heap (slot 0). Here rather than in the `Pool` so that the fork
    /// handlers (`crate::fork`) can reach it through the registry.
    pub shared_lock: SpinLock,
    /// The next core in the registry of live pools (`stats::register`); changed only under the
    /// registry's lock.
    pub registry_next: AtomicPtr<Core>,
}

impl Core {
    pub fn new(uid: u64, geo: Geometry) -> Core {
        Core {
            uid,
            geo,
            map: ArenaMap::new(),
            heaps: [const { AtomicPtr::new(ptr::null_mut()) }; MAX_HEAPS],
            arenas_total: AtomicU64::new(0),
            arenas_current: AtomicU64::new(0),
            arenas_highwater: AtomicU64::new(0),
            shared_lock: SpinLock::new(),
            registry_next: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The heap in slot `i`, if created.
    #[inline]
    pub fn heap(&self, i: usize) -> Option<&Heap> {
        let p = self.heaps.get(i)?.load(Ordering::Acquire);
        // SAFETY: heap slots hold null or a heap that lives as long as the core.
        unsafe { p.as_ref() }
    }

    /// Runs `f` on each heap that no thread is using, with exclusive access to it: the shared
    /// heap when its lock is free, and the heaps whose owner has exited (`IdleHeap`). Skipped
    /// while a fork is pending.
    fn with_idle_heaps(&self, mut f: impl FnMut(&Heap)) {
        if FORK_PENDING.load(Ordering::Acquire) {
            return;
        }
        if let Some(h) = self.heap(0) {
            if self.shared_lock.try_lock() {
                f(h);
                self.shared_lock.unlock();
            }
        }
        for h in (1..MAX_HEAPS).filter_map(|i| self.heap(i)) {
            if let Some(held) = IdleHeap::take(h) {
                f(held.heap());
            }
        }
    }

    /// Frees, through `src` (the pool), the blocks other threads freed into heaps that no thread
    /// is using.
    pub fn drain_idle(&self, src: &dyn ArenaSource) {
        // SAFETY: `with_idle_heaps` gives exclusive access to each heap it passes.
        self.with_idle_heaps(|h| unsafe { h.drain(src) });
    }

    /// Counters summed over all heaps (no allocation, no lock, no draining). Blocks that wait on
    /// a heap's remote list, freed by the program, are not in use. A heap's blocks are read
    /// before its waiting blocks, so a block its owner frees from the list meanwhile counts as in
    /// use; a block allocated after that read and freed by another thread before the second can
    /// be taken off though the first did not count it, a moment's undercount (summed over heaps
    /// before the figures are clamped at zero).
    pub fn counters(&self) -> RawStats {
        let mut raw = RawStats::new(self.geo);
        for h in (0..MAX_HEAPS).filter_map(|i| self.heap(i)) {
            let c = &h.counters;
            for k in 0..self.geo.nclasses.min(MAX_CLASSES) {
                let waiting = &h.remote.0.waiting[k];
                raw.blocks[k] = raw.blocks[k]
                    .wrapping_add(c.blocks[k].load(Ordering::Acquire) as i64)
                    .wrapping_sub(waiting.load(Ordering::Acquire) as i64);
                raw.pools[k] = raw.pools[k].wrapping_add(c.pools[k].load(Ordering::Relaxed) as i64);
            }
            raw.unused_pools = raw
                .unused_pools
                .wrapping_add(c.unused_pools.load(Ordering::Relaxed) as i64);
            raw.large_blocks = raw
                .large_blocks
                .wrapping_add(c.large_blocks.load(Ordering::Relaxed) as i64);
            raw.large_bytes = raw
                .large_bytes
                .wrapping_add(c.large_bytes.load(Ordering::Relaxed) as i64);
        }
        // The live count first: the others only grow, and an arena is counted in them before
        // it is live, so read after it they are at least as high, as they are by definition
        // (the `max` covers a thread still between its increments).
        raw.arenas_current = self.arenas_current.load(Ordering::Acquire);
        raw.arenas_total = self
            .arenas_total
            .load(Ordering::Acquire)
            .max(raw.arenas_current);
        raw.arenas_highwater = self
            .arenas_highwater
            .load(Ordering::Acquire)
            .max(raw.arenas_current);
        raw
    }
}
