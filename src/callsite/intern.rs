//! Interning of captured stacks: stack of return addresses → [`SiteId`].
//!
//! Runs inside the global allocator, so: no lock (a `fork()` can never inherit one held), no
//! allocation through the global allocator (storage is one anonymous `mmap`, reserved lazily and
//! committed page by page by the kernel as it is touched), no panic.
//!
//! Layout: an open-addressing hash table of `SLOTS` slots (64-bit stack hash + id), a table of
//! `MAX_SITES` entries (offset and length of each stack) and an append-only arena of return
//! addresses. A lookup of a known stack is a hash, usually one slot probe, and one comparison.
//! Insertion claims a slot by compare-and-swap of its hash from 0, then publishes the id with a
//! release store once the stack is written; a reader that finds the hash but not yet the id spins
//! briefly, then moves on (at worst one stack gets two ids, never a wrong one). When the table or
//! the arena is full, `OVERFLOW` is returned.

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Identifier of an interned stack. `0` means "no site"; `OVERFLOW` stands for every stack
/// that arrived after the table was full.
pub type SiteId = u32;

/// "No site": never returned by [`intern`].
pub(crate) const NO_SITE: SiteId = 0;

/// The id of every stack that could not be stored because the table or the arena is full: the
/// one after the last id a stack can get, so that its blocks are counted at a site like any other.
pub(crate) const OVERFLOW: SiteId = MAX_SITES as SiteId + 1;

/// The largest id `intern` returns.
pub(crate) const LAST_SITE: SiteId = OVERFLOW;

/// Hash-table slots (a power of two); kept at most half full.
const SLOTS: usize = 1 << 17;
/// Distinct stacks stored; ids run from 1 to `MAX_SITES`.
const MAX_SITES: usize = SLOTS / 2;
/// Return addresses stored in total (an average of 32 per stack).
const ARENA_WORDS: usize = MAX_SITES * 32;
/// The bit of an entry that says its stack filled the depth it was captured with (see
/// [`intern_captured`]); lengths are at most a capture's 64 words.
const CUT: u64 = 1 << 31;
/// Spins waiting for a concurrent insert to publish its id before giving up on that slot.
const PUBLISH_SPINS: u32 = 1 << 12;

#[repr(C)]
struct Slot {
    /// Hash of the stack, 0 = empty.
    hash: AtomicU64,
    /// Id of the stack, 0 = claimed but not yet published.
    id: AtomicU32,
}

#[repr(C)]
struct Storage {
    slots: [Slot; SLOTS],
    /// `entries[id]` = `offset << 32 | len` into `arena`, with `CUT` set when the capture that
    /// stored the stack was cut by its depth; index 0 unused.
    entries: [AtomicU64; MAX_SITES + 1],
    arena: [AtomicUsize; ARENA_WORDS],
}

static STORAGE: AtomicPtr<Storage> = AtomicPtr::new(std::ptr::null_mut());
/// The next id to hand out.
static NEXT_ID: AtomicU32 = AtomicU32::new(1);
/// The next free word of the arena.
static ARENA_TOP: AtomicUsize = AtomicUsize::new(0);

/// The storage, mapped on first use; `None` if the mapping failed.
fn storage() -> Option<&'static Storage> {
    let mut ptr = STORAGE.load(Ordering::Acquire);
    if ptr.is_null() {
        ptr = map_storage();
    }
    // SAFETY: a non-null `STORAGE` points to a mapping of `size_of::<Storage>()` bytes that is
    // never unmapped. All-zero bytes are a valid `Storage` (atomics of 0), which is what a fresh
    // anonymous mapping holds, and every field is only accessed through atomics.
    unsafe { ptr.as_ref() }
}

#[cold]
fn map_storage() -> *mut Storage {
    let size = std::mem::size_of::<Storage>();
    // SAFETY: an anonymous private mapping with no fixed address; the result is checked for
    // MAP_FAILED before use.
    let fresh = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if fresh == libc::MAP_FAILED {
        return std::ptr::null_mut();
    }
    let fresh = fresh.cast::<Storage>();
    match STORAGE.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => fresh,
        Err(winner) => {
            // SAFETY: `fresh` is the mapping made above, of `size` bytes, never published.
            unsafe {
                libc::munmap(fresh.cast(), size);
            }
            winner
        }
    }
}

/// Initial state of the stack hash (see `hash_step`).
pub(crate) const HASH_SEED: u64 = 0x243F_6A88_85A3_08D3;

