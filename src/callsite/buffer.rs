//! A thread's capture buffer: the stack being captured, and the last few distinct stacks it
//! captured with their site ids.
//!
//! Most allocations come from a handful of places that take turns (a loop body allocating a node,
//! its name and its payload), so a new capture usually equals one of the thread's recent stacks.
//! Two things make that cheap:
//!
//! - **Replay.** For each recent stack the buffer keeps the addresses of the frame records the
//!   walk read. It guesses which recent stack comes next (the one that followed the last stack the
//!   previous time) and checks, with loads that do not wait on one another, that every one of those
//!   records still holds what the walk read there ([`same_chain`]). If so, a walk would return that
//!   very stack, and its id is reused without walking: the walk's loads each wait for the one
//!   before, so it costs several times as much.
//! - **Recent stacks.** Otherwise the stack is walked, and looked up among the recent stacks by
//!   hash and a compare of every word, before the shared intern table, which costs three dependent
//!   loads into a large table and a compare (about 15 ns).
//!
//! Matches are exact either way: a site id is only reused for a stack equal to its own in every
//! word.
//!
//! Runs inside the global allocator (with heapdelta's guard set): no allocation, no lock, no
//! panic.

#[cfg(test)]
use super::capture::start_here;
use super::capture::{capture_recorded, same_chain};
use super::intern::{intern_hashed, SiteId};

/// Most return addresses a capture keeps.
pub(crate) const STACK_WORDS: usize = 64;

/// Distinct recent stacks remembered per thread.
const RECENT: usize = 4;

/// A recently captured stack and its site id (`id == 0`: the entry is empty).
struct Recent {
    hash: u64,
    n: usize,
    id: SiteId,
    /// Whether `records` and the saved frame pointers in `frames` are those of the walk that last
    /// captured this stack, with at most `depth` frames (see `same_chain`).
    replayable: bool,
    depth: usize,
    /// Per frame, the saved frame pointer read from its frame record and the return address: the
    /// second words are the stack (`frames[..n]`).
    frames: [[usize; 2]; STACK_WORDS],
    /// The addresses of the frame records (`records[..n]`).
    records: [usize; STACK_WORDS],
}

/// A thread's capture buffer. `const`-constructible, so it can live in a `const`-initialised
/// thread-local.
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
}

