//! A thread's capture buffer: the stack being captured, and the last few distinct stacks it
//! captured with their site ids.
//!
//! Most allocations come from a handful of places that take turns (a loop body allocating a node,
//! its name and its payload), so a new capture usually equals one of the thread's recent stacks.
//! Two things make that cheap:
//!
//! - **Replay.** For a recent stack that repeats, the buffer keeps the addresses of the frame
//!   records the walk read and the two words read at each. It guesses which recent stack comes
//!   next (the one that followed the last stack the previous two times) and checks, with loads that
//!   do not wait on one another, that every one of those records still holds what the walk read
//!   there ([`same_chain`]). If so, a walk would return that very stack, and its id is reused
//!   without walking: the walk's loads each wait for the one before, so it costs several times as
//!   much. When the guess is wrong (or was never sure: places taking no turns), the recent stacks
//!   that start at the same frame and whose first return addresses (four, `key_of`) are the ones
//!   found there now are checked the same way ([`StackBuffer::replay`]), so allocations from many places in no order
//!   are replayed too.
//! - **Recent stacks.** Otherwise the stack is walked, and looked up among the recent stacks of its
//!   set (up to 128 in all, sixteen to a set; the set is picked by where the walk started and the
//!   first return addresses it read, as for a replay) by 32 bits of its hash (all compared at once)
//!   and a compare of every word, before the shared intern table, which costs three dependent loads
//!   into a large table and a compare (about 15 ns). A stack found in neither takes the place of
//!   the oldest one of its set.
//!
//! Matches are exact either way: a site id is only reused for a stack equal to its own in every
//! word.
//!
//! Runs inside the global allocator (with heapdelta's guard set): no lock, no panic, and no
//! allocation but the buffer itself, mapped on a thread's first capture, and its memo of walks.

#[cfg(doc)]
use super::capture::frame_register_here;
use super::capture::{
    capture_recorded, frame_record_readable, leading_returns, same_chain, still_chain_end,
    FrameWords, InMemo, Memo, UnwindStart, FROM_REGS,
};
#[cfg(test)]
use super::capture::{start_here, unwind_start_here};
use super::intern::{intern_captured, SiteId};
use crate::stats::SiteCnt;
use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Capture buffers in use (one per thread that captured a site and has not exited).
static LIVE_BUFFERS: AtomicUsize = AtomicUsize::new(0);

/// Buffers of threads that exited, kept for the next threads to start capturing: a program that
/// starts a thread per task maps and unmaps no buffer per thread (a user trial's 20,000 threads:
/// an `mmap` and a `munmap` each, and the unmaps' TLB shootdowns). At most this many are kept
/// (200 KiB of address space each, of which only the pages their threads touched are resident);
/// a buffer given back when all are taken is unmapped.
const SPARES: usize = 32;

/// The kept buffers (null: none in that place). A buffer is taken by swapping null into its
/// place and given back by swapping itself into a null place, so each is owned by one thread or
/// by one place at a time.
static SPARE: [AtomicPtr<StackBuffer>; SPARES] =
    [const { AtomicPtr::new(ptr::null_mut()) }; SPARES];

/// How many threads' capture buffers are in use now.
pub fn live_buffers() -> usize {
    LIVE_BUFFERS.load(Ordering::Relaxed)
}

/// Buffers mapped so far (a thread that takes a kept one maps none).
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// How many capture buffers were mapped so far.
pub fn mapped_buffers() -> usize {
    MAPPED.load(Ordering::Relaxed)
}

/// Most return addresses a capture keeps.
pub(crate) const STACK_WORDS: usize = 64;

/// Entries of a set: a stack is kept in one of the `WAYS` entries of the set its walk's start and
/// first return addresses pick (`set_of`), and looked up among those only, compared all at once.
const WAYS: usize = 16;
const _: () = assert!(WAYS <= 32, "`matching` gathers a set's matches in a u32");
/// Sets of `WAYS` entries.
const SETS: usize = 8;
/// Distinct recent stacks remembered per thread: as many hot places as a program allocates from
/// in a loop, in turn (then replayed) or in no order (then found by where their walk starts,
/// `replay_keyed`, or their tags, `entry_of`), as long as no set has more than `WAYS` of them.
const RECENT: usize = SETS * WAYS;

/// The set of the stacks whose walk starts with `key` (`key_of`): its high bits, taken by a
/// multiply, so that any `SETS` gives a set below it.
fn set_of(key: u32) -> usize {
    ((u64::from(key) * SETS as u64) >> 32) as usize
}

/// Entry `i`'s value in `column` (`tags` or `keys`); `None` for no entry.
fn cell(column: &mut [[u32; WAYS]; SETS], i: usize) -> Option<&mut u32> {
    column.get_mut(i / WAYS)?.get_mut(i % WAYS)
}

/// The part of a stack's `intern::hash_stack` that `StackBuffer::tags` keeps: never 0, the tag
/// of an empty entry. Thirty-two bits, which a compare of four at once covers.
fn tag_of(hash: u64) -> u32 {
    (hash >> 32) as u32 | 1
}

/// Return addresses a stack's key (`key_of`) is made of, at most.
const KEY_FRAMES: usize = 4;

