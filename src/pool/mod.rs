//! Pool mode: a pymalloc-style small-object allocator (placeholder; being written in `pool` branch).

use std::alloc::{GlobalAlloc, Layout, System};

/// Pool configuration (placeholder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    /// Bytes per arena.
    pub arena_size: usize,
    /// Bytes per pool.
    pub pool_size: usize,
    /// Size-class step and block alignment.
    pub alignment: usize,
    /// Largest request served from pools.
    pub max_small: usize,
    /// Whether wholly empty arenas go back to the inner allocator.
    pub release_empty_arenas: bool,
}

/// Pool statistics (placeholder).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PoolStats {
    /// Bytes reserved in arenas.
    pub bytes_reserved: u64,
    /// Bytes in blocks in use.
    pub bytes_in_use: u64,
}

/// The pool allocator (placeholder).
pub struct Pool<A = System> {
    inner: A,
}

impl Pool<System> {
    /// A pool over the system allocator.
    pub const fn new() -> Self {
        Pool { inner: System }
    }
}

impl Default for Pool<System> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: forwards to the inner allocator unchanged.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Pool<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        unsafe { self.inner.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { self.inner.dealloc(ptr, layout) }
    }
}

/// The global pool's statistics, if a `Pool` is the global allocator (placeholder).
pub fn pool_stats() -> Option<PoolStats> {
    None
}
