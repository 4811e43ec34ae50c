//! A thread's capture buffer: the stack being captured, and the last few distinct stacks it
//! captured with their site ids.
//!
//! Most allocations come from a handful of places that take turns (a loop body allocating a node,
//! its name and its payload), so a new capture usually equals one of the thread's recent stacks.
//! Finding it here costs a few compares in memory the thread owns; the shared intern table costs
//! three dependent loads into a large table and a compare (about 15 ns). Matches are exact: a
//! recent stack is only reused when every word equals the new capture's.
//!
//! Runs inside the global allocator (with heapdelta's guard set): no allocation, no lock, no
//! panic.

use super::capture::capture_into;
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
    words: [usize; STACK_WORDS],
}

/// A thread's capture buffer. `const`-constructible, so it can live in a `const`-initialised
/// thread-local.
pub(crate) struct StackBuffer {
    /// Return addresses; the first `last.0` of them are the last captured stack.
    words: [usize; STACK_WORDS],
    /// Length and site id of the last captured stack (`None` before the first).
    last: Option<(usize, SiteId)>,
    recent: [Recent; RECENT],
    /// The entry of `recent` the next new stack replaces.
    next: usize,
}

impl StackBuffer {
    /// An empty buffer.
    pub(crate) const fn new() -> StackBuffer {
        StackBuffer {
            words: [0; STACK_WORDS],
            last: None,
            recent: [const {
                Recent {
                    hash: 0,
                    n: 0,
                    id: 0,
                    words: [0; STACK_WORDS],
                }
            }; RECENT],
            next: 0,
        }
    }

    /// Captures the calling thread's stack (at most `depth` frames) and returns its site id.
    ///
    /// A stack equal to the previous capture (the walk compares each address with the buffer's as
    /// it writes it) or to one of the recent ones reuses its id; any other is interned.
    #[inline(always)]
    pub(crate) fn capture_site(&mut self, depth: usize) -> SiteId {
        let c = capture_into(&mut self.words[..depth.min(STACK_WORDS)], 0);
        if let Some((n, id)) = self.last {
            if c.unchanged && n == c.n {
                return id;
            }
        }
        let id = self.site_of(c.n, c.hash);
        self.last = Some((c.n, id));
        id
    }

    /// The site id of the stack in `words[..n]`, whose `intern::hash_stack` is `hash`: a recent
    /// stack's, or the shared table's (and the stack becomes a recent one).
    fn site_of(&mut self, n: usize, hash: u64) -> SiteId {
        let stack = self.words.get(..n).unwrap_or(&[]);
        let found = self.recent.iter().find(|r| {
            r.id != 0
                && r.hash == hash
                && r.n == n
                // Every word, without early exit: short stacks, and no call to `bcmp`.
                && r.words.iter().zip(stack).fold(0, |diff, (a, b)| diff | (a ^ b)) == 0
        });
        if let Some(r) = found {
            return r.id;
        }
        let id = intern_hashed(stack, hash);
        if let Some(r) = self.recent.get_mut(self.next) {
            if let Some(dst) = r.words.get_mut(..n) {
                dst.copy_from_slice(stack);
                r.hash = hash;
                r.n = n;
                r.id = id;
            }
        }
        self.next = (self.next + 1) % RECENT;
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::intern::{hash_stack, intern};

    /// Puts `stack` in the buffer as a capture would and returns its site id.
    fn site_for(buf: &mut StackBuffer, stack: &[usize]) -> SiteId {
        buf.words[..stack.len()].copy_from_slice(stack);
        buf.site_of(stack.len(), hash_stack(stack))
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
        assert_ne!(buf.site_of(2, hash_stack(&a)), id_a);
    }

    #[test]
    fn more_stacks_than_recent_entries_still_get_their_ids() {
        let mut buf = StackBuffer::new();
        let stacks: Vec<[usize; 1]> = (0..RECENT * 3).map(|i| [0x7300_0000 + i]).collect();
        for s in stacks.iter().chain(stacks.iter().rev()) {
            assert_eq!(site_for(&mut buf, s), intern(s));
        }
    }
}
