//! The `HEAPDELTA=report=` file when the process is stopped by a signal. Services are stopped with
//! SIGTERM (and SIGINT, SIGHUP), whose default action ends the process without running the exit
//! handlers, so the report would never be written. For each of the three whose action is still
//! the default when `HEAPDELTA` is read (before `main`), a handler is installed; when the signal
//! comes, a thread of heapdelta's writes the report, then the signal's default action is restored
//! and the signal raised again, so the process ends as it would have, with the same status.
//!
//! A program that handles the signal itself keeps its behaviour: a handler it installs replaces
//! heapdelta's, and when that handler calls the one it replaced (as `signal-hook` and so tokio's
//! signal handling do), heapdelta's sees that it is no longer the installed one and does nothing;
//! the program's own shutdown then writes the report at exit. A forked child ends at once, as
//! it would have (the report is its parent's). A second signal while the report is written ends
//! the process at once.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

const SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// The write end of the pipe through which the handler passes the signal to the writing thread.
static PIPE_IN: AtomicI32 = AtomicI32::new(-1);
/// The process that installed the handlers.
static OWNER: AtomicI32 = AtomicI32::new(0);
/// Set when a signal has been passed on: a second one ends the process at once.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Installs the handlers and starts the thread that runs `write_report` when one of the signals
/// comes; an error message when that cannot be done (the signals then keep their default action).
pub(crate) fn install(write_report: fn()) -> Result<(), String> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors `pipe2` writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "no pipe for the signal handler: {}",
            std::io::Error::last_os_error()
        ));
    }
    let [read_end, write_end] = fds;
    // Unnamed, like the checkpoint thread (see `config::apply_once`).
    let spawned = std::thread::Builder::new()
        .spawn(move || crate::thread::untracked(|| wait_and_report(read_end, write_report)));
    if let Err(e) = spawned {
        // SAFETY: both descriptors were just opened here and are used nowhere else.
        unsafe {
            libc::close(read_end);
            libc::close(write_end);
        }
        return Err(format!("no thread to write the report on a signal: {e}"));
    }
    PIPE_IN.store(write_end, Ordering::Release);
    // SAFETY: `getpid` has no preconditions.
    OWNER.store(unsafe { libc::getpid() }, Ordering::Release);
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

/// The handler: only async-signal-safe calls (`sigaction`, `getpid`, `write`, `raise`).
extern "C" fn on_signal(sig: libc::c_int) {
    let ours = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    if action_of(sig) != Some(ours) {
        // Called by a handler the program installed over this one: the program decides.
        return;
    }
    // SAFETY: `getpid` has no preconditions.
    let owner = OWNER.load(Ordering::Acquire) == unsafe { libc::getpid() };
    let pipe = PIPE_IN.load(Ordering::Acquire);
    if !owner || pipe < 0 || STOPPING.swap(true, Ordering::AcqRel) {
        return end_by(sig);
    }
    // SAFETY: `errno` is this thread's; it is saved and restored around the `write`, which may
    // set it, so the interrupted code sees its own. `byte` is one valid byte.
    unsafe {
        let errno = *libc::__errno_location();
        let byte = sig as u8;
        let sent = libc::write(pipe, (&byte as *const u8).cast(), 1) == 1;
        *libc::__errno_location() = errno;
        if !sent {
            end_by(sig);
        }
    }
}

/// The writing thread: waits for a signal's number on `read_end`, writes the report, and ends
/// the process by that signal.
fn wait_and_report(read_end: libc::c_int, write_report: fn()) {
    let sig = loop {
        let mut byte = 0u8;
        // SAFETY: reads at most one byte into `byte`.
        let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
        match n {
            1 => break libc::c_int::from(byte),
            -1 if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    };
    write_report();
    set_action(sig, libc::SIG_DFL);
    // SAFETY: `kill` and `getpid` have no preconditions; the process ends by the signal's
    // default action (this thread does not block it, and `kill` targets the whole process).
    unsafe { libc::kill(libc::getpid(), sig) };
}
