//! Threads and heaps: which heap the current thread allocates from.
//!
//! * A thread gets a *token* from a static table of thread records on its first allocation; the
//!   record is released by a thread-local destructor, which makes the token stale.
//! * Each `Pool` has a fixed array of heap slots. Slot 0 is the shared fallback heap (used under
//!   a short spin lock by threads that have no token, e.g. during thread teardown, or when every
//!   slot is taken); the others are claimed by threads: first one the thread already owns, then
//!   one whose owner is gone (adoption: its blocks and arenas are reused, never lost), then a new
//!   one.
//! * A per-thread cache maps a pool's unique id to the heap the thread owns in it, so the
//!   allocation path is two thread-local loads and a compare. No lock is taken on that path.
//! * Frees from a thread other than a heap's owner go on the heap's lock-free remote list
//!   (`push_remote`), which the owner drains on its next allocation or when stats are read; into
//!   a heap nobody uses (its owner has exited, or the shared heap while its lock is free) the
//!   freeing thread frees them itself (`Pool::free_in_idle_heap`).

use super::config::MAX_CLASSES;
use super::heap::{ArenaSource, Counters, HeapState};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Heap slots per pool (slot 0 is the shared fallback heap).
pub(crate) const MAX_HEAPS: usize = 256;
/// Owner token of a free slot.
pub(crate) const OWNER_NONE: u64 = 0;
/// Owner token of the shared fallback heap.
pub(crate) const OWNER_SHARED: u64 = 1;
/// Owner token held while a stats reader or `Drop` drains an abandoned heap.
pub(crate) const OWNER_STATS: u64 = 2;

const RECORDS: usize = 1024;
static THREAD_RECORDS: [AtomicU64; RECORDS] = [const { AtomicU64::new(0) }; RECORDS];

/// Keeps a value on its own cache line (other threads write `remote`, the owner the rest).
#[repr(align(128))]
pub(crate) struct Padded<T>(pub T);

/// One heap: a pymalloc state plus what other threads may touch.
pub(crate) struct Heap {
    /// This heap's slot in the pool (as written in its pool headers).
    pub index: u32,
    /// Token of the owning thread (or one of the `OWNER_*` values).
    pub owner: AtomicU64,
    /// Statistics counters, written by the owner only.
    pub counters: Counters,
    /// The state machine, used only by the owner.
    pub state: UnsafeCell<HeapState>,
    /// Blocks freed by other threads, and how many of each class wait there.
    pub remote: Padded<Remote>,
}

/// A heap's remote list: blocks other threads freed into it, which its owner frees later.
pub(crate) struct Remote {
    /// The blocks, a Treiber stack linked through their first word.
    pub head: AtomicPtr<u8>,
    /// How many blocks of each size class wait on the list, counted before a block is pushed
    /// and uncounted before it is freed, so that statistics can leave out blocks their program
    /// freed (a user trial: blocks a joined scoped thread had allocated, freed by the thread
    /// that joined it, were counted in use until that thread's teardown ended, in one run of
    /// ten, doubling the bytes in use read right after the join).
    pub waiting: [AtomicU64; MAX_CLASSES],
}

impl Heap {
    pub const fn new(index: u32, owner: u64) -> Heap {
        Heap {
            index,
            owner: AtomicU64::new(owner),
            counters: Counters::new(),
            state: UnsafeCell::new(HeapState::new(index)),
            remote: Padded(Remote {
                head: AtomicPtr::new(std::ptr::null_mut()),
                waiting: [const { AtomicU64::new(0) }; MAX_CLASSES],
            }),
        }
    }

