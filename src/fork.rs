//! `fork()` and heapdelta's locks. A lock another thread holds at the moment of a fork stays held
//! forever in the child, whose only thread would then wait on it: a checkpoint taken by the
//! `every=` thread, for one, holds the timeline's lock for milliseconds, and resolving call sites
//! holds the site cache's while it reads debug info. Handlers registered once per process take
//! heapdelta's mutexes and spin locks just before a fork, in one order (the timeline, the tag
//! table, the table of tag names read from files, the site cache, then the pools' registry and
//! shared heaps: the order in which heapdelta's own code nests them; last, the lookup of an unwind
//! rule, during which the loader's lock is held: see `callsite/cfi.rs`), and release them in both
//! processes after it. The site cache covers what is only used under it (the project-root cache,
//! the unwinder's symbol lock on heapdelta's behalf).
//!
//! Not covered: the one-time initialisers of the clock and the program's path (a fork during the
//! first snapshot's first microseconds), and locks of other libraries (a fork while another
//! thread is inside the unwinder on the program's own account is as unsafe as without heapdelta).
//! Three narrower cases are not covered either:
//! - Another library's fork handler that allocates through a `Pool` on a thread without a pool
//!   heap of its own (past 255 threads, or during the thread's teardown) while heapdelta's
//!   handler holds the shared heap's lock: the handlers registered before heapdelta's run between
//!   its prepare and its parent or child handler, and such an allocation waits for that lock.
//! - `install` called inside a fork handler (the process's first use of one of heapdelta's locks
//!   there): glibc holds its handler list's lock while the handlers run, and `pthread_atfork`
//!   waits for it.
//! - A fork on another thread in the moment between a lock's first user marking the handlers
//!   installed and `pthread_atfork` returning: that fork runs without them.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::MutexGuard;

use crate::callsite::symbols;
use crate::scope;
use crate::snapshot::Snapshot;

/// The locks `before_fork` takes on the forking thread, released by `after_fork`.
type Held = (
    MutexGuard<'static, Vec<Snapshot>>,
    MutexGuard<'static, Vec<&'static str>>,
    MutexGuard<'static, scope::Leaked>,
    MutexGuard<'static, Option<symbols::Cache>>,
);

thread_local! {
    /// What `before_fork` took on this thread (the one calling `fork`), until `after_fork`.
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Registers the handlers, once per process (called by each lock's first user, so that a
/// process that never takes one registers nothing).
pub(crate) fn install() {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    if INSTALLED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: the handlers are `extern "C"` functions without arguments, as `pthread_atfork`
    // requires, that never unwind and stay valid for the life of the process. Its result is
    // ignored: without the handlers a fork is as safe as it was without heapdelta's locks.
    unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork_child)) };
}

/// Prepare handler: waits for each lock to be free and takes it. Each is held for one checkpoint,
/// one tag lookup, one symbolisation (which may read debug info first), one allocator operation
/// or one unwind-rule lookup at most, so a fork waits at most for those.
extern "C" fn before_fork() {
    // The thread-local's first use may register its destructor, which can allocate: before any
    // lock is held, so that an allocation cannot wait on one of them.
    let _ = HELD.try_with(|_| ());
    let held = (
        crate::checkpoint::lock_timeline(),
        scope::lock_tags(),
        scope::lock_leaked(),
        symbols::lock_cache(),
    );
    crate::pool::lock_for_fork();
    // Last: a rule lookup takes none of the others.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    crate::callsite::lock_rules_for_fork();
    let _ = HELD.try_with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            *h = Some(held);
        }
    });
}

/// Child handler: `after_fork`, and what only the child resets (the count of threads holding a
/// pool's idle heap, which a thread standing back from the fork may have left raised for a moment:
/// the child has none of those threads).
extern "C" fn after_fork_child() {
    crate::pool::reset_in_child();
    after_fork();
}

/// Parent handler, and the child's after `after_fork_child`: releases what `before_fork` took (the
/// rule lookup and the pools' locks first; the order of releases does not matter).
extern "C" fn after_fork() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    crate::callsite::unlock_rules();
    crate::pool::unlock_after_fork();
    let _ = HELD.try_with(|h| {
        if let Ok(mut h) = h.try_borrow_mut() {
            h.take();
        }
    });
}