/// Folds one return address into a stack hash. Split out so `capture` can hash while it walks:
/// the multiply chain then runs in the shadow of the walk's dependent loads.
#[inline(always)]
pub(crate) fn hash_step(h: u64, word: usize) -> u64 {
    (h.rotate_left(5) ^ word as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Finishes a stack hash of `len` words: mixes all bits down, never 0.
#[inline(always)]
pub(crate) fn hash_finish(h: u64, len: usize) -> u64 {
    let mut h = h ^ (len as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93);
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 32;
    h.max(1)
}

/// 64-bit hash of a stack (never 0); what `intern_hashed` expects.
#[inline]
pub(crate) fn hash_stack(stack: &[usize]) -> u64 {
    let h = stack.iter().fold(HASH_SEED, |h, &word| hash_step(h, word));
    hash_finish(h, stack.len())
}

/// The stored stack of `id`, if `id` is published.
fn stored(storage: &'static Storage, id: SiteId) -> Option<&'static [usize]> {
    let entry = storage.entries.get(id as usize)?.load(Ordering::Acquire);
    let offset = (entry >> 32) as usize;
    let len = (entry & (CUT - 1)) as usize;
    let words = storage.arena.get(offset..offset.checked_add(len)?)?;
    // SAFETY: `AtomicUsize` has the same size and alignment as `usize`. The words of a published
    // entry were written before the id's release store (read here after an acquire load) and are
    // never written again, so reading them as plain `usize` races with nothing.
    Some(unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<usize>(), words.len()) })
}

/// Interns `stack`, returning its id: the same stack always gets the same id (except in the rare
/// case described in the module docs), different stacks different ids. Lock-free, never
/// allocates, never panics; `OVERFLOW` once the table is full.
#[inline]
pub fn intern(stack: &[usize]) -> SiteId {
    intern_hashed(stack, hash_stack(stack))
}

/// [`intern`] with the stack's hash already computed (by `capture_hashed`); `hash` must be
/// `hash_stack(stack)`, or stacks get split or mixed up.
#[inline]
pub fn intern_hashed(stack: &[usize], hash: u64) -> SiteId {
    intern_captured(stack, hash, false)
}

/// [`intern_hashed`] for a capture's stack; `cut` says that it filled the depth it was captured
/// with, so that frames further out may be missing (see [`was_cut`]). That is recorded when the
/// stack is first stored: a stack met again keeps what was recorded then, which can differ only
/// for a stack exactly as deep as one capture's depth and shorter than another's, complete either
/// way.
#[inline]
pub(crate) fn intern_captured(stack: &[usize], hash: u64, cut: bool) -> SiteId {
    let Some(storage) = storage() else {
        return OVERFLOW;
    };
    let mask = SLOTS - 1;
    let mut index = hash as usize & mask;
    for _ in 0..SLOTS {
        let Some(slot) = storage.slots.get(index) else {
            return OVERFLOW;
        };
        let mut seen = slot.hash.load(Ordering::Acquire);
        if seen == 0 {
            if NEXT_ID.load(Ordering::Relaxed) as usize > MAX_SITES {
                // Full: claiming slots for stacks that get no id would only lengthen probes.
                return OVERFLOW;
            }
            match slot
                .hash
                .compare_exchange(0, hash, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return insert(storage, slot, stack, cut),
                Err(other) => seen = other,
            }
        }
        if seen == hash {
            if let Some(id) = wait_for_id(slot) {
                if id == OVERFLOW || stored(storage, id) == Some(stack) {
                    return id;
                }
            }
        }
        index = (index + 1) & mask;
    }
    OVERFLOW
}

/// The slot's id once published, or `None` if it is not published within `PUBLISH_SPINS` spins
/// (its writer was descheduled or lost in a `fork()`).
#[inline]
fn wait_for_id(slot: &Slot) -> Option<SiteId> {
    for _ in 0..PUBLISH_SPINS {
        let id = slot.id.load(Ordering::Acquire);
        if id != 0 {
            return Some(id);
        }
        std::hint::spin_loop();
    }
    None
}

/// Stores `stack` under a fresh id and publishes it in `slot`, whose hash this thread claimed.
#[cold]
fn insert(storage: &'static Storage, slot: &Slot, stack: &[usize], cut: bool) -> SiteId {
    let id = allocate_and_write(storage, stack, cut).unwrap_or(OVERFLOW);
    slot.id.store(id, Ordering::Release);
    id
}

fn allocate_and_write(storage: &'static Storage, stack: &[usize], cut: bool) -> Option<SiteId> {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    if id as usize > MAX_SITES {
        // Keep the counter from wrapping around to valid ids.
        NEXT_ID.store(MAX_SITES as u32 + 1, Ordering::Relaxed);
        return None;
    }
    let len = stack.len();
    if len as u64 >= CUT {
        return None;
    }
    let offset = ARENA_TOP.fetch_add(len, Ordering::Relaxed);
    let end = offset.checked_add(len)?;
    let words = storage.arena.get(offset..end)?;
    for (word, &addr) in words.iter().zip(stack) {
        word.store(addr, Ordering::Relaxed);
    }
    let cut = if cut { CUT } else { 0 };
    let entry = ((offset as u64) << 32) | cut | len as u64;
    storage
        .entries
        .get(id as usize)?
        .store(entry, Ordering::Release);
    Some(id)
}