    /// Frees the blocks other threads pushed on the remote list, through `src` (the heap's pool,
    /// or a source with its geometry).
    ///
    /// # Safety
    /// The caller has exclusive access to the heap (it owns it or holds its lock).
    #[inline]
    pub unsafe fn drain(&self, src: &dyn ArenaSource) {
        let remote = &self.remote.0;
        if remote.head.load(Ordering::Relaxed).is_null() {
            return;
        }
        let mut p = remote.head.swap(std::ptr::null_mut(), Ordering::Acquire);
        while !p.is_null() {
            // SAFETY: blocks on the remote list are blocks of this heap given up by their
            // freeing thread, linked through their first word, each in a live pool until freed
            // here; we have exclusive access.
            unsafe {
                let next = *(p as *mut *mut u8);
                let class = HeapState::block_class(src.geo(), p) & (MAX_CLASSES - 1);
                remote.waiting[class].fetch_sub(1, Ordering::Relaxed);
                // A reader that sees the block freed (the counters are loaded with `Acquire`)
                // sees it no longer waiting (`Core::counters`).
                fence(Ordering::Release);
                (*self.state.get()).free(src, &self.counters, p);
                p = next;
            }
        }
    }

    /// Pushes the block `p`, of size class `class`, on the remote-free list.
    ///
    /// # Safety
    /// `p` is a block in use of this heap, at least pointer-sized and aligned, and the caller
    /// gives up all access to it.
    pub unsafe fn push_remote(&self, p: *mut u8, class: usize) {
        let remote = &self.remote.0;
        // Counted before the push, so the owner, which uncounts a block after taking it off the
        // list, never takes the count below zero. (A fork between the two leaves the child one
        // block counted as waiting that is on no list, as it leaves the block itself: the
        // pushing thread is not in the child.)
        remote.waiting[class & (MAX_CLASSES - 1)].fetch_add(1, Ordering::Relaxed);
        let mut head = remote.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `p` is owned by the caller until the CAS below publishes it.
            unsafe { (p as *mut *mut u8).write(head) };
            match remote
                .head
                .compare_exchange_weak(head, p, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }
}

/// Whether `token` belongs to a thread that has exited (or whose record was recycled).
pub(crate) fn is_stale(token: u64) -> bool {
    if token >> 32 == 0 {
        return token == OWNER_NONE;
    }
    let idx = (token >> 32) as usize - 1;
    match THREAD_RECORDS.get(idx) {
        None => true,
        Some(r) => {
            let v = r.load(Ordering::Acquire);
            v & 1 == 0 || v >> 1 != token & 0xffff_ffff
        }
    }
}

const TOKEN_UNSET: u64 = 0;
const TOKEN_BUSY: u64 = 1;
const TOKEN_DEAD: u64 = 2;
const CACHE: usize = 4;

struct Local {
    token: Cell<u64>,
    cache: [Cell<(u64, *const Heap)>; CACHE],
    /// The pool in which this thread last found no heap slot, and how many more operations it
    /// takes on the shared heap before looking through the slots again.
    no_heap: Cell<(u64, u32)>,
}

/// Operations a thread without a heap slot takes on the shared heap between two looks through
/// the slots (each look is a scan of every slot).
const NO_HEAP_RETRY: u32 = 1024;

/// Releases the thread's record when the thread exits.
struct RecordGuard(Cell<usize>);

impl Drop for RecordGuard {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(|l| {
            l.token.set(TOKEN_DEAD);
            for c in &l.cache {
                c.set((0, std::ptr::null()));
            }
        });
        if let Some(r) = THREAD_RECORDS.get(self.0.get()) {
            let v = r.load(Ordering::Relaxed);
            // Bump the generation and clear the used bit: every token of this thread is stale.
            r.store(
                (v & !1).wrapping_add(2) & ((1 << 33) - 1),
                Ordering::Release,
            );
        }
    }
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            token: Cell::new(TOKEN_UNSET),
            cache: [const { Cell::new((0, std::ptr::null())) }; CACHE],
            no_heap: Cell::new((0, 0)),
        }
    };
    static GUARD: RecordGuard = const { RecordGuard(Cell::new(usize::MAX)) };
}

