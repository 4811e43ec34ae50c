//! `HEAPDELTA=report=…,signals=on`: the report file when the process is stopped by a signal.
//! Services are stopped with SIGTERM (and SIGINT, SIGHUP), whose default action ends the process
//! without running the exit handlers, so the report would never be written. For each of the three
//! whose action is still the default when `HEAPDELTA` is read (before `main`), a handler is
//! installed; when the signal comes, a thread of heapdelta's writes the report, then the signal's
//! default action is restored and the signal raised again, so the process ends as it would have,
//! with the same status. It is opt-in because a handler changes what the program sees: a runtime
//! that installs its own handler only over the default action (CPython's SIGINT handler) leaves
//! heapdelta's, and the program's blocking calls may return `EINTR` while the report is written.
//!
//! A program that handles the signal itself keeps its behaviour: a handler it installs replaces
//! heapdelta's, and when that handler calls the one it replaced (as `signal-hook` and so tokio's
//! signal handling do), heapdelta's sees that it is no longer the installed one and does nothing;
//! the program's own shutdown then writes the report at exit. A forked child ends at once, as
//! it would have (the report is its parent's). A second signal while the report is written ends
//! the process at once. The handler wakes the writing thread through a semaphore in memory, not
//! a file descriptor, which a program that closes every descriptor could reuse.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

const SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// The semaphore the handler posts to wake the writing thread.
struct Semaphore(UnsafeCell<MaybeUninit<libc::sem_t>>);

// SAFETY: the semaphore is only used through `sem_*` calls, which synchronise themselves, after
// `install` initialised it (published by `READY`).
unsafe impl Sync for Semaphore {}

static WAKE: Semaphore = Semaphore(UnsafeCell::new(MaybeUninit::uninit()));
/// Set once `WAKE` is initialised and the writing thread waits on it.
static READY: AtomicBool = AtomicBool::new(false);
/// The signal that came.
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The process that installed the handlers.
static OWNER: AtomicI32 = AtomicI32::new(0);
/// Set when a signal has been passed on: a second one ends the process at once.
static STOPPING: AtomicBool = AtomicBool::new(false);

fn wake() -> *mut libc::sem_t {
    WAKE.0.get().cast()
}

/// Installs the handlers and starts the thread that runs `write_report` when one of the signals
/// comes; an error message when that cannot be done (the signals then keep their default action).
pub(crate) fn install(write_report: fn()) -> Result<(), String> {
    // SAFETY: `install` runs once (the report path is set once; it runs inside the program's
    // first allocation, where `HEAPDELTA` is read), before any handler that uses the semaphore is
    // installed; the semaphore is private to this process.
    if unsafe { libc::sem_init(wake(), 0, 0) } != 0 {
        return Err(format!(
            "no semaphore for the signal handler: {}",
            std::io::Error::last_os_error()
        ));
    }
    let spawned = crate::config::spawn_own(c"heapdelta-sig", move || {
        crate::thread::untracked(|| wait_and_report(write_report))
    });
    if let Err(e) = spawned {
        return Err(format!("no thread to write the report on a signal: {e}"));
    }
    // SAFETY: `getpid` has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Ordering::Release);
    READY.store(true, Ordering::Release);
    for sig in SIGNALS {
        if action_of(sig) == Some(libc::SIG_DFL) {
            set_action(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    Ok(())
}

/// The handler installed for `sig`, if it can be read.
fn action_of(sig: libc::c_int) -> Option<libc::sighandler_t> {
    // SAFETY: an all-zero `sigaction` is a valid value to be overwritten; `sigaction` with a null
    // new action only reads the current one into `old`. Async-signal-safe.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(sig, std::ptr::null(), &mut old) == 0).then_some(old.sa_sigaction)
    }
}

/// Sets `handler` (a function, or `SIG_DFL`) as the action for `sig`. Async-signal-safe.
fn set_action(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: the `sigaction` is fully initialised (zeroed, then its handler, flags and an empty
    // mask); `handler` is `SIG_DFL` or `on_signal`, an `extern "C" fn(c_int)`.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(sig, &action, std::ptr::null_mut());
    }
}

/// Restores the default action of `sig` and raises it: the process ends as the signal ends it.
/// Called from the handler, the raised signal is delivered when the handler returns.
fn end_by(sig: libc::c_int) {
    set_action(sig, libc::SIG_DFL);
    // SAFETY: `raise` has no preconditions and is async-signal-safe.
    unsafe { libc::raise(sig) };
}

/// The handler: only async-signal-safe calls (`sigaction`, `getpid`, `sem_post`, `raise`).
extern "C" fn on_signal(sig: libc::c_int) {
    let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    if action_of(sig) != Some(ours) {
        // Called by a handler the program installed over this one: the program decides.
        return;
    }
    // SAFETY: `getpid` has no preconditions.
    let owner = OWNER.load(Ordering::Acquire) == unsafe { libc::getpid() };
    if !owner || !READY.load(Ordering::Acquire) || STOPPING.swap(true, Ordering::AcqRel) {
        return end_by(sig);
    }
    SIGNAL.store(sig, Ordering::Release);
    // SAFETY: the semaphore was initialised before `READY` was set. `errno` is this thread's;
    // it is saved and restored around `sem_post`, so the interrupted code sees its own.
    unsafe {
        let errno = *libc::__errno_location();
        let posted = libc::sem_post(wake()) == 0;
        *libc::__errno_location() = errno;
        if !posted {
            end_by(sig);
        }
    }
}

/// The writing thread: waits for a signal, writes the report, and ends the process by that
/// signal.
fn wait_and_report(write_report: fn()) {
    loop {
        // SAFETY: the semaphore is initialised before this thread starts.
        if unsafe { libc::sem_wait(wake()) } == 0 {
            break;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // Nobody is left to write the report: the signals end the process again, as they
            // did before `install` (the handler ends it itself once `READY` is cleared).
            READY.store(false, Ordering::Release);
            let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            for sig in SIGNALS {
                if action_of(sig) == Some(ours) {
                    set_action(sig, libc::SIG_DFL);
                }
            }
            return;
        }
    }
    let sig = SIGNAL.load(Ordering::Acquire);
    write_report();
    set_action(sig, libc::SIG_DFL);
    // SAFETY: `kill` and `getpid` have no preconditions. The process ends by the signal's default
    // action: `kill` targets the whole process, and the signal goes to a thread of the program's
    // (this one blocks every signal).
    unsafe { libc::kill(libc::getpid(), sig) };
}
