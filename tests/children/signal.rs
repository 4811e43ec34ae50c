//! Stopping a child process by a signal once it says it is ready, without hanging the test when it
//! never gets ready or never ends.

use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// Waits up to a minute for `child` to create `ready`, sends it `sig` (if any), and waits up to a
/// minute for it to end; kills it and panics if it does not.
pub fn stop_when_ready(mut child: Child, ready: &Path, sig: Option<libc::c_int>) -> ExitStatus {
    let limit = Duration::from_secs(60);
    let start = Instant::now();
    while !ready.exists() && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !ready.exists() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the child never got ready");
    }
    if let Some(sig) = sig {
        // SAFETY: the child is not reaped yet, so its pid is still its own.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    }
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the child did not end");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
