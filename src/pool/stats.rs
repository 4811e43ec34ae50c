//! `PoolStats`, the registry of live pools (and the fork handlers that hold their locks across
//! `fork()`), and `pool_stats()`.

use super::config::{Geometry, MAX_CLASSES};
use super::local::{reset_idle_holders, wait_for_idle_heaps, SpinLock, FORK_PENDING};
use super::stable::Core;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// What a `Pool` holds, with the meaning of CPython's `sys._debugmallocstats()`.
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout, System};
/// use heapdelta::{Pool, PoolConfig};
/// let pool = Pool::with_config(System, PoolConfig::CPYTHON);
/// let layout = Layout::from_size_align(24, 8).unwrap();
/// // SAFETY: the layout has a non-zero size.
/// let p = unsafe { pool.alloc(layout) };
/// let s = pool.stats();
/// assert_eq!(s.classes[1].blocks_in_use, 1);       // 24 bytes are served from the 32-byte class
/// assert_eq!(s.classes[1].blocks_available, 509);  // 510 blocks per 16 KiB pool
/// assert_eq!(s.unused_pools, 63);
/// assert_eq!(s.bytes_reserved, 1 << 20);
/// // SAFETY: `p` came from this pool with `layout`.
/// unsafe { pool.dealloc(p, layout) };
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PoolStats {
    /// One entry per size class, smallest first (classes without pools included, with zeros).
    pub classes: Vec<ClassStats>,
    /// Arenas ever obtained from the inner allocator (`ntimes_arena_allocated`).
    pub arenas_allocated_total: u64,
    /// Arenas given back (`arenas_allocated_total - arenas_current`).
    pub arenas_reclaimed: u64,
    /// Most arenas live at once (`narenas_highwater`).
    pub arenas_highwater: u64,
    /// Arenas live now (`narenas_currently_allocated`).
    pub arenas_current: u64,
    /// Empty pools plus never-carved pools in live arenas (Σ `nfreepools`).
    pub unused_pools: u64,
    /// Σ blocks in use × their class size ("bytes in allocated blocks").
    pub bytes_in_use: u64,
    /// `arenas_current × arena_size`.
    pub bytes_reserved: u64,
    /// Blocks passed through to the inner allocator and not yet freed.
    pub large_blocks: u64,
    /// Their requested bytes.
    pub large_bytes: u64,
}

/// One row of the per-class table of `sys._debugmallocstats()`.
///
/// ```
/// let c = heapdelta::ClassStats { size: 64, pools: 1, blocks_in_use: 10, blocks_available: 245 };
/// assert_eq!(c.blocks_in_use + c.blocks_available, 255); // NUMBLOCKS for 64-byte blocks
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClassStats {
    /// Block size of the class.
    pub size: usize,
    /// Pools of this class holding at least one block in use or waiting to be freed (see
    /// `blocks_available`).
    pub pools: u64,
    /// Blocks in use.
    pub blocks_in_use: u64,
    /// Blocks of those pools not in use: free-listed, never touched, or freed by another thread
    /// and waiting for the heap that holds them to take them back.
    pub blocks_available: u64,
}

/// Counters copied out of a pool without allocating.
#[derive(Clone, Copy)]
pub(crate) struct RawStats {
    pub geo: Geometry,
    pub blocks: [i64; MAX_CLASSES],
    pub pools: [i64; MAX_CLASSES],
    pub unused_pools: i64,
    pub large_blocks: i64,
    pub large_bytes: i64,
    pub arenas_total: u64,
    pub arenas_current: u64,
    pub arenas_highwater: u64,
}

impl RawStats {
    pub fn new(geo: Geometry) -> RawStats {
        RawStats {
            geo,
            blocks: [0; MAX_CLASSES],
            pools: [0; MAX_CLASSES],
            unused_pools: 0,
            large_blocks: 0,
            large_bytes: 0,
            arenas_total: 0,
            arenas_current: 0,
            arenas_highwater: 0,
        }
    }

