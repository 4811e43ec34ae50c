//! `HEAPDELTA=report=PATH,signals=on` when the process is stopped by a signal: SIGTERM, SIGINT
//! and SIGHUP left at their default action write the report, and the process still ends by the
//! signal; a program that handles the signal itself, or whose handler calls the one it replaced,
//! keeps its own behaviour and writes the report at its exit. Without `signals=on` nothing
//! changes.
#![cfg(target_os = "linux")]

use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[path = "children/signal.rs"]
mod signal;
#[path = "children/wait.rs"]
mod wait;
use signal::stop_when_ready;
use wait::wait_or_kill;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Set in the child: how it treats SIGTERM (`default`, `handled`, `chained`).
const MODE: &str = "HEAPDELTA_TEST_SIGNAL_MODE";
/// Set in the child: the file it creates once it is ready for the signal.
const READY: &str = "HEAPDELTA_TEST_SIGNAL_READY";
const TEST: &str = "the_child";

static GOT_SIGNAL: AtomicBool = AtomicBool::new(false);
/// The handler the child's own replaced (for `chained`).
static REPLACED: AtomicUsize = AtomicUsize::new(0);

extern "C" fn own_handler(_: libc::c_int) {
    GOT_SIGNAL.store(true, Ordering::SeqCst);
}

/// Calls the handler it replaced, as `signal-hook` does.
extern "C" fn chaining_handler(sig: libc::c_int) {
    GOT_SIGNAL.store(true, Ordering::SeqCst);
    let previous = REPLACED.load(Ordering::SeqCst);
    if previous != libc::SIG_DFL && previous != libc::SIG_IGN {
        // SAFETY: `previous` is the handler `sigaction` reported, a function of this signature.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous) };
        f(sig);
    }
}

/// Installs `handler` for SIGTERM and returns the handler it replaced.
fn install(handler: extern "C" fn(libc::c_int)) -> libc::sighandler_t {
    // SAFETY: zeroed `sigaction`s are valid; the new one names an `extern "C" fn(c_int)`.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        let mut old: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGTERM, &action, &mut old), 0);
        old.sa_sigaction
    }
}

/// In the child: takes a checkpoint, says it is ready, and waits for the signal: killed by it
/// (`default`), or seeing its own handler run, then checkpointing and returning (exiting normally).
#[test]
fn the_child() {
    let (Some(mode), Some(ready)) = (std::env::var_os(MODE), std::env::var_os(READY)) else {
        return;
    };
    match mode.to_str() {
        Some("handled") => {
            install(own_handler);
        }
        Some("chained") => REPLACED.store(install(chaining_handler), Ordering::SeqCst),
        Some("fork") => {
            // A forked child, stopped by SIGTERM, ends by it at once: it has no thread to write
            // the report, which is its parent's anyway.
            // SAFETY: the child only sleeps until the signal ends it.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                loop {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            std::thread::sleep(Duration::from_millis(50));
            // SAFETY: `pid` is our child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let status = wait_or_kill(pid, Duration::from_secs(30)).expect("the child ends");
            assert_eq!(ended_by(status), Some(libc::SIGTERM));
            heapdelta::checkpoint("forked child ended");
            File::create(ready).unwrap();
            return;
        }
        _ => {}
    }
    let kept: Vec<u64> = vec![7; 1000];
    heapdelta::checkpoint("ready");
    File::create(ready).unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if GOT_SIGNAL.load(Ordering::SeqCst) {
            heapdelta::checkpoint("handled");
            drop(kept);
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no signal came");
}

struct Run {
    status: ExitStatus,
    report: Option<heapdelta::Timeline>,
    stderr: String,
}

/// Runs the child in `mode` under `report=` and `signals` (`signals=on` or `signals=off`), sends
/// it `sig` (if any) once it is ready, and waits for it.
fn run_with(mode: &str, signals: &str, sig: Option<libc::c_int>) -> Run {
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "heapdelta-signal-{mode}-{signals}-{}-{}",
        sig.unwrap_or(0),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (report, ready, err) = (dir.join("r.json"), dir.join("ready"), dir.join("stderr"));
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(MODE, mode)
        .env(READY, &ready)
        .env(
            "HEAPDELTA",
            format!("report={},{signals}", report.display()),
        )
        .stdout(Stdio::null())
        .stderr(File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = stop_when_ready(child, &ready, sig);
    let run = Run {
        status,
        report: report
            .exists()
            .then(|| heapdelta::Timeline::read_json(&report).expect("a whole report")),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
    };
    std::fs::remove_dir_all(&dir).unwrap();
    run
}

/// `run_with` under `signals=on`.
fn run(mode: &str, sig: Option<libc::c_int>) -> Run {
    run_with(mode, "signals=on", sig)
}

fn labels(t: &heapdelta::Timeline) -> Vec<&str> {
    t.checkpoints().iter().filter_map(|c| c.label()).collect()
}

/// The signal that ended a forked child, from its raw wait status.
fn ended_by(status: i32) -> Option<libc::c_int> {
    libc::WIFSIGNALED(status).then(|| libc::WTERMSIG(status))
}

#[test]
fn sigterm_writes_the_report_and_still_ends_the_process() {
    let run = run("default", Some(libc::SIGTERM));
    assert_eq!(run.status.signal(), Some(libc::SIGTERM), "{}", run.stderr);
    let report = run.report.expect("the report was written");
    assert_eq!(labels(&report), ["ready", "exit"]);
    let exit = report.checkpoints().last().unwrap();
    assert!(
        exit.totals().live_bytes >= 8000,
        "the kept vector is live at the signal"
    );
}

#[test]
fn without_signals_on_a_signal_ends_the_process_as_before_without_a_report() {
    let run = run_with("default", "signals=off", Some(libc::SIGTERM));
    assert_eq!(run.status.signal(), Some(libc::SIGTERM), "{}", run.stderr);
    assert!(run.report.is_none());
}

#[test]
fn sigint_and_sighup_write_the_report_too() {
    for sig in [libc::SIGINT, libc::SIGHUP] {
        let run = run("default", Some(sig));
        assert_eq!(run.status.signal(), Some(sig), "{}", run.stderr);
        assert_eq!(labels(&run.report.expect("written")), ["ready", "exit"]);
    }
}

#[test]
fn a_program_handling_the_signal_keeps_its_behaviour_and_reports_at_exit() {
    for mode in ["handled", "chained"] {
        let run = run(mode, Some(libc::SIGTERM));
        assert!(run.status.success(), "{mode}: {}", run.stderr);
        let report = run.report.expect("written at exit");
        assert_eq!(labels(&report), ["ready", "handled", "exit"], "{mode}");
    }
}

#[test]
fn a_forked_child_stopped_by_a_signal_ends_at_once_and_leaves_the_report_to_its_parent() {
    let run = run("fork", None);
    assert!(run.status.success(), "{}", run.stderr);
    let report = run.report.expect("written at exit");
    assert_eq!(labels(&report), ["forked child ended", "exit"]);
}
