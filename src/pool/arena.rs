//! Arena descriptors (`struct arena_object`) and the per-heap table that holds them.
//!
//! The table lives in memory from the inner allocator and grows 16, 32, 64, ... like CPython's
//! `arenas[]`. Descriptors link to each other by index (`NONE` ends a list), so growing the table
//! (which moves it) leaves every link valid.

use super::heap::PoolHeader;
use std::alloc::{GlobalAlloc, Layout};
use std::ptr;

/// The "null" arena index.
pub(crate) const NONE: u32 = u32::MAX;
const INITIAL_ARENA_OBJECTS: u32 = 16;

/// One arena descriptor.
pub(crate) struct ArenaObj {
    /// Base address of the arena, `0` if this descriptor has no arena.
    pub address: usize,
    /// Next never-carved pool.
    pub pool_address: usize,
    /// Empty pools plus never-carved pools.
    pub nfreepools: u32,
    /// Pools in this arena.
    pub ntotalpools: u32,
    /// LIFO list of empty pools.
    pub freepools: *mut PoolHeader,
    /// Next arena in `usable_arenas`, or in `unused_arena_objects`.
    pub nextarena: u32,
    /// Previous arena in `usable_arenas`.
    pub prevarena: u32,
}

/// A growable array of descriptors.
pub(crate) struct ArenaTable {
    ptr: *mut ArenaObj,
    len: u32,
}

impl ArenaTable {
    pub const fn new() -> ArenaTable {
        ArenaTable {
            ptr: ptr::null_mut(),
            len: 0,
        }
    }

    pub fn len(&self) -> u32 {
        self.len
    }

    fn layout(len: u32) -> Option<Layout> {
        Layout::array::<ArenaObj>(len as usize).ok()
    }

    /// The descriptor at `i`, or null when out of range.
    #[inline]
    pub fn get(&self, i: u32) -> *mut ArenaObj {
        if i < self.len {
            // SAFETY: `i < len`, the number of descriptors in the allocation at `ptr`.
            unsafe { self.ptr.add(i as usize) }
        } else {
            ptr::null_mut()
        }
    }

    /// Doubles the table (16 the first time), links the new descriptors into an ascending list
    /// and returns its head, or `NONE` if out of memory. Existing descriptors keep their indices.
    pub fn grow(&mut self, inner: &dyn GlobalAlloc) -> u32 {
        let old = self.len;
        let new = if old == 0 {
            INITIAL_ARENA_OBJECTS
        } else {
            match old.checked_mul(2) {
                Some(n) if n < NONE => n,
                _ => return NONE,
            }
        };
        let Some(layout) = Self::layout(new) else {
            return NONE;
        };
        // SAFETY: `layout` is non-empty (`new >= 16`).
        let p = unsafe { inner.alloc(layout) } as *mut ArenaObj;
        if p.is_null() {
            return NONE;
        }
        if old > 0 {
            // SAFETY: both regions hold at least `old` descriptors and do not overlap.
            unsafe { ptr::copy_nonoverlapping(self.ptr, p, old as usize) };
            if let Some(ol) = Self::layout(old) {
                // SAFETY: `self.ptr` was allocated by `inner` with the layout for `old`.
                unsafe { inner.dealloc(self.ptr as *mut u8, ol) };
            }
        }
        for i in old..new {
            let next = if i + 1 < new { i + 1 } else { NONE };
            // SAFETY: `i < new`, inside the new allocation.
            unsafe {
                p.add(i as usize).write(ArenaObj {
                    address: 0,
                    pool_address: 0,
                    nfreepools: 0,
                    ntotalpools: 0,
                    freepools: ptr::null_mut(),
                    nextarena: next,
                    prevarena: NONE,
                })
            };
        }
        self.ptr = p;
        self.len = new;
        old
    }

    /// Frees the table itself.
    ///
    /// # Safety
    /// `inner` is the allocator the table was grown with; the table is not used afterwards.
    pub unsafe fn free(&mut self, inner: &dyn GlobalAlloc) {
        if let Some(l) = Self::layout(self.len) {
            if !self.ptr.is_null() {
                // SAFETY: allocated by `inner` with this layout in `grow`.
                unsafe { inner.dealloc(self.ptr as *mut u8, l) };
            }
        }
        self.ptr = ptr::null_mut();
        self.len = 0;
    }
}