/// The stack interned as `id`; empty for `NO_SITE`, `OVERFLOW` and unknown ids.
pub(crate) fn stack(id: SiteId) -> &'static [usize] {
    if id == NO_SITE || id == OVERFLOW {
        return &[];
    }
    storage().and_then(|s| stored(s, id)).unwrap_or(&[])
}

/// Whether the stack interned as `id` filled the depth of the capture that stored it (see
/// [`intern_captured`]): the thread's stack may go on beyond its last frame.
pub(crate) fn was_cut(id: SiteId) -> bool {
    if id == NO_SITE || id == OVERFLOW {
        return false;
    }
    storage()
        .and_then(|s| s.entries.get(id as usize))
        .is_some_and(|e| e.load(Ordering::Acquire) & CUT != 0)
}

/// How many distinct stacks have been interned (not counting `OVERFLOW`).
#[cfg(test)]
fn site_count() -> u32 {
    NEXT_ID
        .load(Ordering::Relaxed)
        .saturating_sub(1)
        .min(MAX_SITES as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The table is process-global and shared by all tests: each test uses stacks of addresses
    // no other test uses.

    #[test]
    fn same_stack_interns_to_the_same_id() {
        let addrs = [0x1000_0001, 0x1000_0002, 0x1000_0003];
        let a = intern(&addrs);
        let copy = addrs;
        let b = intern(&copy);
        assert_eq!(a, b);
        assert_ne!(a, NO_SITE);
        assert_ne!(a, OVERFLOW);
    }

    #[test]
    fn different_stacks_intern_to_different_ids() {
        let a = intern(&[0x2000_0001, 0x2000_0002]);
        let b = intern(&[0x2000_0001, 0x2000_0003]);
        let c = intern(&[0x2000_0001]);
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(b, c);
    }

    #[test]
    fn stack_returns_what_was_interned() {
        let addrs = [0x3000_0001, 0x3000_0002, 0x3000_0003, 0x3000_0004];
        let id = intern(&addrs);
        assert_eq!(stack(id), &addrs);
    }

    #[test]
    fn the_empty_stack_is_a_site_too() {
        let id = intern(&[]);
        assert_ne!(id, OVERFLOW);
        assert_eq!(intern(&[]), id);
        assert!(stack(id).is_empty());
    }

    #[test]
    fn unknown_and_reserved_ids_have_empty_stacks() {
        assert!(stack(NO_SITE).is_empty());
        assert!(stack(OVERFLOW).is_empty());
        assert!(stack(OVERFLOW - 1).is_empty());
    }

    #[test]
    fn site_count_grows_with_new_stacks_only() {
        let before = site_count();
        let id = intern(&[0x4000_0001, 0x4000_0002]);
        let _ = intern(&[0x4000_0001, 0x4000_0002]);
        assert!(site_count() > before);
        assert!(site_count() >= id);
    }

    #[test]
    fn concurrent_interning_of_one_stack_agrees_on_its_id() {
        let addrs: Vec<usize> = (0..20).map(|i| 0x5000_0000 + i).collect();
        let ids: Vec<SiteId> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4).map(|_| s.spawn(|| intern(&addrs))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|&id| id == ids[0]), "{ids:?}");
    }

    #[test]
    fn colliding_slots_keep_stacks_apart() {
        // Many stacks: some share a starting slot, probing must still tell them apart.
        let ids: Vec<SiteId> = (0..2000usize).map(|i| intern(&[0x6000_0000, i])).collect();
        for (i, &id) in ids.iter().enumerate() {
            assert_eq!(stack(id), &[0x6000_0000, i]);
        }
    }

    #[test]
    fn hash_is_never_zero() {
        assert_ne!(hash_stack(&[]), 0);
        assert_ne!(hash_stack(&[0]), 0);
    }
}
