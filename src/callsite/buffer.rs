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
//!   much.
//! - **Recent stacks.** Otherwise the stack is walked, and looked up among the last eight
//!   distinct stacks by hash and a compare of every word, before the shared intern table, which
//!   costs three dependent loads into a large table and a compare (about 15 ns).
//!
//! Matches are exact either way: a site id is only reused for a stack equal to its own in every
//! word.
//!
//! Runs inside the global allocator (with heapdelta's guard set): no lock, no panic, and no
//! allocation but the buffer itself, from the system allocator, on a thread's first capture.

use super::capture::{
    capture_recorded, same_chain, still_chain_end, InMemo, Memo, UnwindStart, FROM_REGS,
};
#[cfg(test)]
use super::capture::{start_here, unwind_start_here};
use super::intern::{intern_hashed, SiteId};
use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Capture buffers allocated and not yet given back (one per thread that captured a site and has
/// not exited).
static LIVE_BUFFERS: AtomicUsize = AtomicUsize::new(0);

/// How many threads' capture buffers are allocated now.
pub fn live_buffers() -> usize {
    LIVE_BUFFERS.load(Ordering::Relaxed)
}

/// Most return addresses a capture keeps.
pub(crate) const STACK_WORDS: usize = 64;

/// Distinct recent stacks remembered per thread.
const RECENT: usize = 8;

/// A recently captured stack and its site id (`id == 0`: the entry is empty).
struct Recent {
    hash: u64,
    n: usize,
    id: SiteId,
    /// Whether `records` and the saved frame pointers in `frames` are those of the walk that last
    /// captured this stack, with at most `depth` frames (see `same_chain`).
    replayable: bool,
    depth: usize,
    /// The chain end that walk was trusted for (0: it was complete on its own).
    trusted_end: usize,
    /// Per frame, the saved frame pointer read from its frame record and the return address: the
    /// second words are the stack (`frames[..n]`).
    frames: [[usize; 2]; STACK_WORDS],
    /// The addresses of the frame records (`records[..n]`).
    records: [usize; STACK_WORDS],
}

/// A thread's capture buffer, about 14 KiB, allocated on the thread's first capture (`allocate`).
pub(crate) struct StackBuffer {
    /// Return addresses of the capture in progress.
    words: [usize; STACK_WORDS],
    /// The frame records they were read from (see `capture_recorded`).
    records: [usize; STACK_WORDS + 1],
    recent: [Recent; RECENT],
    /// The entry of `recent` the next new stack replaces.
    next: usize,
    /// The entry of `recent` holding the last captured stack (`RECENT`: none yet).
    current: usize,
    /// For each entry, the entry whose stack was captured right after it the last time (`RECENT`:
    /// none): the guess that `replay` checks.
    after: [usize; RECENT],
    /// For each entry, whether the same entry followed it the last two times: `replay` only
    /// checks a guess that held before, so allocations from places in no particular order do not
    /// pay for checks that fail.
    sure: [bool; RECENT],
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
                    hash: 0,
                    n: 0,
                    id: 0,
                    replayable: false,
                    depth: 0,
                    trusted_end: 0,
                    frames: [[0; 2]; STACK_WORDS],
                    records: [0; STACK_WORDS],
                }
            }; RECENT],
            next: 0,
            current: RECENT,
            after: [RECENT; RECENT],
            sure: [false; RECENT],
            memo: ptr::null_mut(),
        }
    }

    /// A new buffer from the system allocator (heapdelta runs inside the global allocator, which
    /// it must not call), or null when that fails. Give it back with `free`.
    pub(crate) fn allocate() -> *mut StackBuffer {
        let layout = Layout::new::<StackBuffer>();
        // Zeroed, then only the fields whose empty value is not zero are written: a buffer built
        // as a value would take 14 KiB of the thread's stack, twice over in a debug build, inside
        // the allocator.
        // SAFETY: the layout has a non-zero size.
        let buffer = unsafe { System.alloc_zeroed(layout) }.cast::<StackBuffer>();
        if !buffer.is_null() {
            // SAFETY: `buffer` is a fresh block of the buffer's layout; every field is valid as
            // zero bytes (integers, booleans, arrays of them, a null pointer), and the two
            // written here are written through raw pointers, without a reference to the whole.
            unsafe {
                ptr::addr_of_mut!((*buffer).current).write(RECENT);
                ptr::addr_of_mut!((*buffer).after).write([RECENT; RECENT]);
            }
            LIVE_BUFFERS.fetch_add(1, Ordering::Relaxed);
        }
        buffer
    }

    /// Gives back a buffer from `allocate` (null: nothing to do).
    ///
    /// # Safety
    /// `buffer` must be null or come from `allocate`, and not be used afterwards.
    pub(crate) unsafe fn free(buffer: *mut StackBuffer) {
        if !buffer.is_null() {
            // SAFETY: the caller's contract: `allocate` got it from `System` with this layout, and
            // its memo, if any, from `System` with the memo's (`memo`).
            unsafe {
                let memo = (*buffer).memo;
                if !memo.is_null() {
                    System.dealloc(memo.cast(), Layout::new::<Memo>());
                }
                System.dealloc(buffer.cast(), Layout::new::<StackBuffer>());
            }
            LIVE_BUFFERS.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Captures the calling thread's stack (at most `depth` frames) from `start`, the value of
    /// [`start_here`](super::capture::start_here) in the function the capture is made for (the
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
        let (i, seen) = self.entry_of(c.n, c.hash);
        // A stack is made replayable when it comes again after the same stack as the time before,
        // as the guess will be checked once it holds twice: copying the records of a stack in no
        // particular order, or one that never comes back (a program allocating from more places
        // than there are entries), would only cost.
        let again = seen && self.after.get(self.current) == Some(&i);
        if let (true, Some(r)) = (again, self.recent.get_mut(i)) {
            r.replayable = c.recorded;
            r.depth = depth;
            r.trusted_end = c.trusted_end;
            if c.recorded {
                // Each record held the address of the next one; the last, where the walk stopped.
                let saved = self.records.iter().skip(1);
                for ((frame, record), (&at, &next)) in r
                    .frames
                    .iter_mut()
                    .zip(&mut r.records)
                    .zip(self.records.iter().zip(saved))
                    .take(c.n)
                {
                    frame[0] = next;
                    *record = at;
                }
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

    /// The site id `capture_site(start, depth)` would return, without walking the stack, when
    /// the stack is the recent one guessed to come next and its frame records show it is still
    /// there; `None` otherwise (then `capture_site` must run). Neither allocates nor calls out.
    #[inline(always)]
    pub(crate) fn replay(&mut self, start: usize, depth: usize) -> Option<SiteId> {
        let depth = depth.min(STACK_WORDS);
        if !self.sure.get(self.current).copied().unwrap_or(false) {
            return None;
        }
        let i = *self.after.get(self.current)?;
        let r = self.recent.get(i)?;
        if !(r.replayable && r.id != 0 && r.depth == depth && start != 0) {
            return None;
        }
        let (records, frames) = (r.records.get(..r.n)?, r.frames.get(..r.n)?);
        if records.first() != Some(&start)
            || (r.trusted_end != 0 && !still_chain_end(r.trusted_end))
        {
            return None;
        }
        // SAFETY: a replayable entry's records are frame records a walk read on this thread (the
        // buffer is thread-local), and the first is the frame this capture starts from.
        if !unsafe { same_chain(records, frames) } {
            return None;
        }
        self.current = i;
        Some(r.id)
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
        if let (Some(after), Some(sure)) = (
            self.after.get_mut(self.current),
            self.sure.get_mut(self.current),
        ) {
            *sure = *after == i;
            *after = i;
        }
        self.current = i;
        self.recent.get(i).map_or(0, |r| r.id)
    }

    /// The entry of `recent` holding the stack in `words[..n]`, whose `intern::hash_stack` is
    /// `hash`, and whether it was there already; otherwise a new entry (replacing the oldest)
    /// with its id from the shared table, not replayable.
    fn entry_of(&mut self, n: usize, hash: u64) -> (usize, bool) {
        let stack = self.words.get(..n).unwrap_or(&[]);
        let found = self.recent.iter().position(|r| {
            r.id != 0
                && r.hash == hash
                && r.n == n
                // Every word, without early exit: short stacks, and no call to `bcmp`.
                && r.frames.iter().zip(stack).fold(0, |diff, (f, w)| diff | (f[1] ^ w)) == 0
        });
        if let Some(i) = found {
            return (i, true);
        }
        let id = intern_hashed(stack, hash);
        let i = self.next;
        self.next = (self.next + 1) % RECENT;
        if let Some(r) = self.recent.get_mut(i) {
            for (frame, &word) in r.frames.iter_mut().zip(stack) {
                frame[1] = word;
            }
            r.hash = hash;
            r.n = n;
            r.id = id;
            r.replayable = false;
        }
        // Until it is known what follows a new stack, the guess is that it repeats (a loop).
        if let (Some(after), Some(sure)) = (self.after.get_mut(i), self.sure.get_mut(i)) {
            *after = i;
            *sure = false;
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
        let (i, _) = buf.entry_of(stack.len(), hash_stack(stack));
        buf.follow(i)
    }

    #[test]
    fn a_buffer_from_the_system_allocator_starts_as_an_empty_one() {
        let empty = StackBuffer::new();
        let buffer = StackBuffer::allocate();
        // SAFETY: a buffer from `allocate`, read here and freed once.
        let fresh = unsafe { &*buffer };
        assert_eq!(
            (fresh.next, fresh.current, fresh.after, fresh.sure),
            (empty.next, empty.current, empty.after, empty.sure)
        );
        assert!(fresh.recent.iter().all(|r| r.id == 0 && !r.replayable));
        // SAFETY: from `allocate`, not used afterwards.
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
        let (i, seen) = buf.entry_of(2, hash_stack(&a));
        assert!(!seen);
        assert_ne!(buf.follow(i), id_a);
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
            _ => buf.replay(start, depth),
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
        // A stack is replayable once seen twice, and a guess is checked once it held twice.
        assert_eq!(replayed, [false, false, false, false, false, true, true]);
    }

    #[test]
    fn a_wrong_guess_is_not_replayed() {
        if no_frame_records_to_test() {
            return;
        }
        // Once the turns are learnt, the guess after `first` is `second` and the other way round;
        // breaking the turns makes a guess wrong, and the frame records further out tell.
        let mut buf = StackBuffer::new();
        let (f, s): (Caller, Caller) = (first_caller, second_caller);
        let mut order = alternating(7);
        order.extend([(f, 32), (s, 32), (s, 32)]);
        let replayed = captures_match_walks(&mut buf, &order);
        // The eighth and tenth captures are made where the guess is wrong.
        assert_eq!(
            replayed,
            [false, false, false, false, false, true, true, false, false, false]
        );
    }

    #[test]
    fn a_capture_of_another_depth_is_not_replayed() {
        if no_frame_records_to_test() {
            return;
        }
        let mut buf = StackBuffer::new();
        let f: Caller = first_caller;
        // The fourth capture starts from the same frame as the third, on the same chain: only the
        // depth differs.
        let depths = [(f, 32), (f, 32), (f, 32), (f, 2), (f, 2), (f, 2), (f, 32)];
        let replayed = captures_match_walks(&mut buf, &depths);
        assert_eq!(replayed, [false, false, true, false, false, true, false]);
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
