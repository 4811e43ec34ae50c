//! heapdelta's own threads (`every=`'s, and `signals=on`'s) block every signal, so a program that
//! blocks a signal in its threads and takes it with `sigwait` still gets it: it shuts down as it
//! meant to, and the report is written at its exit. (Without a test harness: the harness's main
//! thread, not blocking the signal, would take it.)

use std::process::{Command, Stdio};

#[path = "children/signal.rs"]
mod signal;
use signal::stop_when_ready;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Set in the child: the file it creates once it is ready for the signal.
const READY: &str = "HEAPDELTA_TEST_SIGWAIT_READY";

/// The child: blocks SIGTERM in every thread of its own, waits for it with `sigwait` on another
/// thread, and returns from `main` when it came.
fn child(ready: &str) {
    // SAFETY: valid signal sets; the mask is inherited by the thread spawned below.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        assert_eq!(
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()),
            0
        );
        set
    };
    let waiter = std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: `set` is a valid signal set, blocked in this thread; `sig` a valid out-pointer.
        assert_eq!(unsafe { libc::sigwait(&set, &mut sig) }, 0);
        sig
    });
    heapdelta::checkpoint("ready");
    std::fs::File::create(ready).unwrap();
    assert_eq!(waiter.join().unwrap(), libc::SIGTERM);
    heapdelta::checkpoint("shut down");
}

fn main() {
    if let Ok(ready) = std::env::var(READY) {
        return child(&ready);
    }
    for config in ["signals=on", "every=0.1"] {
        let dir = std::env::temp_dir().join(format!(
            "heapdelta-sigwait-{}-{}",
            config.replace('=', "-"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (report, ready) = (dir.join("r.json"), dir.join("ready"));
        let child = Command::new(std::env::current_exe().unwrap())
            .env(READY, &ready)
            .env("HEAPDELTA", format!("report={},{config}", report.display()))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let status = stop_when_ready(child, &ready, Some(libc::SIGTERM));
        assert!(status.success(), "{config}: {status}");
        let timeline = heapdelta::Timeline::read_json(&report).expect("written at exit");
        let labels: Vec<_> = timeline
            .checkpoints()
            .iter()
            .filter_map(|c| c.label())
            .collect();
        assert!(labels.contains(&"shut down"), "{config}: {labels:?}");
        std::fs::remove_dir_all(&dir).unwrap();
        println!("{config}: the program took its SIGTERM with sigwait");
    }
}