    /// Builds the public form (allocates: call with no lock held).
    pub fn into_stats(self) -> PoolStats {
        let g = &self.geo;
        let pos = |v: i64| v.max(0) as u64;
        let classes: Vec<ClassStats> = (0..g.nclasses)
            .map(|i| {
                let pools = pos(self.pools[i]);
                let blocks = pos(self.blocks[i]);
                ClassStats {
                    size: g.class_size(i),
                    pools,
                    blocks_in_use: blocks,
                    blocks_available: (pools * g.numblocks(i) as u64).saturating_sub(blocks),
                }
            })
            .collect();
        let bytes_in_use = classes
            .iter()
            .map(|c| c.blocks_in_use * c.size as u64)
            .sum();
        PoolStats {
            classes,
            arenas_allocated_total: self.arenas_total,
            arenas_reclaimed: self.arenas_total.saturating_sub(self.arenas_current),
            arenas_highwater: self.arenas_highwater,
            arenas_current: self.arenas_current,
            unused_pools: pos(self.unused_pools),
            bytes_in_use,
            bytes_reserved: self.arenas_current * g.arena_size as u64,
            large_blocks: pos(self.large_blocks),
            large_bytes: pos(self.large_bytes),
        }
    }
}

/// A live pool: the address of its `Core` and its id.
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    pub core: usize,
    pub uid: u64,
}

/// The live pools: a list threaded through their cores (`Core::registry_next`), so that it holds
/// any number of pools without allocating. The head and every link change only under `lock`.
struct Registry {
    lock: SpinLock,
    head: AtomicPtr<Core>,
}

static REGISTRY: Registry = Registry {
    lock: SpinLock::new(),
    head: AtomicPtr::new(ptr::null_mut()),
};

/// The registered cores, in the order of the list.
struct Registered {
    next: *mut Core,
}

impl Iterator for Registered {
    type Item = &'static Core;

    fn next(&mut self) -> Option<&'static Core> {
        // SAFETY: a `Registered` only exists while the registry lock is held (see `registered`),
        // so the links do not change, and a registered core stays alive until its pool
        // unregisters it, which needs that lock.
        let core = unsafe { self.next.as_ref() }?;
        self.next = core.registry_next.load(Ordering::Acquire);
        Some(core)
    }
}

/// The registered cores, for a caller that holds the registry lock.
///
/// # Safety
/// The registry lock must be held for as long as the iterator and the cores it yields are used.
unsafe fn registered() -> Registered {
    Registered {
        next: REGISTRY.head.load(Ordering::Acquire),
    }
}

/// Runs `f` over the registered cores, with the registry lock held. `f` must not allocate (all
/// callers pass closures over plain data and the pools' no-allocation functions) and cannot keep
/// the cores past its return.
fn with_registry<R>(f: impl FnOnce(Registered) -> R) -> R {
    REGISTRY.lock.lock();
    // SAFETY: the lock is held until `f` returns.
    let r = f(unsafe { registered() });
    REGISTRY.lock.unlock();
    r
}

/// Records a live pool, whose core lives until it is unregistered.
pub(crate) fn register(e: Entry) {
    crate::fork::install();
    let core = e.core as *mut Core;
    REGISTRY.lock.lock();
    // SAFETY: `core` is the pool's live core, not registered yet; the lock is held, so the list
    // is ours to change.
    unsafe {
        (*core)
            .registry_next
            .store(REGISTRY.head.load(Ordering::Acquire), Ordering::Release);
    }
    REGISTRY.head.store(core, Ordering::Release);
    REGISTRY.lock.unlock();
}