/// The key `StackBuffer::keys` keeps for a replayable entry: 32 bits mixed from the frame record
/// its walk started at and the first `KEY_FRAMES` return addresses it read (`leading`; fewer when
/// the stack has fewer). Never 0, the key of an entry that is not replayable.
///
/// One return address was not enough: a program reaches its global allocator through one function
/// (`__rust_alloc`), and most of its growable collections through a few more (`finish_grow`,
/// `grow_one`), so its places share the first ones. Keyed by the first alone, sixty-four places in
/// no order called through one function all fell in one set, which holds sixteen.
fn key_of(start: usize, leading: &[usize]) -> u32 {
    let mut mixed = start.rotate_left(29) as u64;
    for &ret in leading.iter().take(KEY_FRAMES) {
        // Two rounds: after one, places whose return addresses lie a Fibonacci number of bytes
        // apart (functions of 144 bytes in a row) shared their high bits, and so their set
        // (`set_of`).
        mixed = (mixed ^ ret as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        mixed ^= mixed >> 32;
    }
    (mixed.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 32) as u32 | 1
}

/// The entries of a set whose value in `column` is `value`, as a mask (bit `i`: the set's entry
/// `i`), built without a branch: the compiler compares four values at once (32-bit ones: the
/// baseline x86_64 target has no vector compare of 64-bit words, and columns of them were
/// compared one by one, which cost sixteen sites in no order 0.45x `System`).
#[inline(always)]
fn matching(column: &[u32; WAYS], value: u32) -> u32 {
    column
        .iter()
        .enumerate()
        .fold(0u32, |m, (i, &v)| m | u32::from(v == value) << i)
}

/// The site of a stack `StackBuffer::replay` replayed.
pub(crate) struct Replayed<'a> {
    /// Its id (never 0: only a stack with a site id is replayable).
    pub(crate) id: SiteId,
    /// Where the buffer keeps the counters of that site in the slot of the thread that owns it
    /// (`None` until they are first looked up; see `Recent::counters`).
    pub(crate) counters: &'a mut Option<&'static SiteCnt>,
}

/// The bit of `Recent::replay_depth` that says a walk was trusted for where it ended.
const TRUSTED_END: usize = 1 << (usize::BITS - 1);

/// A recently captured stack and its site id (`id == 0`: the entry is empty).
struct Recent {
    n: usize,
    id: SiteId,
    /// The counters of `id` in the slot of the thread that owns the buffer, once a replay of
    /// this stack has looked them up there (see `replay`); `None` until then. Kept beside the id
    /// so that a replayed allocation counts at its site without looking its chunk up in the slot.
    counters: Option<&'static SiteCnt>,
    /// The depth the walk that last captured this stack was asked for, when `records` and the
    /// saved frame pointers in `frames` are that walk's and the stack has a site id (see
    /// `same_chain`), with `TRUSTED_END` set when the walk was trusted only for ending at
    /// `trusted_end`; 0 otherwise: the entry is not replayable (a capture of depth 0 walks
    /// nothing). One field, so that `replays` checks all four with one compare when the walk was
    /// complete on its own.
    replay_depth: usize,
    /// The chain end that walk was trusted for (0: it was complete on its own).
    trusted_end: usize,
    /// Per frame, the saved frame pointer read from its frame record and the return address: the
    /// second words are the stack (`frames[..n]`).
    frames: [FrameWords; STACK_WORDS],
    /// The addresses of the frame records (`records[..n]`).
    records: [usize; STACK_WORDS],
}

/// A thread's capture buffer, about 200 KiB (1,584 bytes per recent stack), allocated on the
/// thread's first capture (`allocate`); its pages are touched as its entries are first used.
pub(crate) struct StackBuffer {
    /// Return addresses of the capture in progress.
    words: [usize; STACK_WORDS],
    /// The frame records they were read from (see `capture_recorded`).
    records: [usize; STACK_WORDS + 1],
    recent: [Recent; RECENT],
    /// Each entry's `tag_of` its stack's hash (0: the entry is empty), apart from the entries so
    /// that a lookup compares them all in a few instructions and reads only the entries that
    /// match, where reading every entry cost a cache line each.
    tags: [[u32; WAYS]; SETS],
    /// Each replayable entry's `key_of` where its walk started and the first return addresses it
    /// read (0: not replayable), for `replay_keyed`, kept apart from the entries as `tags` is.
    keys: [[u32; WAYS]; SETS],
    /// For each set, its entry (`0..WAYS`) the next new stack of the set replaces.
    next: [usize; SETS],
    /// The entry of `recent` holding the last captured stack (`RECENT`: none yet).
    current: usize,
    /// For each entry, the entry whose stack was captured right after it the last time (`RECENT`:
    /// none): the guess that `replay` checks.
    after: [usize; RECENT],
    /// For each entry, the entry that followed it the last two times, or `RECENT` when those
    /// differed (or are not known): `replay` only checks a guess that held before, so allocations
    /// from places in no particular order do not pay for checks that fail. The guess itself, not
    /// a flag beside `after`, so that `replay` reads one word.
    guess: [usize; RECENT],
    /// Without frame pointers, the unwinder's last walks: allocated on the first capture that
    /// uses them (about 56 KiB), null until then or when the system allocator fails.
    memo: *mut Memo,
}

impl StackBuffer {
    /// An empty buffer.
    #[cfg(test)]
    pub(crate) const fn new() -> StackBuffer {
        StackBuffer {
            words: [0; STACK_WORDS],
            records: [0; STACK_WORDS + 1],
            recent: [const {
                Recent {
                    n: 0,
                    id: 0,
                    counters: None,
                    replay_depth: 0,
                    trusted_end: 0,
                    frames: [FrameWords([0; 2]); STACK_WORDS],
                    records: [0; STACK_WORDS],
                }
            }; RECENT],
            tags: [[0; WAYS]; SETS],
            keys: [[0; WAYS]; SETS],
            next: [0; SETS],
            current: RECENT,
            after: [RECENT; RECENT],
            guess: [RECENT; RECENT],
            memo: ptr::null_mut(),
        }
    }

    /// A buffer for a thread: one an exited thread gave back, emptied of what was its thread's
    /// own (`forget_thread`), else a new one (`map`); null when that fails. Give it back with
    /// `free`.
    pub(crate) fn allocate() -> *mut StackBuffer {
        let kept = SPARE
            .iter()
            .filter(|place| !place.load(Ordering::Relaxed).is_null())
            .map(|place| place.swap(ptr::null_mut(), Ordering::Acquire))
            .find(|taken| !taken.is_null());
        let Some(buffer) = kept else {
            return Self::map();
        };
        // SAFETY: taken from its place by the swap, so this thread alone has it: a buffer `free`
        // put there, from `allocate`, which no thread uses any more.
        unsafe { (*buffer).forget_thread() };
        LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
        buffer
    }