/// The current thread's heap in the pool with id `uid`, if it is the cached one.
#[inline]
pub(crate) fn cached(uid: u64) -> Option<*const Heap> {
    LOCAL
        .try_with(|l| {
            let (u, h) = l.cache[0].get();
            (u == uid).then_some(h)
        })
        .ok()
        .flatten()
}

/// Looks `uid` up in the rest of the cache and moves a hit to the front.
pub(crate) fn cached_slow(uid: u64) -> Option<*const Heap> {
    LOCAL
        .try_with(|l| {
            let pos = l.cache.iter().position(|c| c.get().0 == uid)?;
            let hit = l.cache[pos].get();
            for i in (1..=pos).rev() {
                l.cache[i].set(l.cache[i - 1].get());
            }
            l.cache[0].set(hit);
            Some(hit.1)
        })
        .ok()
        .flatten()
}

/// Whether the thread found no heap slot in pool `uid` recently, so it should take the shared
/// heap without looking through the slots (counts one operation toward the next look).
pub(crate) fn skip_claim(uid: u64) -> bool {
    LOCAL
        .try_with(|l| match l.no_heap.get() {
            (u, left) if u == uid && left > 0 => {
                l.no_heap.set((u, left - 1));
                true
            }
            _ => false,
        })
        .unwrap_or(false)
}

/// Notes that the thread found no heap slot in pool `uid` (see `skip_claim`).
pub(crate) fn note_no_heap(uid: u64) {
    let _ = LOCAL.try_with(|l| l.no_heap.set((uid, NO_HEAP_RETRY)));
}

/// Puts `(uid, heap)` at the front of the cache.
pub(crate) fn remember(uid: u64, heap: *const Heap) {
    let _ = LOCAL.try_with(|l| {
        for i in (1..CACHE).rev() {
            l.cache[i].set(l.cache[i - 1].get());
        }
        l.cache[0].set((uid, heap));
    });
}

/// The current thread's owner token, claiming a record on first use; `None` while the thread
/// is being set up or torn down, or when every record is taken.
pub(crate) fn token() -> Option<u64> {
    LOCAL
        .try_with(|l| {
            let t = l.token.get();
            if t >> 32 != 0 {
                return Some(t);
            }
            if t != TOKEN_UNSET {
                return None;
            }
            // Registering GUARD's destructor may allocate on some platforms: nested calls see BUSY.
            l.token.set(TOKEN_BUSY);
            let claimed = THREAD_RECORDS.iter().enumerate().find_map(|(i, r)| {
                let v = r.load(Ordering::Relaxed);
                (v & 1 == 0
                    && r.compare_exchange(v, v | 1, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok())
                .then_some((i, v >> 1))
            });
            let Some((idx, generation)) = claimed else {
                l.token.set(TOKEN_DEAD);
                return None;
            };
            if GUARD.try_with(|g| g.0.set(idx)).is_err() {
                if let Some(r) = THREAD_RECORDS.get(idx) {
                    r.store(((generation + 1) << 1) & ((1 << 33) - 1), Ordering::Release);
                }
                l.token.set(TOKEN_DEAD);
                return None;
            }
            let t = ((idx as u64 + 1) << 32) | generation;
            l.token.set(t);
            Some(t)
        })
        .ok()
        .flatten()
}

/// Set by the fork handler while it takes the pools' locks (see `SpinLock::lock`).
pub(crate) static FORK_PENDING: AtomicBool = AtomicBool::new(false);

/// Threads about to take, or holding, a heap of an exited thread (`IdleHeap`). The fork handler
/// waits for none to hold one (`wait_for_idle_heaps`): a heap held at `OWNER_STATS` across the
/// fork could never be taken over in the child (a review: 22 of 300 children forked while other
/// threads freed into an exited thread's heap made a heap and an arena of their own instead).
static IDLE_HOLDERS: AtomicUsize = AtomicUsize::new(0);

/// Exclusive access to a heap whose owner has exited, taken by setting its owner to
/// `OWNER_STATS`, and given back when dropped.
pub(crate) struct IdleHeap<'a> {
    heap: &'a Heap,
    owner: u64,
}