impl StackBuffer {
    /// An empty buffer.
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
                    frames: [[0; 2]; STACK_WORDS],
                    records: [0; STACK_WORDS],
                }
            }; RECENT],
            next: 0,
            current: RECENT,
            after: [RECENT; RECENT],
        }
    }

    /// Captures the calling thread's stack (at most `depth` frames) from `start`, the value of
    /// [`start_here`](super::capture::start_here) in the function the capture is made for (the
    /// first address lies in its caller), and returns its site id. Out of line: the walk starts
    /// from `start` wherever it runs, and the function the replay is inlined into stays small.
    #[inline(never)]
    pub(crate) fn capture_site(&mut self, start: usize, depth: usize) -> SiteId {
        let depth = depth.min(STACK_WORDS);
        let (Some(out), Some(records)) =
            (self.words.get_mut(..depth), self.records.get_mut(..=depth))
        else {
            return 0;
        };
        let c = capture_recorded(start, out, records);
        let i = self.entry_of(c.n, c.hash);
        if let Some(r) = self.recent.get_mut(i) {
            r.replayable = c.recorded;
            r.depth = depth;
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
        self.follow(i)
    }

    /// The site id `capture_site(start, depth)` would return, without walking the stack, when
    /// the stack is the recent one guessed to come next and its frame records show it is still
    /// there; `None` otherwise (then `capture_site` must run). Neither allocates nor calls out.
    #[inline(always)]
    pub(crate) fn replay(&mut self, start: usize, depth: usize) -> Option<SiteId> {
        let depth = depth.min(STACK_WORDS);
        let i = *self.after.get(self.current)?;
        let r = self.recent.get(i)?;
        if !(r.replayable && r.id != 0 && r.depth == depth && start != 0) {
            return None;
        }
        let (records, frames) = (r.records.get(..r.n)?, r.frames.get(..r.n)?);
        if records.first() != Some(&start) {
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

    /// Makes entry `i` the current one, remembering that it came after the previous one; returns
    /// its site id.
    fn follow(&mut self, i: usize) -> SiteId {
        if let Some(after) = self.after.get_mut(self.current) {
            *after = i;
        }
        self.current = i;
        self.recent.get(i).map_or(0, |r| r.id)
    }

    /// The entry of `recent` holding the stack in `words[..n]`, whose `intern::hash_stack` is
    /// `hash`: a recent stack's, or a new entry (replacing the oldest) with its id from the shared
    /// table.
    fn entry_of(&mut self, n: usize, hash: u64) -> usize {
        let stack = self.words.get(..n).unwrap_or(&[]);
        let found = self.recent.iter().position(|r| {
            r.id != 0
                && r.hash == hash
                && r.n == n
                // Every word, without early exit: short stacks, and no call to `bcmp`.
                && r.frames.iter().zip(stack).fold(0, |diff, (f, w)| diff | (f[1] ^ w)) == 0
        });
        if let Some(i) = found {
            return i;
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
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::intern::{hash_stack, intern};
    use std::hint::black_box;

    /// Puts `stack` in the buffer as a capture would and returns its site id.
    fn site_for(buf: &mut StackBuffer, stack: &[usize]) -> SiteId {
        buf.words[..stack.len()].copy_from_slice(stack);
        let i = buf.entry_of(stack.len(), hash_stack(stack));
        buf.follow(i)
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
        let i = buf.entry_of(2, hash_stack(&a));
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

    /// The site of a capture made here, and the stack a plain capture from the same frame gives.
    #[inline(never)]
    fn capture_in_leaf(buf: &mut StackBuffer, depth: usize) -> (SiteId, Vec<usize>) {
        let start = start_here();
        let id = match buf.replay(start, depth) {
            Some(id) => id,
            None => buf.capture_site(start, depth),
        };
        let mut stack = vec![0; depth];
        let mut records = vec![0; depth + 1];
        let c = capture_recorded(start, &mut stack, &mut records);
        stack.truncate(c.n);
        (black_box(id), stack)
    }

    #[inline(never)]
    fn first_caller(buf: &mut StackBuffer, depth: usize) -> (SiteId, Vec<usize>) {
        let r = capture_in_leaf(buf, depth);
        black_box(r)
    }

    #[inline(never)]
    fn second_caller(buf: &mut StackBuffer, depth: usize) -> (SiteId, Vec<usize>) {
        let r = capture_in_leaf(black_box(buf), depth);
        black_box(r)
    }

    #[test]
    fn every_capture_gets_the_site_of_the_stack_a_walk_finds() {
        // The leaf's own frame record is the same for both callers; the ones further out are
        // not: replaying the other caller's records must not give its site.
        let mut buf = StackBuffer::new();
        // `black_box`: a loop with a known count may be unrolled, giving each round other stacks.
        for _ in 0..black_box(4) {
            for caller in [first_caller, second_caller] {
                let (id, stack) = caller(&mut buf, 32);
                assert_eq!(id, intern(&stack));
            }
        }
    }

    #[test]
    fn stacks_taking_turns_are_replayed_once_learnt() {
        let mut buf = StackBuffer::new();
        let mut ids = Vec::new();
        for _ in 0..black_box(5) {
            ids.push((first_caller(&mut buf, 32).0, second_caller(&mut buf, 32).0));
        }
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{ids:?}");
        assert_ne!(ids[0].0, ids[0].1);
        // From the second round on, the guess for each stack is the other one.
        let current = buf.current;
        let other = buf.after[current];
        assert_eq!(buf.after[other], current);
        assert!(buf.recent[current].replayable && buf.recent[other].replayable);
    }

    #[test]
    fn a_capture_of_another_depth_is_not_replayed() {
        let mut buf = StackBuffer::new();
        let mut sites = Vec::new();
        for depth in [32, 2, 32, 2].into_iter().map(black_box) {
            let (id, stack) = first_caller(&mut buf, depth);
            assert_eq!(stack.len().min(2), 2);
            assert_eq!(id, intern(&stack));
            sites.push(id);
        }
        assert_ne!(sites[0], sites[1]);
        assert_eq!(sites[..2], sites[2..]);
    }
}