    /// A new, empty buffer, mapped (heapdelta runs inside the global allocator, which it must not
    /// call), or null when that fails.
    fn map() -> *mut StackBuffer {
        let size = std::mem::size_of::<StackBuffer>();
        // A mapping of its own, whose pages read as zeros and are touched only as entries are
        // first used: `calloc` zeroes a block of reused heap memory in full, 200 KiB for every
        // thread a program starts. (A buffer built as a value would also take that much of the
        // thread's stack, twice over in a debug build, inside the allocator.)
        // SAFETY: an anonymous private mapping at no fixed address, checked for MAP_FAILED
        // before use.
        let fresh = unsafe {
            libc::mmap(
                ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if fresh == libc::MAP_FAILED {
            return ptr::null_mut();
        }
        let buffer = fresh.cast::<StackBuffer>();
        // SAFETY: `buffer` is a fresh zeroed mapping of the buffer's size, page-aligned (above
        // the buffer's alignment); every field is valid as zero bytes (integers, arrays of them,
        // a null pointer, `None` references), and the three written here are written through
        // raw pointers, without a reference to the whole.
        unsafe {
            ptr::addr_of_mut!((*buffer).current).write(RECENT);
            ptr::addr_of_mut!((*buffer).after).write([RECENT; RECENT]);
            ptr::addr_of_mut!((*buffer).guess).write([RECENT; RECENT]);
        }
        LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
        MAPPED.fetch_add(1, Ordering::Relaxed);
        buffer
    }

    /// Gives back a buffer from `allocate` (null: nothing to do), its memo of unwinder walks
    /// freed: kept for another thread when a place is free, else unmapped.
    ///
    /// # Safety
    /// `buffer` must be null or come from `allocate`, and not be used afterwards.
    pub(crate) unsafe fn free(buffer: *mut StackBuffer) {
        if buffer.is_null() {
            return;
        }
        LIVE_BUFFERS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: the caller's contract: the buffer is from `allocate` and no longer used, so
        // this thread alone refers to it; its memo, if any, came from `System` with the memo's
        // layout (`memo`).
        unsafe {
            let memo = std::mem::replace(&mut (*buffer).memo, ptr::null_mut());
            if !memo.is_null() {
                System.dealloc(memo.cast(), Layout::new::<Memo>());
            }
        }
        let kept = SPARE.iter().any(|place| {
            place
                .compare_exchange(
                    ptr::null_mut(),
                    buffer,
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
        });
        if !kept {
            // SAFETY: the caller's contract: `allocate` mapped it, of the buffer's size.
            unsafe { libc::munmap(buffer.cast(), std::mem::size_of::<StackBuffer>()) };
        }
    }

    /// Empties a buffer another thread used of what held only there: the frame records its walks
    /// read, which lie in that thread's stack (no entry is replayable until this thread's own
    /// walk records them again: `replays` checks `replay_depth` before any record, and the guesses
    /// and keys left lead only there), and its counters in that thread's slot (its memo of
    /// unwinder walks, which held addresses in that stack too, was freed when the buffer was
    /// given back). The stacks and their site ids stay: they are the same in every thread
    /// (return addresses, and ids from the shared table), and a thread running the code its
    /// predecessor ran finds its stacks there. Touches only the entries in use, whose pages the
    /// thread before touched.
    fn forget_thread(&mut self) {
        for (set, tags) in self.tags.iter().enumerate() {
            for (way, &tag) in tags.iter().enumerate() {
                if let (true, Some(r)) = (tag != 0, self.recent.get_mut(set * WAYS + way)) {
                    r.counters = None;
                    r.replay_depth = 0;
                }
            }
        }
    }

    /// Captures the calling thread's stack (at most `depth` frames) from `start`, the value of
    /// `start_here` in the function the capture is made for (the
    /// first address lies in its caller), and returns its site id. Out of line: the walk starts
    /// from `start` wherever it runs, and the function the replay is inlined into stays small.
    /// Without frame pointers (`start` 0), the unwinder walks from `unwind`, the
    /// [`UnwindStart`](super::capture::UnwindStart) of that function, when given.
    #[inline(never)]
    pub(crate) fn capture_site(
        &mut self,
        start: usize,
        depth: usize,
        unwind: Option<&UnwindStart>,
    ) -> SiteId {
        let asked = depth;
        let depth = depth.min(STACK_WORDS);
        let (Some(out), Some(records)) =
            (self.words.get_mut(..depth), self.records.get_mut(..=depth))
        else {
            return 0;
        };
        // Without frame pointers (`start` 0), the unwinder makes the capture, from `unwind`.
        let memo = if start == 0 && depth > 0 && unwind.is_some() {
            Self::memo(&mut self.memo)
        } else {
            None
        };
        let c = capture_recorded(start, out, records, unwind, memo);
        if let InMemo::Named(site) = c.memo {
            return site;
        }
        // The set a walk from `start` that read these return addresses first looks in: a
        // replayable entry's key is this one (its walk's first record is `start`).
        let key = key_of(start, self.words.get(..c.n).unwrap_or_default());
        let (i, seen) = self.entry_of(c.n, c.hash, c.n == depth && depth > 0, key);
        // A stack is made replayable when it comes again, whether after the same stack as the time
        // before (then the guess finds it) or not (then `replay_keyed` does): copying the records
        // of a stack that never comes back (a program allocating from more places than there are
        // entries) would only cost.
        if let (true, Some(r), Some(new_key)) =
            (seen, self.recent.get_mut(i), cell(&mut self.keys, i))
        {
            // (No depth has the `TRUSTED_END` bit: they are at most `MAX_DEPTH`, which the
            // tracker and `HEAPDELTA` clamp to; a larger one is never replayed.)
            let replayable = c.recorded && c.n > 0 && r.id != 0 && asked & TRUSTED_END == 0;
            r.replay_depth = match (replayable, c.trusted_end) {
                (false, _) => 0,
                (true, 0) => asked,
                (true, _) => asked | TRUSTED_END,
            };
            r.trusted_end = c.trusted_end;
            *new_key = 0;
            if replayable {
                // Each record held the address of the next one; the last, where the walk stopped.
                let saved = self.records.iter().skip(1);
                for ((frame, record), (&at, &next)) in r
                    .frames
                    .iter_mut()
                    .zip(&mut r.records)
                    .zip(self.records.iter().zip(saved))
                    .take(c.n)
                {
                    frame.0[0] = next;
                    *record = at;
                }
                *new_key = key;
            }
        }
        let site = self.follow(i);
        if c.memo == InMemo::Unnamed {
            if let Some(memo) = Self::memo(&mut self.memo) {
                memo.name_last(site);
            }
        }
        site
    }

    /// A buffer's memo of unwinder walks (its `memo` field), allocated (zeroed: empty) from the
    /// system allocator on first use; `None` where there is none (the allocator failed, or other
    /// targets).
    fn memo(memo: &mut *mut Memo) -> Option<&mut Memo> {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        if memo.is_null() {
            // SAFETY: the memo's layout has a non-zero size; all zero bytes are an empty memo.
            *memo = unsafe { System.alloc_zeroed(Layout::new::<Memo>()) }.cast();
        }
        // SAFETY: a non-null `memo` is the buffer's own, from `System`, valid when zeroed, and
        // borrowed through the buffer's field only.
        unsafe { memo.as_mut() }
    }

    /// The site `capture_site(start, depth)` would return, without walking the stack, when the
    /// frame records of the recent stack guessed to come next show that a walk from `start`
    /// would read them again; `None` otherwise (then `replay_keyed` may find another one). Neither
    /// allocates nor calls out.
    ///
    /// `here` is the frame-pointer register of the function this is inlined into, read before it
    /// is known whether frame pointers are kept ([`frame_register_here`]): with frame pointers, the
    /// `start_here` there; without, any value, which no entry matches, since only a frame-pointer
    /// walk makes an entry replayable.
    #[inline(always)]
    pub(crate) fn replay(&mut self, here: usize, depth: usize) -> Option<Replayed<'_>> {
        // No guess (`RECENT`) is no entry.
        let &i = self.guess.get(self.current)?;
        if !self.replays(i, here, depth) {
            return None;
        }
        self.current = i;
        self.replayed(i)
    }

    /// `replay` when the guess does not hold: the replayable entries whose walk started at
    /// `start` and first read the return address found there now (`keys`), checked in full.
    /// Out of line: places taking turns never reach it, and the walk it spares costs more than
    /// the call. Neither allocates nor calls out.
    ///
    /// `start` must be the current `start_here` of the function `replay` is inlined into (this
    /// function's caller), never 0.
    #[inline(never)]
    pub(crate) fn replay_keyed(&mut self, start: usize, depth: usize) -> Option<Replayed<'_>> {
        // As a walk does before its first read: `start` must lie in the thread's stack (whose
        // bounds are known once a walk has run, as one has for any entry to be replayable).
        if !frame_record_readable(start) {
            return None;
        }
        let mut leading = [0; KEY_FRAMES];
        let n = leading_returns(start, &mut leading[..depth.min(KEY_FRAMES)]);
        let key = key_of(start, leading.get(..n).unwrap_or_default());
        let set = set_of(key);
        let mut found = self.keys.get(set).map_or(0, |keys| matching(keys, key));
        while found != 0 {
            let i = set * WAYS + found.trailing_zeros() as usize;
            found &= found - 1;
            if self.replays(i, start, depth) {
                self.follow(i);
                return self.replayed(i);
            }
        }
        None
    }

    /// Whether entry `i` is replayable from `start` at `depth` (the depth the capture is asked
    /// for) and its frame records show a walk from `start` would read them again (see
    /// `same_chain`).
    ///
    /// `start` must be the current `start_here` of the function `replay` is inlined into, or, in
    /// a thread whose walks cannot record frame records (no frame pointers), any value.
    #[inline(always)]
    fn replays(&self, i: usize, start: usize, depth: usize) -> bool {
        let Some(r) = self.recent.get(i) else {
            return false;
        };
        // A depth of 0 is that of the entries that are not replayable, whose records are stale:
        // nothing is replayed at it (no caller asks; the compare folds away where the depth is a
        // constant).
        if depth == 0 {
            return false;
        }
        // A replayable entry (`replay_depth` not 0, as `depth` is not) has at least one record,
        // and exists only where frame pointers are kept (only the frame-pointer walk records).
        if r.records[0] != start {
            return false;
        }
        if r.replay_depth != depth {
            // Unless the walk was trusted for where it ended, and that is still the thread's
            // known chain end (a thread-local read, after the cheaper compares).
            if r.replay_depth != depth | TRUSTED_END || !still_chain_end(r.trusted_end) {
                return false;
            }
        }
        let (Some(records), Some(frames)) = (r.records.get(..r.n), r.frames.get(..r.n)) else {
            return false;
        };
        // SAFETY: a replayable entry's records are frame records a walk read on this thread (the
        // buffer is thread-local), and the first is `start` (checked above), the frame record of
        // the function `replay` is inlined into, live while this runs (that function is this
        // one's caller, or this one's caller's): the walk read them in increasing order, so they
        // all lie between that frame and the top of the stack.
        unsafe { same_chain(records, frames) }
    }

    /// The site of entry `i`, which `replays` (`None` for no entry).
    #[inline(always)]
    fn replayed(&mut self, i: usize) -> Option<Replayed<'_>> {
        self.recent.get_mut(i).map(|r| Replayed {
            id: r.id,
            counters: &mut r.counters,
        })
    }