/// Before `fork()` (see `crate::fork`): waits for the registry and every pool's shared heap to be
/// free and takes their locks (each is held for one allocator operation at most). Without them,
/// a lock some other thread held at the moment of the fork would stay held forever in the child.
/// (Heaps owned by the parent's other threads need no lock; the child never adopts them, since
/// one may have been mid-operation. Heaps of exited threads that another thread holds for a
/// moment are waited for, so that the child can adopt them.)
pub(crate) fn lock_for_fork() {
    // Sequentially consistent: paired with `IdleHeap::take` (see there).
    FORK_PENDING.store(true, Ordering::SeqCst);
    wait_for_idle_heaps();
    REGISTRY.lock.lock_for_fork();
    // SAFETY: the registry lock is held until `unlock_after_fork`.
    for core in unsafe { registered() } {
        core.shared_lock.lock_for_fork();
    }
}

/// After `fork()`, in the child only, before `unlock_after_fork`: what no thread of the child can
/// hold is reset (see `local::reset_idle_holders`).
pub(crate) fn reset_in_child() {
    reset_idle_holders();
}

/// After `fork()`, in the parent and in the child: releases what `lock_for_fork` took.
pub(crate) fn unlock_after_fork() {
    // SAFETY: `lock_for_fork` took the registry lock; it is released below.
    for core in unsafe { registered() } {
        core.shared_lock.unlock();
    }
    REGISTRY.lock.unlock();
    FORK_PENDING.store(false, Ordering::Release);
}

/// Forgets a pool (called from its `Drop`; waits for a `pool_stats` reading it).
pub(crate) fn unregister(core: usize, uid: u64) {
    let core = core as *mut Core;
    REGISTRY.lock.lock();
    let mut link: &AtomicPtr<Core> = &REGISTRY.head;
    loop {
        let at = link.load(Ordering::Acquire);
        // SAFETY: the lock is held, so the links do not change and every registered core is
        // alive; `core` itself is alive until its pool has unregistered it.
        let Some(c) = (unsafe { at.as_ref() }) else {
            break;
        };
        if at == core && c.uid == uid {
            link.store(c.registry_next.load(Ordering::Acquire), Ordering::Release);
            break;
        }
        link = &c.registry_next;
    }
    REGISTRY.lock.unlock();
}

/// The statistics of the global allocator's `Pool`, if the global allocator is a
/// [`Pool`](crate::Pool) (directly, or wrapped by heapdelta's `Tracker` or any shim that hands out
/// pointers inside the blocks it gets from the pool).
///
/// Rule: every `Pool` registers itself on its first allocation (the address of its internal,
/// never-moving state) and unregisters when dropped. The first `pool_stats` allocates one small
/// probe block through the global allocator and returns the statistics of the registered pool
/// whose arenas hold it; later calls read that pool again without a probe (the global allocator
/// never changes, and a probe made late, once the thread's own pool heap is gone at exit, could
/// make the pool take a new arena just to hold it). Pools used as plain values (replays, tests)
/// never own the probe, so they are never mistaken for the global one. The probe is freed before
/// the counters are read.
///
/// The blocks other threads freed, which wait on their heaps' lists until the heap's thread (or,
/// once it has exited, whichever thread next frees into it or reads [`Pool::stats`](crate::Pool::stats))
/// frees them, are not counted as in use: the pool counts them as they wait. Their pools stay in
/// use until then, and reading changes nothing in the pool.
/// Counters read while other threads allocate can be a moment apart: a class may show a block in
/// use in a pool just given back. Never deadlocks (it waits only for the registry of pools, which
/// no allocation holds); allocates only the probe and the result, with no lock held.
///
/// ```
/// // Here the global allocator is `System`, so there is no global pool.
/// assert_eq!(heapdelta::pool_stats(), None);
/// ```
///
/// With a pool under the tracker, the same figures also reach every snapshot
/// ([`Snapshot::pool`](crate::Snapshot::pool)):
///
/// ```
/// use heapdelta::{Pool, Tracker};
///
/// #[global_allocator]
/// static GLOBAL: Tracker<Pool> = Tracker::wrap(Pool::new());
///
/// fn main() {
///     let v = vec![0u8; 64];
///     let stats = heapdelta::pool_stats().expect("a pool is the global allocator");
///     assert!(stats.bytes_in_use >= 64);
///     assert!(heapdelta::snapshot().pool().is_some());
///     drop(v);
/// }
/// ```
pub fn pool_stats() -> Option<PoolStats> {
    // heapdelta's own work, the figures returned included, as a snapshot's are (a review: under
    // `Tracker<Pool>` their table of classes was counted as a block of the caller's).
    crate::thread::untracked(|| counters_of(global_pool()?).map(|raw| raw.into_stats()))
}

