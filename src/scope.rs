//! Scopes: tag the allocations a piece of code makes, e.g. per pipeline stage.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard};

use crate::stats::MAX_TAGS;
use crate::thread;

/// Registered tags; index 0 is "no tag" and the last index collects every tag past the limit.
static TAGS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
/// The set of tag names read back from files.
pub(crate) type Leaked = Option<HashSet<&'static str>>;
/// Tag names read back from files, made `'static` once each.
static LEAKED: Mutex<Leaked> = Mutex::new(None);

/// The lock of the tag names read from files (also taken before a `fork()`, see `crate::fork`).
pub(crate) fn lock_leaked() -> MutexGuard<'static, Leaked> {
    LEAKED.lock().unwrap_or_else(|p| p.into_inner())
}

/// The name reports use for allocations past the tag limit.
pub const OVERFLOW_TAG: &str = "(other tags)";

fn tags() -> MutexGuard<'static, Vec<&'static str>> {
    crate::fork::install();
    lock_tags()
}

/// The tag table's lock (also taken before a `fork()`, see `crate::fork`).
pub(crate) fn lock_tags() -> MutexGuard<'static, Vec<&'static str>> {
    TAGS.lock().unwrap_or_else(|p| p.into_inner())
}

fn index_of(tag: &'static str) -> u8 {
    thread::untracked(|| {
        let mut tags = tags();
        if tags.is_empty() {
            tags.push("");
        }
        // From index 1: index 0's empty name means "no tag", and `scope("")` is a tag like any
        // other.
        if let Some(i) = tags.iter().skip(1).position(|t| *t == tag) {
            return (i + 1) as u8;
        }
        if tags.len() < MAX_TAGS - 1 {
            tags.push(tag);
            (tags.len() - 1) as u8
        } else {
            (MAX_TAGS - 1) as u8
        }
    })
}

/// The name of tag index `i`.
pub(crate) fn tag_name(i: usize) -> &'static str {
    if i == MAX_TAGS - 1 {
        return OVERFLOW_TAG;
    }
    tags().get(i).copied().unwrap_or("")
}

/// A `'static` copy of a tag name read from a file (each distinct name is kept once).
pub(crate) fn static_tag(name: &str) -> &'static str {
    if let Some(t) = tags().iter().find(|t| **t == name) {
        return t;
    }
    if name == OVERFLOW_TAG {
        return OVERFLOW_TAG;
    }
    crate::fork::install();
    let mut leaked = lock_leaked();
    let set = leaked.get_or_insert_with(HashSet::new);
    if let Some(t) = set.get(name) {
        return t;
    }
    let t: &'static str = Box::leak(name.to_owned().into_boxed_str());
    set.insert(t);
    t
}

/// Counts the calling thread's allocations under `tag` until the guard is dropped. Scopes nest;
/// an allocation is counted under the innermost tag. Up to 62 distinct tags are told apart; later
/// ones are counted together as `(other tags)`. The tag table is the process's and never shrinks:
/// tests of one binary that run in parallel share it, so one that makes many tags can push
/// another's into `(other tags)`.
///
/// Dropping a guard ends its own scope, in any order: dropping an outer guard before an inner
/// one leaves the inner tag current, then no tag once both are dropped (up to 64 scopes open at
/// once on a thread, a guard forgotten with `mem::forget` staying open; past that, a guard restores
/// the tag that was current when it was made).
///
/// The tag belongs to the thread, not to a task: in async code, a guard held across an `.await`
/// also tags whatever other tasks run on that thread meanwhile (the guard is not `Send`, so a
/// multi-threaded runtime's `spawn` refuses such a future, but `block_on`, a `LocalSet` or a
/// current-thread runtime accept it). Open the scope around synchronous work between awaits.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let (tokens, growth) = heapdelta::measure(|| {
///     let _g = heapdelta::scope("parse");
///     "a b c".split(' ').map(String::from).collect::<Vec<String>>()
/// });
/// let parse = growth.tags().iter().find(|t| t.tag == "parse").expect("tagged");
/// assert_eq!(parse.live_blocks, 4); // the vector and its three strings
/// # drop(tokens);
/// # }
/// ```
pub fn scope(tag: &'static str) -> ScopeGuard {
    let index = index_of(tag);
    let previous = thread::set_tag(index);
    let id = OPEN
        .try_with(|open| open.try_borrow_mut().map_or(0, |mut o| o.push(previous)))
        .unwrap_or(0);
    ScopeGuard {
        id,
        previous,
        _not_send: PhantomData,
    }
}

/// Scopes open at once on a thread that end correctly in any order.
const OPEN_MAX: usize = 64;

/// The thread's open scopes, innermost last: each guard's id and the tag current before it. The
/// tag current is the innermost scope's; a scope that ends below others hands the tag before it
/// to the one above it (two tasks' guards interleaved on one thread end so: a user trial's
/// current-thread runtime left the first task's tag on every later allocation of the thread).
struct Open {
    scopes: [(u32, u8); OPEN_MAX],
    len: usize,
    /// The last id given (0 is no id: a guard past `OPEN_MAX`, or made during thread exit).
    last: u32,
}

impl Open {
    /// Opens a scope entered with `previous` current; its id, or 0 when full.
    fn push(&mut self, previous: u8) -> u32 {
        let Some(slot) = self.scopes.get_mut(self.len) else {
            return 0;
        };
        self.last = self.last.checked_add(1).unwrap_or(1);
        *slot = (self.last, previous);
        self.len += 1;
        self.last
    }

    /// Ends scope `id`: the tag to make current, or `None` when a scope opened after it is still
    /// open (its tag stays current) or `id` is not open.
    fn end(&mut self, id: u32) -> Option<u8> {
        let open = &mut self.scopes[..self.len];
        let at = open.iter().position(|&(i, _)| i == id)?;
        let previous = open[at].1;
        let innermost = at + 1 == open.len();
        if !innermost {
            open[at + 1].1 = previous;
        }
        open.copy_within(at + 1.., at);
        self.len -= 1;
        innermost.then_some(previous)
    }
}

thread_local! {
    static OPEN: std::cell::RefCell<Open> = const {
        std::cell::RefCell::new(Open {
            scopes: [(0, 0); OPEN_MAX],
            len: 0,
            last: 0,
        })
    };
}

/// Ends a [`scope`] when dropped, restoring the enclosing tag.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let (kept, growth) = heapdelta::measure(|| {
///     let _outer = heapdelta::scope("load");
///     let decoded = {
///         let _inner = heapdelta::scope("decode");
///         vec![0u8; 100]
///     }; // back to "load"
///     (decoded, vec![0u8; 10])
/// });
/// let tags: Vec<(&str, i64)> = growth.tags().iter().map(|t| (t.tag, t.live_bytes)).collect();
/// assert_eq!(tags, [("decode", 100), ("load", 10)]);
/// # drop(kept);
/// # }
/// ```
#[must_use = "the scope ends when the guard is dropped"]
#[derive(Debug)]
pub struct ScopeGuard {
    /// Its place among the thread's open scopes (0: none, see `Open`).
    id: u32,
    /// The tag current when it was made.
    previous: u8,
    _not_send: PhantomData<*const ()>,
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        let ended = match self.id {
            0 => Some(self.previous),
            id => OPEN
                .try_with(|open| open.try_borrow_mut().ok().map(|mut o| o.end(id)))
                .ok()
                .flatten()
                .unwrap_or(Some(self.previous)),
        };
        if let Some(tag) = ended {
            thread::set_tag(tag);
        }
    }
}
