//! Waiting for a forked child without hanging the test when the child hangs.

use std::thread;
use std::time::{Duration, Instant};

/// Waits for `pid` up to `limit`; kills it and returns `None` if it is still running then.
pub fn wait_or_kill(pid: libc::pid_t, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
            return Some(status);
        }
        if start.elapsed() > limit {
            // SAFETY: as above; the child is reaped after the kill.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}
