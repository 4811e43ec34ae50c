//! `measure` on a thread that shares its counters with others (more than 255 threads alive) says
//! so once on stderr, and in the delta (`Delta::counts_other_threads`, a line of its text).

use std::process::Command;

#[path = "common/threads.rs"]
mod threads;
use threads::while_threads_hold;

use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

/// Set in the child (see `the_child`).
const CHILD: &str = "HEAPDELTA_TEST_SHARED_SLOT_CHILD";
/// More threads than there are private slots (255), all alive while the child measures.
const THREADS: usize = 300;
/// The hint's words.
const HINT: &str = "measure() ran on a thread without counters of its own";
/// Where the child prints `Delta::counts_other_threads`.
const FLAG: &str = "counts other threads: ";
/// The words of the delta's line that says so.
const NOTE: &str = "counted with other threads";

/// In the child (`CHILD=shared`): `measure` on a thread started after every private slot is
/// taken; (`CHILD=own`): `measure` on the main thread alone.
#[test]
fn the_child() {
    match std::env::var(CHILD).as_deref() {
        Ok("shared") => {
            let d = while_threads_hold(
                THREADS,
                || vec![1u8; 64],
                || {
                    std::thread::spawn(|| heapdelta::measure(|| vec![0u8; 64]).1)
                        .join()
                        .unwrap()
                },
            );
            println!("{FLAG}{}\n{d}", d.counts_other_threads());
        }
        Ok(_) => {
            let d = heapdelta::measure(|| vec![0u8; 64]).1;
            println!("{FLAG}{}\n{d}", d.counts_other_threads());
        }
        Err(_) => {}
    }
}

/// The child's stdout and stderr in mode `mode`.
fn child(mode: &str) -> (String, String) {
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["the_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env_remove("HEAPDELTA")
        .output()
        .expect("the child runs");
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn measure_on_a_thread_sharing_its_counters_says_so_once_on_stderr() {
    let (_, stderr) = child("shared");
    assert_eq!(stderr.matches(HINT).count(), 1, "{stderr}");
}

#[test]
fn measure_on_a_thread_sharing_its_counters_says_so_in_the_delta() {
    let (stdout, _) = child("shared");
    assert!(stdout.contains(&format!("{FLAG}true")), "{stdout}");
    assert!(stdout.contains(NOTE), "{stdout}");
}

#[test]
fn measure_on_a_thread_of_its_own_says_nothing() {
    let (stdout, stderr) = child("own");
    assert!(!stderr.contains(HINT), "{stderr}");
    assert!(stdout.contains(&format!("{FLAG}false")), "{stdout}");
    assert!(!stdout.contains(NOTE), "{stdout}");
}
