//! The arena map: which addresses belong to a live arena (CPython's `address_in_range`).
//!
//! A three-level radix tree over `address >> arena_shift`, as in CPython 3.10+ (bpo-37448).
//! Arenas are only pool-aligned, so an arena starting at offset `t` of an arena-sized "chunk"
//! covers `[t, end)` of that chunk (`hi`) and `[0, t)` of the next one (`lo`). Entries are atomics:
//! any thread may look up while another marks a new arena; nodes are installed with a CAS and
//! live as long as the `Pool`. Node memory comes from the inner allocator, zeroed.

use super::config::{Geometry, ADDRESS_BITS};
use std::alloc::{GlobalAlloc, Layout};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

const BOT_BITS: u32 = 13;
const MID_BITS: u32 = 12;

/// One arena-sized chunk of the address space.
struct Entry {
    /// Addresses of the chunk with offset `< lo` are in the arena that started in the chunk below.
    lo: AtomicU32,
    /// `0`, or `t + 1` where the arena starting in this chunk starts at offset `t`.
    hi: AtomicU32,
}

/// The radix tree; `root` is allocated on first use.
pub(crate) struct ArenaMap {
    root: AtomicPtr<u8>,
}

fn root_bits(geo: &Geometry) -> u32 {
    ADDRESS_BITS - geo.arena_shift - BOT_BITS - MID_BITS
}

fn node_layout(entries: usize, entry: usize) -> Option<Layout> {
    Layout::from_size_align(entries.checked_mul(entry)?, 64).ok()
}

impl ArenaMap {
    pub const fn new() -> ArenaMap {
        ArenaMap {
            root: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Splits an address into the three tree indices and the offset in its chunk, or `None`
    /// if the address is beyond what the map covers.
    #[inline]
    fn split(geo: &Geometry, addr: usize) -> Option<(usize, usize, usize, u32)> {
        if (addr as u64) >> ADDRESS_BITS != 0 {
            return None;
        }
        let key = addr >> geo.arena_shift;
        let bot = key & ((1 << BOT_BITS) - 1);
        let mid = (key >> BOT_BITS) & ((1 << MID_BITS) - 1);
        let root = key >> (BOT_BITS + MID_BITS);
        let tail = (addr & (geo.arena_size - 1)) as u32;
        Some((root, mid, bot, tail))
    }

    /// Loads (or, with `create`, installs) the child at `slot`; `None` if absent or out of memory.
    ///
    /// # Safety
    /// `slot` points into a live node of this map.
    unsafe fn child(
        slot: &AtomicPtr<u8>,
        create: Option<(&dyn GlobalAlloc, Layout)>,
    ) -> Option<*mut u8> {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            return Some(p);
        }
        let (inner, layout) = create?;
        // SAFETY: `layout` has a non-zero size (node layouts are never empty).
        let new = unsafe { inner.alloc_zeroed(layout) };
        if new.is_null() {
            return None;
        }
        match slot.compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Some(new),
            Err(other) => {
                // SAFETY: `new` came from `inner.alloc_zeroed(layout)` just above and was never shared.
                unsafe { inner.dealloc(new, layout) };
                Some(other)
            }
        }
    }