/// The global allocator's pool, found by a probe the first time (see `pool_stats`). Called early
/// by heapdelta's `every=` thread's creator, so that the probe is made on a thread of the
/// program's: made on that thread, it would give it a pool heap and an arena of its own.
pub(crate) fn global_pool() -> Option<Entry> {
    let known = Entry {
        core: GLOBAL_CORE.load(Ordering::Acquire),
        uid: GLOBAL_UID.load(Ordering::Acquire),
    };
    let still_registered = |e: Entry| {
        with_registry(|mut cores| {
            cores.any(|c| c as *const Core as usize == e.core && c.uid == e.uid)
        })
    };
    if known.core != 0 && still_registered(known) {
        return Some(known);
    }
    let found = find_global()?;
    GLOBAL_UID.store(found.uid, Ordering::Release);
    GLOBAL_CORE.store(found.core, Ordering::Release);
    Some(found)
}

/// The global pool found by `pool_stats`' probe (0: not found yet). Two words written one after
/// the other: a reader that sees them torn finds no registered pool with both, and probes.
static GLOBAL_CORE: AtomicUsize = AtomicUsize::new(0);
static GLOBAL_UID: AtomicU64 = AtomicU64::new(0);

/// The counters of the pool `e`, if it is still registered (see `Core::counters`).
fn counters_of(e: Entry) -> Option<RawStats> {
    with_registry(|mut cores| {
        cores
            .find(|c| *c as *const Core as usize == e.core && c.uid == e.uid)
            .map(|c| c.counters())
    })
}

/// The registered pool whose arenas hold a probe allocated through the global allocator.
fn find_global() -> Option<Entry> {
    // Not counted (inside heapdelta's guard), but placed by the inner allocator as a program's
    // block would be: counted, it was a site of the program's, at its call of `pool_stats`.
    let probe = crate::thread::untracked(|| crate::thread::probe_inner(|| Box::new(0u64)));
    let addr = &*probe as *const u64 as usize;
    let found = with_registry(|mut cores| {
        cores.find(|c| c.map.contains(&c.geo, addr)).map(|c| Entry {
            core: c as *const Core as usize,
            uid: c.uid,
        })
    });
    drop(probe);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pool;
    use std::alloc::{GlobalAlloc, Layout};

    /// Every live pool is registered, however many there are: the fork handlers take the locks
    /// of registered pools only, so a pool left out could leave a forked child spinning.
    #[test]
    fn any_number_of_pools_is_registered() {
        const POOLS: usize = 100;
        let pools: Vec<Pool> = (0..POOLS).map(|_| Pool::new()).collect();
        let layout = Layout::from_size_align(64, 8).unwrap();
        for pool in &pools {
            // SAFETY: a non-zero size; the block goes back to the pool it came from.
            unsafe { pool.dealloc(pool.alloc(layout), layout) };
        }
        let uids: Vec<u64> = pools
            .iter()
            .filter_map(|p| p.engine.core().map(|c| c.uid))
            .collect();
        // Nothing allocates under the registry lock.
        let ours = with_registry(|cores| cores.filter(|c| uids.contains(&c.uid)).count());
        assert_eq!(ours, POOLS);
        drop(pools);
    }
}
