//! `PoolStats`, the registry of live pools (and the fork handlers that hold their locks across
//! `fork()`), and `pool_stats()`.

use super::config::{Geometry, MAX_CLASSES};
use super::local::{SpinLock, FORK_PENDING};
use super::stable::Core;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

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
    /// Pools of this class holding at least one block in use.
    pub pools: u64,
    /// Blocks in use.
    pub blocks_in_use: u64,
    /// Blocks of those pools not in use: free-listed plus never touched.
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

const SLOTS: usize = 64;

struct Registry {
    lock: SpinLock,
    entries: UnsafeCell<[Option<Entry>; SLOTS]>,
}

// SAFETY: `entries` is only accessed while `lock` is held.
unsafe impl Sync for Registry {}

static REGISTRY: Registry = Registry {
    lock: SpinLock::new(),
    entries: UnsafeCell::new([None; SLOTS]),
};

fn with_registry<R>(f: impl FnOnce(&mut [Option<Entry>; SLOTS]) -> R) -> R {
    REGISTRY.lock.lock();
    // SAFETY: the lock is held, so this is the only reference to the entries. `f` never allocates
    // (all callers pass closures over plain data and the pools' no-allocation functions).
    let r = f(unsafe { &mut *REGISTRY.entries.get() });
    REGISTRY.lock.unlock();
    r
}

/// Records a live pool (silently ignored when the registry is full).
pub(crate) fn register(e: Entry) {
    install_fork_handlers();
    with_registry(|es| {
        if let Some(slot) = es.iter_mut().find(|s| s.is_none()) {
            *slot = Some(e);
        }
    });
}

/// Registers, once per process, handlers that take the registry's lock and every registered
/// pool's shared-heap lock just before `fork()` and release them in both processes after it.
/// Without them, a lock some other thread held at the moment of the fork would stay held forever
/// in the child, whose only thread would then spin on it. (Heaps owned by the parent's other
/// threads need no lock; the child never adopts them, since one may have been mid-operation.)
fn install_fork_handlers() {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: the handlers are `extern "C"` functions without arguments, as `pthread_atfork`
    // requires, and stay valid for the life of the process. Its result is ignored: without the
    // handlers a pool behaves as before, which the `Pool` docs describe.
    unsafe {
        libc::pthread_atfork(
            Some(lock_for_fork),
            Some(unlock_after_fork),
            Some(unlock_after_fork),
        )
    };
}

/// The fork handlers' view of the registered pools' cores, for use while the registry lock is
/// held (from `lock_for_fork` to `unlock_after_fork`).
fn registered_cores() -> impl Iterator<Item = &'static Core> {
    // SAFETY: the caller holds the registry lock, so the entries do not change, and a registered
    // core stays alive until its pool unregisters it, which needs that lock.
    let entries = unsafe { &*REGISTRY.entries.get() };
    // SAFETY: as above: each registered address is a live `Core`.
    entries
        .iter()
        .flatten()
        .map(|e| unsafe { &*(e.core as *const Core) })
}

/// `pthread_atfork` prepare handler: waits for the registry and every pool's shared heap to be
/// free and takes their locks (each is held for one allocator operation at most).
extern "C" fn lock_for_fork() {
    FORK_PENDING.store(true, Ordering::Release);
    REGISTRY.lock.lock_for_fork();
    for core in registered_cores() {
        core.shared_lock.lock_for_fork();
    }
}

/// `pthread_atfork` parent and child handler: releases what `lock_for_fork` took.
extern "C" fn unlock_after_fork() {
    for core in registered_cores() {
        core.shared_lock.unlock();
    }
    REGISTRY.lock.unlock();
    FORK_PENDING.store(false, Ordering::Release);
}

/// Forgets a pool (called from its `Drop`; waits for a `pool_stats` reading it).
pub(crate) fn unregister(core: usize, uid: u64) {
    with_registry(|es| {
        for s in es.iter_mut() {
            if matches!(s, Some(e) if e.core == core && e.uid == uid) {
                *s = None;
            }
        }
    });
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
/// Unlike [`Pool::stats`](crate::Pool::stats), this reads the counters without applying pending
/// cross-thread frees (blocks freed by one thread into another thread's heap count as in use
/// until that heap's owner next allocates). Never deadlocks; allocates only the probe and the
/// result, with no lock held.
///
/// ```
/// // Here the global allocator is `System`, so there is no global pool.
/// assert_eq!(heapdelta::pool_stats(), None);
/// ```
pub fn pool_stats() -> Option<PoolStats> {
    let known = Entry {
        core: GLOBAL_CORE.load(Ordering::Acquire),
        uid: GLOBAL_UID.load(Ordering::Acquire),
    };
    if known.core != 0 {
        if let Some(raw) = counters_of(known) {
            return Some(raw.into_stats());
        }
    }
    let found = find_global()?;
    GLOBAL_UID.store(found.uid, Ordering::Release);
    GLOBAL_CORE.store(found.core, Ordering::Release);
    counters_of(found).map(|raw| raw.into_stats())
}

/// The global pool found by `pool_stats`' probe (0: not found yet). Two words written one after
/// the other: a reader that sees them torn finds no registered pool with both, and probes.
static GLOBAL_CORE: AtomicUsize = AtomicUsize::new(0);
static GLOBAL_UID: AtomicU64 = AtomicU64::new(0);

/// The counters of the pool `e`, if it is still registered.
fn counters_of(e: Entry) -> Option<RawStats> {
    with_registry(|es| {
        es.iter()
            .flatten()
            .any(|r| r.core == e.core && r.uid == e.uid)
            // SAFETY: registered cores are alive while registered (a pool unregisters in `Drop`,
            // which waits for the lock we hold, before freeing its core).
            .then(|| unsafe { &*(e.core as *const Core) }.counters())
    })
}

/// The registered pool whose arenas hold a probe allocated through the global allocator.
fn find_global() -> Option<Entry> {
    let probe = crate::thread::probe_inner(|| Box::new(0u64));
    let addr = &*probe as *const u64 as usize;
    let found = with_registry(|es| {
        es.iter().flatten().copied().find(|e| {
            // SAFETY: registered cores are alive while registered (a pool unregisters in `Drop`,
            // which waits for the lock we hold, before freeing its core).
            let core = unsafe { &*(e.core as *const Core) };
            core.map.contains(&core.geo, addr)
        })
    });
    drop(probe);
    found
}