    /// The entry for `addr`, creating nodes as needed.
    fn entry(&self, geo: &Geometry, addr: usize, inner: &dyn GlobalAlloc) -> Option<(&Entry, u32)> {
        let create = Some(inner);
        let (r, m, b, tail) = Self::split(geo, addr)?;
        let ptr_size = std::mem::size_of::<AtomicPtr<u8>>();
        let root_layout = node_layout(1 << root_bits(geo), ptr_size)?;
        // SAFETY: `self.root` is the map's own root slot.
        let root = unsafe { Self::child(&self.root, create.map(|a| (a, root_layout)))? };
        let mid_layout = node_layout(1 << MID_BITS, ptr_size)?;
        let bot_layout = node_layout(1 << BOT_BITS, std::mem::size_of::<Entry>())?;
        // SAFETY: `root` is a live node of `1 << root_bits` zero-initialised atomic pointers and
        // `r < 1 << root_bits` because the address is below 2^ADDRESS_BITS.
        let mid_slot = unsafe { &*(root as *const AtomicPtr<u8>).add(r) };
        // SAFETY: `mid_slot` is a slot of a live node.
        let mid = unsafe { Self::child(mid_slot, create.map(|a| (a, mid_layout)))? };
        // SAFETY: `mid` is a live node of `1 << MID_BITS` atomic pointers and `m` is masked.
        let bot_slot = unsafe { &*(mid as *const AtomicPtr<u8>).add(m) };
        // SAFETY: `bot_slot` is a slot of a live node.
        let bot = unsafe { Self::child(bot_slot, create.map(|a| (a, bot_layout)))? };
        // SAFETY: `bot` is a live node of `1 << BOT_BITS` entries and `b` is masked; nodes live
        // until the map is freed, which needs `&mut` access to the pool.
        Some((unsafe { &*(bot as *const Entry).add(b) }, tail))
    }

    /// Whether `addr` lies inside a live arena (`address_in_range`).
    #[inline]
    pub fn contains(&self, geo: &Geometry, addr: usize) -> bool {
        let Some((r, m, b, tail)) = Self::split(geo, addr) else {
            return false;
        };
        let root = self.root.load(Ordering::Acquire) as *const AtomicPtr<u8>;
        if root.is_null() {
            return false;
        }
        // SAFETY: a non-null root is a live node of `1 << root_bits` atomic pointers, and
        // `r < 1 << root_bits` because the address is below 2^ADDRESS_BITS.
        let mid = unsafe { (*root.add(r)).load(Ordering::Acquire) } as *const AtomicPtr<u8>;
        if mid.is_null() {
            return false;
        }
        // SAFETY: a live node of `1 << MID_BITS` pointers; `m` is masked.
        let bot = unsafe { (*mid.add(m)).load(Ordering::Acquire) } as *const Entry;
        if bot.is_null() {
            return false;
        }
        // SAFETY: a live node of `1 << BOT_BITS` entries; `b` is masked.
        let e = unsafe { &*bot.add(b) };
        let hi = e.hi.load(Ordering::Acquire);
        // The chunk's addresses outside its arenas are `[lo, hi - 1)` (to its end when `hi` is 0:
        // `hi - 1` wraps to `u32::MAX`); arenas never overlap, so `lo <= hi - 1`. One unsigned
        // compare tests that range. (Two compares, `tail < lo || tail + 1 >= hi`, become two
        // branches, and when an arena spans two chunks, blocks of both halves are freed in random
        // order: the first branch is then mispredicted half the time, a third slower `Pool`.)
        let gap_start = e.lo.load(Ordering::Acquire);
        let gap_end = hi.wrapping_sub(1);
        tail.wrapping_sub(gap_start) >= gap_end.wrapping_sub(gap_start)
    }

    /// Records that the arena at `base` (pool-aligned) is live (`used`) or gone. Returns false
    /// if the map cannot cover it (out of memory or address too high).
    pub fn mark(&self, inner: &dyn GlobalAlloc, geo: &Geometry, base: usize, used: bool) -> bool {
        let Some((e, tail)) = self.entry(geo, base, inner) else {
            return false;
        };
        if tail != 0 {
            let Some(next) = base.checked_add(geo.arena_size) else {
                return false;
            };
            let Some((n, _)) = self.entry(geo, next, inner) else {
                return false;
            };
            n.lo.store(if used { tail } else { 0 }, Ordering::Release);
        }
        e.hi.store(if used { tail + 1 } else { 0 }, Ordering::Release);
        true
    }