    /// Without frame pointers: the site id `capture_site(0, depth, Some(regs))` would return,
    /// without walking the stack, when the thread's memo says it is the stack of the walk guessed
    /// to come next, and names its site; `None` otherwise (then `capture_site` must run). Neither
    /// allocates nor calls out.
    #[inline(always)]
    pub(crate) fn replay_unwound(&mut self, regs: &UnwindStart, depth: usize) -> Option<SiteId> {
        // SAFETY: a non-null `memo` is the buffer's own, from `System`, valid when zeroed, and
        // borrowed only through `&mut self`.
        let memo = unsafe { self.memo.as_mut() }?;
        memo.named_site(regs, depth.min(STACK_WORDS), FROM_REGS)
    }

    /// Makes entry `i` the current one, remembering that it came after the previous one; returns
    /// its site id.
    fn follow(&mut self, i: usize) -> SiteId {
        if let (Some(after), Some(guess)) = (
            self.after.get_mut(self.current),
            self.guess.get_mut(self.current),
        ) {
            *guess = if *after == i { i } else { RECENT };
            *after = i;
        }
        self.current = i;
        self.recent.get(i).map_or(0, |r| r.id)
    }

    /// The entry of `recent` holding the stack in `words[..n]`, whose `intern::hash_stack` is
    /// `hash`, and whether it was there already, among the entries of the set of `key` (the
    /// `key_of` where the capture started and its first return addresses); otherwise a new entry
    /// of that set (replacing the set's oldest) with its id from the shared table, not
    /// replayable. `cut`: the stack filled the capture's depth (see `intern::intern_captured`).
    fn entry_of(&mut self, n: usize, hash: u64, cut: bool, key: u32) -> (usize, bool) {
        let stack = self.words.get(..n).unwrap_or(&[]);
        let set = set_of(key);
        // The set's entries whose tag matches, as a mask built without a branch (the compiler
        // compares four tags at once; an empty entry's 0 is no stack's tag), then their stacks.
        let mut matches = self
            .tags
            .get(set)
            .map_or(0, |tags| matching(tags, tag_of(hash)));
        while matches != 0 {
            let i = set * WAYS + matches.trailing_zeros() as usize;
            matches &= matches - 1;
            let same = self.recent.get(i).is_some_and(|r| {
                r.n == n
                    // Every word, without early exit: short stacks, and no call to `bcmp`.
                    && r.frames.iter().zip(stack).fold(0, |diff, (f, w)| diff | (f.0[1] ^ w)) == 0
            });
            if same {
                return (i, true);
            }
        }
        let id = intern_captured(stack, hash, cut);
        let Some(next) = self.next.get_mut(set) else {
            return (RECENT, false);
        };
        let i = set * WAYS + *next;
        *next = (*next + 1) % WAYS;
        if let (Some(t), Some(k)) = (cell(&mut self.tags, i), cell(&mut self.keys, i)) {
            *t = tag_of(hash);
            *k = 0;
        }
        if let Some(r) = self.recent.get_mut(i) {
            for (frame, &word) in r.frames.iter_mut().zip(stack) {
                frame.0[1] = word;
            }
            r.n = n;
            r.id = id;
            r.counters = None;
            r.replay_depth = 0;
        }
        // Until it is known what follows a new stack, the guess is that it repeats (a loop).
        if let (Some(after), Some(guess)) = (self.after.get_mut(i), self.guess.get_mut(i)) {
            *after = i;
            *guess = RECENT;
        }
        (i, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::capture::no_frame_records_to_test;
    use crate::callsite::intern::{hash_stack, intern};
    use std::hint::black_box;

    /// Puts `stack` in the buffer as a capture would and returns its site id.
    fn site_for(buf: &mut StackBuffer, stack: &[usize]) -> SiteId {
        buf.words[..stack.len()].copy_from_slice(stack);
        let (i, _) = buf.entry_of(stack.len(), hash_stack(stack), false, key_of(0, stack));
        buf.follow(i)
    }

    #[test]
    fn a_new_mapping_of_a_buffer_starts_as_an_empty_one() {
        let empty = StackBuffer::new();
        let buffer = StackBuffer::map();
        // SAFETY: a buffer from `map`, as `allocate` gives, read here and freed once.
        let fresh = unsafe { &*buffer };
        assert_eq!(
            (fresh.next, fresh.current, fresh.after, fresh.guess),
            (empty.next, empty.current, empty.after, empty.guess)
        );
        assert!(fresh
            .recent
            .iter()
            .all(|r| r.id == 0 && r.replay_depth == 0));
        // SAFETY: from `map`, as `allocate` gives, not used afterwards.
        unsafe { StackBuffer::free(buffer) };
    }

    #[test]
    fn stacks_taking_turns_keep_their_interned_ids() {
        let mut buf = StackBuffer::new();
        let stacks: Vec<Vec<usize>> = (0..3)
            .map(|i| vec![0x7100_0000 + i, 0x7100_1000, 0x7100_2000 + i])
            .collect();
        for _ in 0..3 {
            for s in &stacks {
                assert_eq!(site_for(&mut buf, s), intern(s));
            }
        }
    }

    #[test]
    fn a_recent_stack_is_reused_only_when_every_word_matches() {
        let mut buf = StackBuffer::new();
        let a = [0x7200_0001, 0x7200_0002];
        let b = [0x7200_0001, 0x7200_0003];
        let id_a = site_for(&mut buf, &a);
        // The same hash and length as `a`, other words: must not get `a`'s id.
        buf.words[..2].copy_from_slice(&b);
        let (i, seen) = buf.entry_of(2, hash_stack(&a), false, key_of(0, &b));
        assert!(!seen);
        assert_ne!(buf.follow(i), id_a);
    }

    #[test]
    fn nothing_is_replayed_at_depth_zero() {
        // The depth of the entries that are not replayable: an empty entry, whose first record
        // is 0, would otherwise match a start of 0 (a review).
        let buf = StackBuffer::new();
        assert!(!buf.replays(0, 0, 0));
    }

    #[test]
    fn a_start_outside_the_threads_stack_is_not_read() {
        // With the thread's bounds known, as after its first walk: the lookup by where a walk
        // starts must not read an address outside them (reading this one would fault).
        let _ = super::super::capture::stack_bounds();
        let mut buf = StackBuffer::new();
        assert_eq!(buf.replay_keyed(0x10, 32).map(|r| r.id), None);
    }

    #[test]
    fn a_stack_is_not_taken_for_an_empty_entry_whatever_its_hash() {
        let mut buf = StackBuffer::new();
        // A hash whose upper half is 0, as an empty entry's tag is: the empty stack of the same
        // length as the empty entries must still be looked up, not found there with no id.
        let (i, seen) = buf.entry_of(0, 5, false, key_of(0, &[]));
        assert!(!seen);
        assert_ne!(buf.follow(i), 0);
    }

    #[test]
    fn more_stacks_than_recent_entries_still_get_their_ids() {
        let mut buf = StackBuffer::new();
        let stacks: Vec<[usize; 1]> = (0..RECENT * 3).map(|i| [0x7300_0000 + i]).collect();
        for s in stacks.iter().chain(stacks.iter().rev()) {
            assert_eq!(site_for(&mut buf, s), intern(s));
        }
    }

    std::thread_local! {
        /// Set by a `Step::Deeper`: the next capture is made one frame further in.
        static DEEPER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// What a capture made here (or, after a `Step::Deeper`, in a function this one calls) gave:
    /// whether the stack was replayed, its site, and the stack a walk from the same frame finds.
    #[inline(never)]
    fn capture_in_leaf(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        if DEEPER.with(|deeper| deeper.replace(false)) {
            let r = capture_one_deeper(buf, depth);
            return black_box(r);
        }
        capture_from_here(buf, depth)
    }

    #[inline(never)]
    fn capture_one_deeper(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        let r = capture_from_here(buf, depth);
        black_box(r)
    }

    /// The body of `capture_in_leaf`, from the frame of the function it is inlined into.
    #[inline(always)]
    fn capture_from_here(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        let start = start_here();
        // As `State::capture_site` makes them, without frame pointers too.
        let mut unwind = UnwindStart::default();
        unwind_start_here(&mut unwind);
        let replayed = match start {
            0 => buf.replay_unwound(&unwind, depth),
            _ => buf
                .replay(start, depth)
                .map(|r| r.id)
                .or_else(|| buf.replay_keyed(start, depth).map(|r| r.id)),
        };
        let id = replayed.unwrap_or_else(|| buf.capture_site(start, depth, Some(&unwind)));
        let mut stack = vec![0; depth];
        let mut records = vec![0; depth + 1];
        let c = capture_recorded(start, &mut stack, &mut records, Some(&unwind), None);
        stack.truncate(c.n);
        (replayed.is_some(), black_box(id), stack)
    }

    #[inline(never)]
    fn first_caller(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        let r = capture_in_leaf(buf, depth);
        black_box(r)
    }

    #[inline(never)]
    fn second_caller(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        let r = capture_in_leaf(black_box(buf), depth);
        black_box(r)
    }

    type Caller = fn(&mut StackBuffer, usize) -> (bool, SiteId, Vec<usize>);

    /// What a step does before its capture.
    #[derive(Clone, Copy)]
    enum Step {
        Capture,
        /// Forget the thread's known chain end first.
        ForgetEnd,
        /// Capture one frame further in than the caller's leaf usually does.
        Deeper,
    }

    /// Captures from `callers` in turn (`depth` frames each), checking that every site is the one
    /// of the stack a walk finds; returns which captures were replayed.
    fn captures_match_walks(buf: &mut StackBuffer, callers: &[(Caller, usize)]) -> Vec<bool> {
        let steps: Vec<_> = callers
            .iter()
            .map(|&(c, d)| (c, d, Step::Capture))
            .collect();
        captures_in_steps(buf, &steps)
    }

    /// `captures_match_walks`, where a step may first do something else. One loop, out of line
    /// and over a slice of unknown length, so that every capture is made from the same place (an
    /// unrolled loop would give each its own stack).
    #[inline(never)]
    fn captures_in_steps(buf: &mut StackBuffer, steps: &[(Caller, usize, Step)]) -> Vec<bool> {
        let mut replayed = Vec::new();
        for &(caller, depth, step) in black_box(steps) {
            match step {
                Step::Capture => {}
                Step::ForgetEnd => super::super::capture::set_chain_end(0),
                Step::Deeper => DEEPER.with(|deeper| deeper.set(true)),
            }
            let (hit, id, stack) = caller(buf, depth);
            assert_eq!(id, intern(&stack), "depth {depth}");
            replayed.push(hit);
        }
        replayed
    }

    #[test]
    fn a_stack_that_follows_the_same_one_again_is_replayed() {
        if no_frame_records_to_test() {
            return;
        }
        let mut buf = StackBuffer::new();
        let f: Caller = first_caller;
        // Made replayable when seen the second time.
        let replayed = captures_match_walks(&mut buf, &[(f, 32); 4]);
        assert_eq!(replayed, [false, false, true, true]);
    }

    /// What `before_and_after_forgetting` saw in a round of captures.
    struct Round {
        /// Which captures were replayed.
        replayed: Vec<bool>,
        /// The entries holding a stack, with their ids.
        ids: Vec<(usize, SiteId)>,
        /// Whether any entry has counters.
        counters: bool,
    }

    /// Three captures from the first caller, before and after `buf` passes to another thread
    /// (`forget_thread`, its entries given counters first), all from one place, so that both
    /// rounds capture the same stack.
    fn before_and_after_forgetting(buf: &mut StackBuffer) -> Vec<Round> {
        // SAFETY: a site's counters are atomic integers, valid as zero bytes; leaked, so `'static`.
        let theirs: &'static SiteCnt =
            unsafe { &*Box::leak(Box::new(std::mem::MaybeUninit::<SiteCnt>::zeroed())).as_ptr() };
        let f: Caller = first_caller;
        let mut rounds = Vec::new();
        for round in 0..2 {
            if round == 1 {
                for r in buf.recent.iter_mut().filter(|r| r.id != 0) {
                    r.counters = Some(theirs);
                }
                buf.forget_thread();
            }
            let replayed = captures_match_walks(buf, &[(f, 32); 3]);
            let ids = (buf.recent.iter().enumerate())
                .filter(|(_, r)| r.id != 0)
                .map(|(i, r)| (i, r.id))
                .collect();
            let counters = buf.recent.iter().any(|r| r.counters.is_some());
            rounds.push(Round {
                replayed,
                ids,
                counters,
            });
        }
        rounds
    }

    #[test]
    fn a_buffer_another_thread_used_replays_none_of_its_walks() {
        if no_frame_records_to_test() {
            return;
        }
        let rounds = before_and_after_forgetting(&mut StackBuffer::new());
        assert_eq!(rounds[0].replayed, [false, false, true]);
        // The records were another stack's: the first capture walks, and the stack is replayable
        // again once this thread's walk recorded them.
        assert!(
            !rounds[1].replayed[0],
            "replayed from another thread's records"
        );
        assert!(rounds[1].replayed[2], "never replayed again");
    }

    #[test]
    fn a_buffer_another_thread_used_keeps_its_stacks_and_their_ids() {
        if no_frame_records_to_test() {
            return;
        }
        let rounds = before_and_after_forgetting(&mut StackBuffer::new());
        assert_eq!(rounds[0].ids.len(), 1);
        assert_eq!(rounds[1].ids, rounds[0].ids);
    }

    #[test]
    fn a_buffer_another_thread_used_hands_out_none_of_its_counters() {
        if no_frame_records_to_test() {
            return;
        }
        // The counters of the thread before are forgotten, and the stack learnt again has none
        // until they are looked up in the new thread's slot.
        let rounds = before_and_after_forgetting(&mut StackBuffer::new());
        assert!(
            !rounds[1].counters,
            "counters of the thread before are still handed out"
        );
    }

    /// `n` captures of 32 frames, from the first and the second caller in turn.
    fn alternating(n: usize) -> Vec<(Caller, usize)> {
        let (f, s): (Caller, Caller) = (first_caller, second_caller);
        [(f, 32), (s, 32)].into_iter().cycle().take(n).collect()
    }

    #[test]
    fn stacks_taking_turns_are_replayed_once_learnt() {
        if no_frame_records_to_test() {
            return;
        }
        let mut buf = StackBuffer::new();
        let turns = alternating(7);
        let replayed = captures_match_walks(&mut buf, &turns);
        // The leaf's own frame record is the same for both callers; the ones further out are not.
        // A stack is replayable once seen twice; the fifth capture, before the guess is sure, is
        // found by where it starts and its first return addresses, the later ones as guessed.
        assert_eq!(replayed, [false, false, false, false, true, true, true]);
    }

    #[test]
    fn a_stack_the_guess_misses_is_found_by_where_it_starts() {
        if no_frame_records_to_test() {
            return;
        }
        // Once the turns are learnt, the guess after `first` is `second` and the other way round;
        // breaking the turns makes a guess wrong, and the frame records further out tell. The
        // stack that does come is then found by its start and first return addresses, and every
        // site is still the one a walk finds (`captures_in_steps` checks each).
        let mut buf = StackBuffer::new();
        let (f, s): (Caller, Caller) = (first_caller, second_caller);
        let mut order = alternating(7);
        order.extend([(f, 32), (s, 32), (s, 32)]);
        let replayed = captures_match_walks(&mut buf, &order);
        assert_eq!(
            replayed,
            [false, false, false, false, true, true, true, true, true, true]
        );
    }

    /// Code of its own (its depth through `black_box`), so that it is not merged with the other
    /// callers.
    #[inline(never)]
    fn third_caller(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        let r = capture_in_leaf(buf, black_box(depth));
        black_box(r)
    }

    /// `captures` captures of 32 frames from `callers` in an order without turns (xorshift, the
    /// same in every run), and whether each should be replayed: a stack is walked the first two
    /// times it comes (the second makes it replayable), and replayed after, as long as the buffer
    /// holds every caller's stack.
    fn in_no_order(callers: &[Caller], captures: usize) -> (Vec<(Caller, usize)>, Vec<bool>) {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut seen = vec![0; callers.len()];
        let (mut order, mut expected) = (Vec::new(), Vec::new());
        for _ in 0..captures {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = (x % callers.len() as u64) as usize;
            order.push((callers[c], 32));
            expected.push(seen[c] >= 2);
            seen[c] += 1;
        }
        assert!(seen.iter().all(|&n| n > 2), "{seen:?}");
        (order, expected)
    }

    #[test]
    fn stacks_in_no_order_are_replayed_once_each_came_twice() {
        if no_frame_records_to_test() {
            return;
        }
        let callers: [Caller; 3] = [first_caller, second_caller, third_caller];
        let (order, expected) = in_no_order(&callers, 60);
        let mut buf = StackBuffer::new();
        assert_eq!(captures_match_walks(&mut buf, &order), expected);
    }

    /// The callers `f::<K>` for each `K` given.
    macro_rules! callers {
        ($f:ident: $($k:literal)*) => {
            [$($f::<$k>),*]
        };
    }

    /// A caller of its own for each `K` (the constant makes each instantiation's code differ, so
    /// none is merged with another).
    #[inline(never)]
    fn nth_caller<const K: usize>(
        buf: &mut StackBuffer,
        depth: usize,
    ) -> (bool, SiteId, Vec<usize>) {
        black_box(K);
        let r = capture_in_leaf(buf, depth);
        black_box(K);
        black_box(r)
    }

    #[test]
    fn twelve_places_in_no_order_are_all_remembered() {
        if no_frame_records_to_test() {
            return;
        }
        // More places than the eight stacks a buffer used to keep.
        let callers: [Caller; 12] = callers!(nth_caller: 0 1 2 3 4 5 6 7 8 9 10 11);
        let (order, expected) = in_no_order(&callers, 240);
        let mut buf = StackBuffer::new();
        assert_eq!(captures_match_walks(&mut buf, &order), expected);
    }

    /// The one function every `through_one` caller reaches the leaf through, as a program
    /// reaches its allocator through `__rust_alloc`.
    #[inline(never)]
    fn shared_step(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        let r = capture_in_leaf(buf, black_box(depth));
        black_box(r)
    }

    /// A caller of its own for each `K`, through `shared_step`.
    #[inline(never)]
    fn through_one<const K: usize>(
        buf: &mut StackBuffer,
        depth: usize,
    ) -> (bool, SiteId, Vec<usize>) {
        black_box(K);
        let r = shared_step(buf, depth);
        black_box(K);
        black_box(r)
    }

    #[test]
    fn places_reaching_the_capture_through_one_function_are_all_remembered() {
        if no_frame_records_to_test() {
            return;
        }
        // More places than a set holds, sharing where the walk starts and its first return
        // address: keyed by those alone, they all fell in one set, and most were walked again at
        // every capture.
        let callers: [Caller; 24] = callers!(
            through_one: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
        );
        let (order, expected) = in_no_order(&callers, 24 * 20);
        let mut buf = StackBuffer::new();
        assert_eq!(captures_match_walks(&mut buf, &order), expected);
    }

    #[inline(never)]
    fn first_caller_from_a(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        let r = first_caller(black_box(buf), depth);
        black_box(r)
    }

    /// Code of its own (its depth through `black_box`), so that it is not merged with `_from_a`.
    #[inline(never)]
    fn first_caller_from_b(buf: &mut StackBuffer, depth: usize) -> (bool, SiteId, Vec<usize>) {
        let r = first_caller(buf, black_box(depth));
        black_box(r)
    }

    #[test]
    fn stacks_that_part_further_out_are_told_apart_when_found_by_where_they_start() {
        if no_frame_records_to_test() {
            return;
        }
        // Both reach the leaf through `first_caller`: the same start and first return address,
        // another frame further out. (Their keys differ at the second return address; keyed by
        // the first alone, both entries matched the lookup and the full check picked one.)
        let (a, b): (Caller, Caller) = (first_caller_from_a, first_caller_from_b);
        let order = [a, a, b, b, a, b, b, a, a, b, a, b].map(|c| (c, 32));
        let mut buf = StackBuffer::new();
        let replayed = captures_match_walks(&mut buf, &order);
        assert_eq!(&replayed[..4], [false, false, false, false]);
        assert!(replayed[4..].iter().all(|&r| r), "{replayed:?}");
    }

    #[test]
    fn a_capture_that_fills_its_depth_is_interned_as_cut() {
        let mut buf = StackBuffer::new();
        let (_, id, stack) = capture_in_leaf(&mut buf, 2);
        assert_eq!(stack.len(), 2);
        assert!(crate::callsite::intern::was_cut(id));
    }

    #[test]
    fn a_capture_that_ends_before_its_depth_is_not_interned_as_cut() {
        let mut buf = StackBuffer::new();
        let (_, id, stack) = capture_in_leaf(&mut buf, STACK_WORDS);
        assert!(
            stack.len() < STACK_WORDS,
            "the test's stack is deeper than a capture"
        );
        assert!(!crate::callsite::intern::was_cut(id));
    }

    #[test]
    fn a_capture_of_another_depth_is_not_replayed() {
        if no_frame_records_to_test() {
            return;
        }
        let mut buf = StackBuffer::new();
        let f: Caller = first_caller;
        // The fourth capture starts from the same frame as the third, on the same chain: only the
        // depth differs. The last is of the first depth again, whose stack is still replayable.
        let depths = [(f, 32), (f, 32), (f, 32), (f, 2), (f, 2), (f, 2), (f, 32)];
        let replayed = captures_match_walks(&mut buf, &depths);
        assert_eq!(replayed, [false, false, true, false, false, true, true]);
    }

    #[test]
    fn a_capture_from_another_frame_is_not_replayed() {
        if no_frame_records_to_test() {
            return;
        }
        // The fourth capture is made one frame further in, below the same frame records: they all
        // still hold what the walk read, but a walk from the new frame finds one frame more.
        let mut buf = StackBuffer::new();
        let f: Caller = first_caller;
        let steps = [
            (f, 32, Step::Capture),
            (f, 32, Step::Capture),
            (f, 32, Step::Capture),
            (f, 32, Step::Deeper),
        ];
        assert_eq!(
            captures_in_steps(&mut buf, &steps),
            [false, false, true, false]
        );
    }

    #[test]
    fn a_chain_trusted_for_where_it_ends_is_replayed_only_while_that_end_is_known() {
        if no_frame_records_to_test() {
            return;
        }
        use super::super::capture::TEST_NEAR_TOP;
        let replayed = std::thread::spawn(|| {
            // Every chain now looks like it ends too far from the stack top.
            TEST_NEAR_TOP.with(|near| near.set(0));
            let mut buf = StackBuffer::new();
            let f: Caller = first_caller;
            let steps = [
                (f, 32, Step::Capture),
                (f, 32, Step::Capture),
                (f, 32, Step::Capture),
                (f, 32, Step::ForgetEnd),
            ];
            captures_in_steps(&mut buf, &steps)
        })
        .join()
        .unwrap();
        // The first capture is checked with the unwinder, which agrees with the walk (its site is
        // the walk's, checked above) and makes the chain's end known; the second walk is trusted
        // for ending there, and the third replayed; once the end is forgotten, the stack is not.
        assert_eq!(replayed, [false, false, true, false]);
    }
}