impl<'a> IdleHeap<'a> {
    /// Takes `heap` if its owner has exited, no other thread holds it, and no fork is pending.
    pub(crate) fn take(heap: &'a Heap) -> Option<IdleHeap<'a>> {
        // Once a fork is pending, stand back before raising the count: a review measured forks of
        // 60 to 220 ms while six threads freed into an exited thread's heap, each raising it for
        // a moment only to find the flag.
        if FORK_PENDING.load(Ordering::Acquire) {
            return None;
        }
        let owner = heap.owner.load(Ordering::Acquire);
        if !is_stale(owner) {
            return None;
        }
        // Counted before the fork flag is read, and the fork handler sets the flag before it
        // reads the count (both sequentially consistent): either this thread sees the flag and
        // stands back, or the handler sees this thread and waits for it.
        IDLE_HOLDERS.fetch_add(1, Ordering::SeqCst);
        if FORK_PENDING.load(Ordering::SeqCst)
            || heap
                .owner
                .compare_exchange(owner, OWNER_STATS, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            IDLE_HOLDERS.fetch_sub(1, Ordering::Release);
            return None;
        }
        Some(IdleHeap { heap, owner })
    }

    /// The heap held.
    pub(crate) fn heap(&self) -> &'a Heap {
        self.heap
    }
}

impl Drop for IdleHeap<'_> {
    fn drop(&mut self) {
        self.heap.owner.store(self.owner, Ordering::Release);
        IDLE_HOLDERS.fetch_sub(1, Ordering::Release);
    }
}

/// In a forked child, whose only thread holds no idle heap: clears the count, which a thread of
/// the parent that read `FORK_PENDING` too late may have raised, to lower it after the fork (a
/// review: the child's own next fork then waited forever).
pub(crate) fn reset_idle_holders() {
    IDLE_HOLDERS.store(0, Ordering::Relaxed);
}

/// For the fork handler, once it has set `FORK_PENDING`: waits until no thread holds a heap of
/// an exited thread (each holds one for a drain and a free at most; none takes one meanwhile).
pub(crate) fn wait_for_idle_heaps() {
    let mut tries = 0u32;
    while IDLE_HOLDERS.load(Ordering::SeqCst) != 0 {
        tries = tries.saturating_add(1);
        SpinLock::back_off(tries);
    }
}

/// A spin lock for the shared heap, held only around one allocator operation.
pub(crate) struct SpinLock(AtomicBool);

impl SpinLock {
    pub const fn new() -> SpinLock {
        SpinLock(AtomicBool::new(false))
    }

    pub fn try_lock(&self) -> bool {
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the lock: spins briefly, then yields, then sleeps between tries. The holder keeps
    /// it for one allocator operation; sleeping lets the holder run even when it has a lower
    /// real-time priority than the waiter on the same CPU, which yielding does not. While a
    /// `fork()` waits for the pools' locks (`lock_for_fork`), other threads stand back, so busy
    /// threads cannot keep the forking one waiting.
    pub fn lock(&self) {
        let mut tries = 0u32;
        while FORK_PENDING.load(Ordering::Acquire) || !self.try_lock() {
            tries = tries.saturating_add(1);
            Self::back_off(tries);
        }
    }

    /// `lock` for the fork handler itself, which does not stand back for its own fork.
    pub fn lock_for_fork(&self) {
        let mut tries = 0u32;
        while !self.try_lock() {
            tries = tries.saturating_add(1);
            Self::back_off(tries);
        }
    }

    /// Waits a little before try number `tries`: spins, then yields, then sleeps.
    pub(crate) fn back_off(tries: u32) {
        if tries < 64 {
            std::hint::spin_loop();
        } else if tries < 128 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    pub fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}