    /// Frees every node.
    ///
    /// # Safety
    /// No other thread uses the map, and `inner`/`geo` are the ones it was built with.
    pub unsafe fn free_all(&self, inner: &dyn GlobalAlloc, geo: &Geometry) {
        let root = self.root.swap(ptr::null_mut(), Ordering::AcqRel) as *mut AtomicPtr<u8>;
        if root.is_null() {
            return;
        }
        let ptr_size = std::mem::size_of::<AtomicPtr<u8>>();
        let (Some(rl), Some(ml), Some(bl)) = (
            node_layout(1 << root_bits(geo), ptr_size),
            node_layout(1 << MID_BITS, ptr_size),
            node_layout(1 << BOT_BITS, std::mem::size_of::<Entry>()),
        ) else {
            return;
        };
        for r in 0..1usize << root_bits(geo) {
            // SAFETY: `root` has `1 << root_bits` slots.
            let mid = unsafe { (*root.add(r)).load(Ordering::Acquire) } as *mut AtomicPtr<u8>;
            if mid.is_null() {
                continue;
            }
            for m in 0..1usize << MID_BITS {
                // SAFETY: `mid` has `1 << MID_BITS` slots.
                let bot = unsafe { (*mid.add(m)).load(Ordering::Acquire) };
                if !bot.is_null() {
                    // SAFETY: `bot` was allocated by `inner` with layout `bl`.
                    unsafe { inner.dealloc(bot, bl) };
                }
            }
            // SAFETY: `mid` was allocated by `inner` with layout `ml`.
            unsafe { inner.dealloc(mid as *mut u8, ml) };
        }
        // SAFETY: `root` was allocated by `inner` with layout `rl`.
        unsafe { inner.dealloc(root as *mut u8, rl) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::config::PoolConfig;
    use std::alloc::System;

    const CHUNK: usize = 64 << 30;

    fn pools(n: usize) -> usize {
        n * PoolConfig::CPYTHON.pool_size
    }

    /// A map with arenas at `CHUNK + offset` for each offset.
    fn map_with_arenas(offsets: &[usize]) -> (ArenaMap, Geometry) {
        let geo = Geometry::new(PoolConfig::CPYTHON);
        let map = ArenaMap::new();
        for off in offsets {
            assert!(map.mark(&System, &geo, CHUNK + off, true));
        }
        (map, geo)
    }

    fn free(map: ArenaMap, geo: &Geometry) {
        // SAFETY: nothing else uses the map; it was built with `System` and `geo`.
        unsafe { map.free_all(&System, geo) };
    }

    #[test]
    fn an_arena_spanning_two_chunks_owns_exactly_its_addresses() {
        let (map, geo) = map_with_arenas(&[pools(3)]);
        let (base, end) = (CHUNK + pools(3), CHUNK + pools(3) + geo.arena_size);
        let boundary = CHUNK + geo.arena_size;
        for addr in [base, base + 1, boundary - 1, boundary, end - 1] {
            assert!(map.contains(&geo, addr), "{addr:#x} is inside");
        }
        for addr in [CHUNK, base - 1, end, end + pools(1)] {
            assert!(!map.contains(&geo, addr), "{addr:#x} is outside");
        }
        free(map, &geo);
    }

    #[test]
    fn the_gap_between_two_arenas_sharing_a_chunk_is_not_owned() {
        // The first ends 3 pools into the second chunk; the second starts 10 pools into it.
        let (map, geo) = map_with_arenas(&[pools(3), PoolConfig::CPYTHON.arena_size + pools(10)]);
        let chunk2 = CHUNK + geo.arena_size;
        assert!(map.contains(&geo, chunk2 + pools(3) - 1));
        assert!(!map.contains(&geo, chunk2 + pools(3)));
        assert!(!map.contains(&geo, chunk2 + pools(10) - 1));
        assert!(map.contains(&geo, chunk2 + pools(10)));
        free(map, &geo);
    }

    #[test]
    fn an_unmarked_arena_owns_nothing() {
        let (map, geo) = map_with_arenas(&[0]);
        assert!(map.contains(&geo, CHUNK) && map.contains(&geo, CHUNK + geo.arena_size - 1));
        assert!(!map.contains(&geo, CHUNK - 1) && !map.contains(&geo, CHUNK + geo.arena_size));
        assert!(map.mark(&System, &geo, CHUNK, false));
        assert!(!map.contains(&geo, CHUNK) && !map.contains(&geo, CHUNK + geo.arena_size - 1));
        free(map, &geo);
    }
}
