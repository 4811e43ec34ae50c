//! A signal handler that allocates while the interrupted thread is opening or closing its fast
//! paths (entering and leaving scopes) is counted without crashing the program. Allocating in a
//! handler is not async-signal-safe, but glibc's malloc survives it when the handler did not
//! interrupt malloc itself, and programs do it; a review found that the inlined paths then wrote
//! through a null slot (a segmentation fault within seconds).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use heapdelta::{CallSites, Tracker};

#[global_allocator]
static GLOBAL: Tracker = Tracker::new().call_sites(CallSites::Off);

static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn allocate_on_signal(_: libc::c_int) {
    drop(std::hint::black_box(Box::new(7u64)));
    HANDLED.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn allocating_in_a_signal_handler_while_scopes_open_and_close_does_not_crash() {
    // SAFETY: `sa` is a zeroed `sigaction` given a handler of the right type and an empty mask;
    // the handler only allocates, frees and adds to an atomic.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = allocate_on_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
    }
    // SAFETY: `pthread_self` has no preconditions.
    let target = unsafe { libc::pthread_self() };
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                // SAFETY: `target` is the test's thread, alive until `stop` is set (the scope
                // joins this thread before the test's thread goes on).
                unsafe { libc::pthread_kill(target, libc::SIGUSR1) };
            }
        });
        let start = Instant::now();
        while HANDLED.load(Ordering::Relaxed) < 50_000 && start.elapsed() < Duration::from_secs(2) {
            for _ in 0..100 {
                let _outer = heapdelta::scope("outer");
                let _inner = heapdelta::scope("inner");
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(HANDLED.load(Ordering::Relaxed) > 0, "no signal was handled");
}
