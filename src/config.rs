//! Run-time configuration from the `HEAPDELTA` environment variable, e.g.
//! `HEAPDELTA=sites=sampled:524288,depth=16,report=heapdelta.json,every=10`.
//!
//! | key | values | meaning |
//! | --- | --- | --- |
//! | `sites` | `exact`, `off`, `sampled:BYTES` | call-site mode ([`CallSites`]) |
//! | `depth` | 0 to 64 | frames kept per call site (0: none) |
//! | `report` | a path | at exit, write the timeline and a final snapshot there (JSON) |
//! | `every` | an interval of at least 0.1 s: `10`, `0.5`, `10s`, `500ms`, `5m`, `5min`, `1h` | take a checkpoint automatically at that interval |
//! | `keep` | a number of checkpoints, at least 2 | keep the first checkpoint and the latest, dropping the ones between |
//! | `signals` | `on`, `off` | with `report`, also write it when SIGTERM, SIGINT or SIGHUP stops the process (see `signals.rs`) |
//! | `rewrite` | `on`, `off` | with `report` and `every`, also rewrite the report after the clock's checkpoints (see `write_report_so_far`) |
//! | `seed` | a whole number (0 the default) | where sampling's random sequences start: another seed draws another sample |
//!
//! A malformed entry is reported as one line naming its key, and that setting keeps its default;
//! the other entries still apply.

//!
//! The variable is read once, when the tracker records its first event (with the reentrancy guard
//! set, through `libc::getenv`, which takes no Rust lock).

use std::ffi::CStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::Duration;

use once_cell::sync::OnceCell;

use crate::diff::GROWTH_WINDOW;
use crate::report::text::{breaks_line, thousands, OneLine};
use crate::tracker::CallSites;

/// The environment variable read.
pub(crate) const VAR: &str = "HEAPDELTA";

/// Most frames a call site keeps (as `Tracker::depth` clamps).
const MAX_DEPTH: usize = 64;

/// Settings given in `HEAPDELTA`; `None` leaves the static setting alone.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Config {
    pub sites: Option<CallSites>,
    pub depth: Option<usize>,
    pub report: Option<PathBuf>,
    pub every: Option<Duration>,
    pub keep: Option<usize>,
    pub signals: Option<bool>,
    pub rewrite: Option<bool>,
    pub seed: Option<u64>,
}

/// The keys, as messages list them.
const KEYS: &str = "sites, depth, report, every, keep, signals, rewrite, seed";

/// Parses a `HEAPDELTA` value: the settings, and one message per bad entry.
pub(crate) fn parse(value: &str) -> (Config, Vec<String>) {
    let mut config = Config::default();
    let mut errors = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((key, val)) = entry.split_once('=') else {
            errors.push(format!("{VAR}: {entry:?} is not key=value (keys: {KEYS})"));
            continue;
        };
        let (key, val) = (key.trim(), val.trim());
        if key.is_empty() {
            errors.push(format!(
                "{VAR}: {entry:?} has no key before the \"=\"; ignored"
            ));
            continue;
        }
        let shown = one_line(key);
        if seen.contains(&key) {
            errors.push(format!(
                "{VAR}: {shown} is given more than once; using the last, {shown}={val:?}"
            ));
        }
        seen.push(key);
        let parsed = match key {
            "sites" => parse_sites(val).map(|m| config.sites = Some(m)),
            "depth" => parse_depth(val).map(|d| config.depth = Some(d)),
            "report" if val.is_empty() => Err("expected a file path".to_string()),
            "report" => {
                // A legal file name, but more likely settings run together by another separator
                // (a user trial's `report=a.json;every=1` wrote a file of that name and took no
                // checkpoints): written as given, with a word.
                if val.contains('=') {
                    errors.push(format!(
                        "{VAR}: the report path {val:?} holds a \"=\": settings are separated by \
                         \",\"; writing the report to that path as given"
                    ));
                }
                config.report = Some(PathBuf::from(val));
                Ok(())
            }
            "every" => parse_every(val).map(|d| config.every = Some(d)),
            "keep" => parse_keep(val).map(|n| {
                // Accepted, with a word: fewer steps than the growth detector compares (a user
                // trial's `keep=4` gave a verdict on 2 steps with nothing said).
                let steps = n - 2;
                if steps < GROWTH_WINDOW {
                    errors.push(format!(
                        "{VAR}: keep={n} leaves the growth detector {steps} of the \
                         {GROWTH_WINDOW} steps it compares (keep={} leaves them all); keeping \
                         {n} as given",
                        GROWTH_WINDOW + 2
                    ));
                }
                config.keep = Some(n)
            }),
            "signals" => parse_on_off(val).map(|on| config.signals = Some(on)),
            "rewrite" => parse_on_off(val).map(|on| config.rewrite = Some(on)),
            "seed" => val
                .parse::<u64>()
                .map(|seed| config.seed = Some(seed))
                .map_err(|_| format!("expected a whole number from 0 to {}", u64::MAX)),
            _ => Err(format!("unknown key (keys: {KEYS})")),
        };
        if let Err(why) = parsed {
            // Unset (the program's own setting, or the default), even when an earlier entry set the
            // key: the last entry decides.
            match key {
                "sites" => config.sites = None,
                "depth" => config.depth = None,
                "report" => config.report = None,
                "every" => config.every = None,
                "keep" => config.keep = None,
                "signals" => config.signals = None,
                "rewrite" => config.rewrite = None,
                "seed" => config.seed = None,
                _ => {}
            }
            errors.push(format!(
                "{VAR}: bad {shown}={val:?}: {why}; ignored, as if not set"
            ));
        }
    }
    (config, errors)
}

/// A key as a message shows it: as written, or quoted and escaped when it holds a control
/// character or a line separator (which would split the message's one line).
fn one_line(text: &str) -> String {
    if text.chars().any(breaks_line) {
        format!("{text:?}")
    } else {
        text.to_string()
    }
}

fn parse_sites(val: &str) -> Result<CallSites, String> {
    const EXPECTED: &str = "expected exact, off or sampled:BYTES";
    match val {
        "exact" => Ok(CallSites::Exact),
        "off" => Ok(CallSites::Off),
        _ => {
            let bytes = val.strip_prefix("sampled:").ok_or(EXPECTED)?;
            match bytes.parse::<u64>() {
                Ok(mean_bytes) if mean_bytes > 0 => Ok(CallSites::Sampled { mean_bytes }),
                _ => Err(format!("{EXPECTED}, with BYTES a whole number above 0")),
            }
        }
    }
}

fn parse_depth(val: &str) -> Result<usize, String> {
    match val.parse::<usize>() {
        Ok(d) if d <= MAX_DEPTH => Ok(d),
        _ => Err(format!("expected a number of frames from 0 to {MAX_DEPTH}")),
    }
}

fn parse_on_off(val: &str) -> Result<bool, String> {
    match val {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err("expected on or off".to_string()),
    }
}

fn parse_keep(val: &str) -> Result<usize, String> {
    match val.parse::<usize>() {
        Ok(n) if n >= 2 => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => Err(format!(
            "too large: at most {} checkpoints",
            thousands(usize::MAX as u64)
        )),
        _ => Err("expected a number of checkpoints of at least 2".to_string()),
    }
}

/// The shortest `every=` interval: checkpoints are labelled with the seconds to one decimal, so
/// shorter intervals would give several the same label (and a checkpoint thread that never
/// rests).
const MIN_EVERY_SECS: f64 = 0.1;

fn parse_every(val: &str) -> Result<Duration, String> {
    let expected = || {
        format!(
            "expected a number of seconds of at least {MIN_EVERY_SECS}, e.g. 10 or 0.5s, or of \
             another unit: 500ms, 5m (or 5min), 1h"
        )
    };
    // `10s` as well as `10` (the checkpoints' labels are written with the `s`), and the units an
    // operator writes an interval in (a trial's `every=5m` was refused).
    let (number, unit) = [
        ("ms", 0.001),
        ("min", 60.0),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
    ]
    .iter()
    .find_map(|&(suffix, unit)| Some((val.strip_suffix(suffix)?, unit)))
    .unwrap_or((val, 1.0));
    let secs = number.parse::<f64>().map_err(|_| expected())? * unit;
    if secs.is_nan() || secs < MIN_EVERY_SECS {
        return Err(expected());
    }
    Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("too large: at most {} seconds", thousands(u64::MAX)))
}

/// 0: not read yet; 1: being read; 2: applied.
static STATE: AtomicU8 = AtomicU8::new(0);
/// The call-site override, packed: 0 = none; else bits 0-1 mode (1 exact, 2 off, 3 sampled),
/// bits 2-8 depth (0 = keep the static one), bits 9-63 the sampling mean.
static OVERRIDE: AtomicU64 = AtomicU64::new(0);
static REPORT_PATH: OnceCell<PathBuf> = OnceCell::new();
/// The process that read `report=`: a child it forks inherits the exit handler, and must not
/// write its parent's report.
static REPORT_PID: AtomicU32 = AtomicU32::new(0);
/// `rewrite=on`, with `report=` and `every=` both set.
static REWRITE: AtomicBool = AtomicBool::new(false);
/// Whether a failure to rewrite the report has been said (see `write_report_so_far`).
static REWRITE_SAID: AtomicBool = AtomicBool::new(false);
/// `seed=`: mixed into every thread's sampling seed (see `sampling_seed`).
static SEED: AtomicU64 = AtomicU64::new(0);

/// Whether `HEAPDELTA` has been read: the condition for a thread to record directly.
pub(crate) fn applied() -> bool {
    STATE.load(Ordering::Acquire) == 2
}

/// Whether `HEAPDELTA` overrides a tracker's call-site settings: the inlined paths, which use the
/// tracker's own, are closed (see `thread::State::exact`).
#[inline]
pub(crate) fn overridden() -> bool {
    OVERRIDE.load(Ordering::Relaxed) != 0
}

/// The mean of the sampling the tracker records call sites with, plus one (0: not sampled, or no
/// event recorded yet); set by `effective`, which a thread's first allocation calls (it takes the
/// slow path), and so the process's first tracked event.
static SAMPLED_MEAN: AtomicU64 = AtomicU64::new(0);

/// The call-site mode and depth to use: the tracker's static ones unless `HEAPDELTA` overrides
/// them.
#[inline]
pub(crate) fn effective(mode: CallSites, depth: usize) -> (CallSites, usize) {
    let packed = OVERRIDE.load(Ordering::Relaxed);
    let (mode, depth) = if packed == 0 {
        (mode, depth)
    } else {
        unpack(packed, mode, depth)
    };
    let mean = match mode {
        CallSites::Sampled { mean_bytes } => mean_bytes.saturating_add(1),
        _ => 0,
    };
    // Written only when it changes: every event under an override that allocates out of line
    // comes here.
    if SAMPLED_MEAN.load(Ordering::Relaxed) != mean {
        SAMPLED_MEAN.store(mean, Ordering::Relaxed);
    }
    (mode, depth)
}

/// `effective`, for recording a new block: sampled call sites wait until `HEAPDELTA` has been
/// read, so that every sampled block is weighed with the mean it will be freed with (a block's
/// header says that it was sampled, not with which mean). Until then, in the moment a thread that
/// is not the one reading `HEAPDELTA` may record in, sampled modes record no call site; totals and
/// size classes are exact as always.
pub(crate) fn for_recording(mode: CallSites, depth: usize) -> (CallSites, usize) {
    // The state first: once it says applied, the override it was applied with is visible (it is
    // stored before the state), so the mode below is the one frees will use.
    let applied = STATE.load(Ordering::Acquire) == 2;
    let (mode, depth) = effective(mode, depth);
    match mode {
        CallSites::Sampled { .. } if !applied => (CallSites::Off, depth),
        _ => (mode, depth),
    }
}

/// The mean of the sampling in effect, in bytes, when call sites are sampled: per-site figures
/// are then estimates.
pub(crate) fn sampled_mean() -> Option<u64> {
    SAMPLED_MEAN.load(Ordering::Relaxed).checked_sub(1)
}

/// The call-site mode and depth the override `packed` (non-zero, see `pack`) gives a tracker
/// whose static ones are `mode` and `depth`.
fn unpack(packed: u64, mode: CallSites, depth: usize) -> (CallSites, usize) {
    let mode = match packed & 3 {
        1 => CallSites::Exact,
        2 => CallSites::Off,
        3 => CallSites::Sampled {
            mean_bytes: packed >> 9,
        },
        _ => mode,
    };
    // The depth is stored plus one (see `pack`): 0 keeps the static one.
    let d = ((packed >> 2) & 0x7F) as usize;
    (mode, d.checked_sub(1).unwrap_or(depth))
}

/// The tracker's own call-site settings, packed as `pack` packs an override of both (0: not
/// known yet), noted by its slow paths before a thread's first event reads `HEAPDELTA`.
static OWN_SETTINGS: AtomicU64 = AtomicU64::new(0);

/// Notes the tracker's own call-site settings, for `apply_once` (see `unchanged`).
pub(crate) fn note_own(mode: CallSites, depth: usize) {
    if OWN_SETTINGS.load(Ordering::Relaxed) == 0 {
        let settings = Config {
            sites: Some(mode),
            depth: Some(depth),
            ..Config::default()
        };
        OWN_SETTINGS.store(pack(&settings), Ordering::Relaxed);
    }
}

/// The override `packed`, or 0 when it gives the tracker's own settings `own` (packed alike; 0:
/// not known): such an override is dropped before any thread records, since every event under
/// an override takes an out-of-line path (a user trial: `HEAPDELTA=sites=exact`, the default,
/// cost 2.20× `System` against 1.81× without it).
fn unchanged(packed: u64, own: u64) -> u64 {
    if packed == 0 || own == 0 {
        return packed;
    }
    let (mode, depth) = unpack(own, CallSites::Off, 0);
    if unpack(packed, mode, depth) == (mode, depth) {
        0
    } else {
        packed
    }
}

fn pack(config: &Config) -> u64 {
    let (mode, mean) = match config.sites {
        None => (0, 0),
        Some(CallSites::Exact) => (1, 0),
        Some(CallSites::Off) => (2, 0),
        Some(CallSites::Sampled { mean_bytes }) => (3, mean_bytes.min(u64::MAX >> 9)),
    };
    // The depth plus one, so that 0 says "no override" and a depth of 0 can be one.
    let depth = config.depth.map_or(0, |d| d.min(MAX_DEPTH) as u64 + 1);
    if mode == 0 && depth == 0 {
        return 0;
    }
    // Mode bits 0 with a depth keep the tracker's static mode (see `effective`).
    mode | depth << 2 | mean << 9
}

/// The `seed=` given in `HEAPDELTA` (0 when none): the sampler of every thread with a slot of its
/// own starts from a sequence of its own that this shifts, so that a run is repeatable and
/// another seed draws another sample. A thread that starts while another reads the variable
/// (before `main`, when a program has one thread) is seeded without it, and one on the shared
/// slot (see `stats::shared_slot`) keeps the sequence it started with.
pub(crate) fn sampling_seed() -> u64 {
    SEED.load(Ordering::Relaxed)
}

/// Reads and applies `HEAPDELTA` once per process. Called by the tracker on a thread's first event,
/// with the reentrancy guard set (so what this allocates is not counted).
#[cold]
pub(crate) fn apply_once() {
    if STATE.load(Ordering::Acquire) != 0
        || STATE
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    {
        return;
    }
    // SAFETY: `getenv` returns null or a NUL-terminated string owned by the environment; it is
    // copied at once. (A concurrent `setenv` could invalidate it: Rust's own `set_var` has that
    // caveat too; it is read once, at the first allocation.)
    let raw = unsafe {
        let p = libc::getenv(c"HEAPDELTA".as_ptr());
        (!p.is_null()).then(|| CStr::from_ptr(p).to_bytes().to_vec())
    };
    let value = raw.and_then(|raw| match String::from_utf8(raw) {
        Ok(value) => Some(value),
        Err(_) => {
            // A lossy decoding could change a `report=` path into another file's.
            say("HEAPDELTA: the value is not valid UTF-8; ignoring all of it");
            None
        }
    });
    if let Some(value) = value {
        let (config, errors) = parse(&value);
        for e in errors {
            say(&e);
        }
        // Before the clock's thread starts: its sampler is seeded from it too.
        SEED.store(config.seed.unwrap_or(0), Ordering::Relaxed);
        let own = OWN_SETTINGS.load(Ordering::Relaxed);
        OVERRIDE.store(unchanged(pack(&config), own), Ordering::Relaxed);
        if let Some(path) = config.report {
            // Written at exit, when the program may have changed its directory.
            let path = std::path::absolute(&path).unwrap_or(path);
            if let Some(problem) = unwritable(&path) {
                say(&format!(
                    "HEAPDELTA: report={}: {problem}; writing it at exit will fail unless that changes",
                    path.display()
                ));
                // Said: the rewrites that fail for it say nothing more.
                REWRITE_SAID.store(true, Ordering::Relaxed);
            }
            if REPORT_PATH.set(path).is_ok() {
                REPORT_PID.store(std::process::id(), Ordering::Relaxed);
                // SAFETY: `write_report_at_exit` is an `extern "C" fn()` that never unwinds.
                if unsafe { libc::atexit(write_report_at_exit) } != 0 {
                    say("HEAPDELTA: could not register the exit report");
                }
                if config.signals == Some(true) {
                    on_signals();
                }
            }
        }
        if config.signals == Some(true) && REPORT_PATH.get().is_none() {
            say("HEAPDELTA: signals=on writes the report= file, and there is none; ignoring it");
        }
        if config.rewrite == Some(true) {
            match (REPORT_PATH.get(), config.every) {
                (Some(_), Some(_)) => REWRITE.store(true, Ordering::Relaxed),
                _ => say(
                    "HEAPDELTA: rewrite=on rewrites the report= file after each checkpoint of \
                     every=, and needs both; ignoring it",
                ),
            }
        }
        if let Some(keep) = config.keep {
            crate::checkpoint::keep_at_most(keep);
        }
        if let Some(every) = config.every {
            // Find a global pool now, on this thread, rather than on the checkpoint thread.
            crate::pool::global_pool();
            let spawned = spawn_own(c"heapdelta-clock", move || checkpoint_every(every));
            if spawned.is_err() {
                say("HEAPDELTA: could not start the checkpoint thread for every=");
            }
        }
    }
    STATE.store(2, Ordering::Release);
}

/// Why the report cannot be written to `path` as things stand, checked at start so that the user
/// hears of it before the run rather than after: `None` when it looks writable.
fn unwritable(path: &Path) -> Option<String> {
    let dir = crate::report::directory_of(path);
    match std::fs::metadata(dir) {
        Err(e) => {
            return Some(format!(
                "its directory {} cannot be used: {e}",
                dir.display()
            ))
        }
        Ok(m) if !m.is_dir() => return Some(format!("{} is not a directory", dir.display())),
        Ok(_) => {}
    }
    if path.is_dir() {
        return Some("that is a directory".to_string());
    }
    // An existing file is written in place when its directory refuses new files: ask about the
    // file then, about the directory otherwise.
    let (target, what) = match path.exists() {
        true => (path, "it is not writable"),
        false => (dir, "its directory is not writable"),
    };
    let denied = !crate::report::may_access(target, libc::W_OK);
    denied.then(|| format!("{what}: {}", io::Error::last_os_error()))
}

/// Takes a checkpoint at every multiple of `interval` on heapdelta's clock (the checkpoints'
/// `seconds`, started here at the latest), labelled with that time truncated to a tenth of a
/// second: labels of ticks at least 0.1 s apart differ, and a label says when its checkpoint was
/// due. When a checkpoint runs past the next tick, the latest tick due is taken at once and the
/// ones before it are skipped. Everything the thread does is heapdelta's own work: none of its
/// allocations is the program's, and under a [`Pool`](crate::Pool) none of them takes a pool heap
/// (and an arena) for this thread.
fn checkpoint_every(interval: Duration) {
    crate::thread::untracked(|| {
        let step = interval.as_millis().max(1);
        let now = || (crate::checkpoint::seconds() * 1000.0) as u128;
        let mut tick = now() / step;
        // When the report may be rewritten next (`rewrite=on`).
        let mut rewrite_at = std::time::Instant::now();
        loop {
            tick = (tick + 1).max(now() / step);
            let due = tick * step;
            if let Some(wait) = due.checked_sub(now()).filter(|&ms| ms > 0) {
                std::thread::sleep(millis(wait));
            }
            crate::checkpoint::clock_checkpoint(format!("{}.{}s", due / 1000, due % 1000 / 100));
            let start = std::time::Instant::now();
            if REWRITE.load(Ordering::Relaxed) && start >= rewrite_at {
                write_report_so_far();
                // Rewrites take at most a tenth of the time: the file grows with the run, and
                // a rewrite of a long run's timeline takes long enough to crowd out the ticks.
                rewrite_at = std::time::Instant::now() + start.elapsed() * REWRITE_PAUSE;
            }
        }
    })
}

/// After a rewrite of the report, the clock's checkpoints skip rewriting it for this many times
/// as long as it took.
const REWRITE_PAUSE: u32 = 9;

/// `ms` milliseconds, or the longest sleep a `Duration` of milliseconds holds (half a billion
/// years) when that is more: an `every=` of 2^64 ms and more waits that long, not its remainder.
fn millis(ms: u128) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// `signals=on`: the report is also written when SIGTERM, SIGINT or SIGHUP stops the process.
#[cfg(target_os = "linux")]
fn on_signals() {
    if let Err(e) = crate::signals::install(|| write_report_at_exit()) {
        say(&format!(
            "HEAPDELTA: {e}; a stop by SIGTERM, SIGINT or SIGHUP will not write the report"
        ));
    }
}

#[cfg(not(target_os = "linux"))]
fn on_signals() {
    say("HEAPDELTA: signals=on is only supported on Linux; ignoring it");
}

/// The stack of heapdelta's own threads: std's default.
const OWN_STACK: usize = 2 << 20;

/// Starts a thread of heapdelta's own with every signal blocked, so that signals meant for the
/// program (a thread of its waiting in `sigwait`, say) are never delivered to it. `name` (at most
/// 15 bytes) is the name the system shows for it (`top -H`, `/proc/PID/task/*/comm`).
pub(crate) fn spawn_own(name: &'static CStr, f: impl FnOnce() + Send + 'static) -> io::Result<()> {
    // SAFETY: `all` and `before` are valid signal sets; a new thread starts with its creator's
    // mask, which is restored at once.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
        // Unnamed: std copies a thread's name on the new thread before running it, outside
        // heapdelta's guard, which would count as the program's block and, under a pool, give
        // this thread a pool heap and an arena of its own.
        // The stack size is given, std's default, so that `spawn` does not read
        // `RUST_MIN_STACK` under std's environment lock: this runs inside the program's first
        // allocation, which may be made under that lock (`env::var` copying a value).
        let spawned = std::thread::Builder::new()
            .stack_size(OWN_STACK)
            .spawn(move || {
                name_this_thread(name);
                f()
            });
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        spawned.map(drop)
    }
}

/// Gives the calling thread `name` in the system's view, without std's thread name, which std
/// copies on the new thread outside heapdelta's guard (see `spawn_own`). Linux only.
fn name_this_thread(name: &CStr) {
    #[cfg(target_os = "linux")]
    // SAFETY: `name` is NUL-terminated; `PR_SET_NAME` reads at most 16 bytes of it and copies
    // them, and only names the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, name.as_ptr());
    }
    #[cfg(not(target_os = "linux"))]
    let _ = name;
}

/// Whether the report has been written (or is being written): it is written once, by whichever
/// of the exit and a signal comes first; the other waits for it to be complete.
static REPORT_WRITTEN: std::sync::Mutex<bool> = std::sync::Mutex::new(false);

extern "C" fn write_report_at_exit() {
    let Some(path) = REPORT_PATH.get() else {
        return;
    };
    if REPORT_PID.load(Ordering::Relaxed) != std::process::id() {
        return;
    }
    let mut written = REPORT_WRITTEN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if std::mem::replace(&mut *written, true) {
        return;
    }
    let result = std::panic::catch_unwind(|| at_exit_report(path));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => say(&format!(
            "HEAPDELTA: could not write the report to {}: {}",
            path.display(),
            crate::report::unnamed(path, &e.to_string())
        )),
        Err(_) => say("HEAPDELTA: writing the exit report failed"),
    }
}

/// `rewrite=on` (see `checkpoint_every`): rewrites the report file as it stands after a
/// checkpoint of the clock, its checkpoints so far without the `exit` snapshot, so that a process
/// ended without its exit handlers (SIGKILL, the out-of-memory killer) leaves its timeline up to
/// a recent tick. The file is only ever replaced whole, written beside it and renamed over it, so
/// a reader or a kill never meets half of it: when that cannot be done (a file with other names
/// or another owner, not a regular file, a directory that refuses the new file), nothing is
/// written until the exit report. Never once the exit report is written, which has the last
/// word. A failure is said once, and a later tick tries again.
fn write_report_so_far() {
    let Some(path) = REPORT_PATH.get() else {
        return;
    };
    if REPORT_PID.load(Ordering::Relaxed) != std::process::id() {
        return;
    }
    // A symbolic link: the file it names is replaced (a user trial's link was left alone, and
    // a kill then left nothing).
    let resolved = crate::report::link_target(path);
    let path = resolved.as_deref().unwrap_or(path);
    // Asked before the timeline is made into a file, which a long run's makes costly.
    if let Some(problem) = unwritable(path) {
        return say_once(path, &problem);
    }
    // Held while writing, so that the exit report, which takes it too, comes after.
    let written = REPORT_WRITTEN
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if *written {
        return;
    }
    let result = std::panic::catch_unwind(|| {
        crate::report::replace_file(path, |w| crate::timeline().json_into(w))
    });
    drop(written);
    match result {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => say_once(
            path,
            "it cannot be replaced whole (a file with other names or another owner, not a \
             regular file, a link to no file, or a directory that refuses new files), and is not \
             rewritten in place",
        ),
        Ok(Err(e)) => say_once(path, crate::report::unnamed(path, &e.to_string())),
        Err(_) => say_once(path, "making it failed"),
    }
}

/// The line saying that the report could not be rewritten, once per process.
fn say_once(path: &Path, problem: &str) {
    if !REWRITE_SAID.swap(true, Ordering::Relaxed) {
        say(&format!(
            "HEAPDELTA: rewrite=on: could not rewrite the report {}: {problem}; trying again at \
             later checkpoints, and at exit (said once)",
            path.display()
        ));
    }
}

/// One line on stderr, written directly (never waits for the stderr lock another thread holds).
/// Any line break in `line` (an error's text naming a path, say) is escaped, so that every message
/// stays one line.
fn say(line: &str) {
    write_stderr(format!("{}\n", OneLine(line)).as_bytes());
}

/// Writes `text` to stderr directly: without allocating, and without waiting for the stderr lock
/// another thread may hold (inside the allocator too). A short or failed write is let go: what
/// heapdelta writes there are messages.
pub(crate) fn write_stderr(text: &[u8]) {
    // SAFETY: `text` is a valid buffer of `text.len()` bytes, which `write` on fd 2 only reads.
    unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
}

/// `write_stderr` the first time `said` is seen unset, which sets it: a hint given once per
/// process.
pub(crate) fn write_stderr_once(said: &AtomicBool, text: &[u8]) {
    if !said.swap(true, Ordering::Relaxed) {
        write_stderr(text);
    }
}

/// Writes the at-exit report to `path`: the timeline's checkpoints followed by a final snapshot
/// labelled `exit`, as one timeline file (`heapdelta show`, `plot` and `diff` read it).
pub(crate) fn at_exit_report(path: &Path) -> io::Result<()> {
    let checkpoints = crate::checkpoint::timeline_then_snapshot("exit");
    crate::diff::Timeline::new(checkpoints).write_json(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(value: &str) -> Config {
        let (config, errors) = parse(value);
        assert!(errors.is_empty(), "{errors:?}");
        config
    }

    fn bad(value: &str) -> (Config, String) {
        let (config, mut errors) = parse(value);
        assert_eq!(errors.len(), 1, "{errors:?}");
        (config, errors.remove(0))
    }

    #[test]
    fn an_override_of_the_trackers_own_settings_is_dropped() {
        let own = pack(&ok("sites=exact,depth=32"));
        for same in ["sites=exact", "depth=32", "sites=exact,depth=32"] {
            assert_eq!(unchanged(pack(&ok(same)), own), 0, "{same}");
        }
        for other in ["sites=off", "depth=16", "sites=sampled:4096"] {
            let packed = pack(&ok(other));
            assert_eq!(unchanged(packed, own), packed, "{other}");
        }
    }

    #[test]
    fn an_override_is_kept_when_the_trackers_settings_are_not_known() {
        let packed = pack(&ok("sites=exact"));
        assert_eq!(unchanged(packed, 0), packed);
    }

    #[test]
    fn empty_value_changes_nothing() {
        assert_eq!(ok(""), Config::default());
        assert_eq!(ok(" , "), Config::default());
    }

    #[test]
    fn the_design_example_parses() {
        let c = ok("sites=sampled:524288,depth=16,report=heapdelta.json");
        assert_eq!(
            c.sites,
            Some(CallSites::Sampled {
                mean_bytes: 524_288
            })
        );
        assert_eq!(c.depth, Some(16));
        assert_eq!(c.report, Some(PathBuf::from("heapdelta.json")));
        assert_eq!(c.every, None);
    }

    #[test]
    fn site_modes_exact_and_off_parse() {
        assert_eq!(ok("sites=exact").sites, Some(CallSites::Exact));
        assert_eq!(ok("sites=off").sites, Some(CallSites::Off));
    }

    #[test]
    fn every_takes_whole_and_fractional_seconds() {
        assert_eq!(ok("every=10").every, Some(Duration::from_secs(10)));
        assert_eq!(ok("every=0.5").every, Some(Duration::from_millis(500)));
    }

    #[test]
    fn rewrite_is_on_or_off() {
        assert_eq!(ok("rewrite=on").rewrite, Some(true));
        assert_eq!(ok("rewrite=off").rewrite, Some(false));
        assert_eq!(bad("rewrite=always").0.rewrite, None);
    }

    #[test]
    fn signals_is_on_or_off() {
        assert_eq!(ok("signals=on").signals, Some(true));
        assert_eq!(ok("signals=off").signals, Some(false));
        assert_eq!(bad("signals=yes").0.signals, None);
    }

    #[test]
    fn keep_takes_a_number_of_checkpoints_of_at_least_two() {
        assert_eq!(ok("keep=1000").keep, Some(1000));
        assert_eq!(ok("keep=7").keep, Some(7));
        for val in ["keep=1", "keep=0", "keep=lots", "keep=-5"] {
            let (config, why) = bad(val);
            assert_eq!(config.keep, None, "{val}");
            assert!(why.contains("at least 2"), "{why}");
        }
    }

    #[test]
    fn keep_below_seven_is_kept_with_a_word_on_the_steps_the_growth_detector_loses() {
        let (config, why) = bad("keep=4");
        assert_eq!(config.keep, Some(4));
        assert!(
            why.contains("keep=4 leaves the growth detector 2 of the 5 steps it compares"),
            "{why}"
        );
        assert_eq!(bad("keep=2").0.keep, Some(2));
    }

    #[test]
    fn a_value_too_large_says_so_rather_than_asking_for_at_least_the_least() {
        let (config, why) = bad("every=1e300");
        assert_eq!(config.every, None);
        assert!(
            why.contains("too large: at most 18,446,744,073,709,551,615 seconds"),
            "{why}"
        );
        let (config, why) = bad("keep=99999999999999999999");
        assert_eq!(config.keep, None);
        assert!(why.contains("too large: at most"), "{why}");
    }

    #[test]
    fn every_takes_seconds_written_with_their_unit() {
        assert_eq!(ok("every=10s").every, Some(Duration::from_secs(10)));
        assert_eq!(ok("every=0.5s").every, Some(Duration::from_millis(500)));
        assert_eq!(bad("every=10ms").0.every, None);
        assert_eq!(bad("every=s").0.every, None);
        assert_eq!(ok("every=500ms").every, Some(Duration::from_millis(500)));
        assert_eq!(ok("every=5m").every, Some(Duration::from_secs(300)));
        assert_eq!(ok("every=2min").every, Some(Duration::from_secs(120)));
        assert_eq!(ok("every=1h").every, Some(Duration::from_secs(3600)));
        assert_eq!(bad("every=5d").0.every, None);
    }

    #[test]
    fn a_report_path_holding_an_equals_sign_is_used_and_said_to_look_like_settings() {
        let (c, msg) = bad("report=a.json;every=1");
        assert_eq!(c.report, Some(PathBuf::from("a.json;every=1")));
        assert!(msg.contains("separated by \",\""), "{msg}");
        assert_eq!(c.every, None);
    }

    #[test]
    fn spaces_around_entries_are_ignored() {
        assert_eq!(ok(" depth = 8 , sites=off ").depth, Some(8));
    }

    #[test]
    fn a_bad_depth_names_its_key_and_keeps_the_other_settings() {
        let (c, msg) = bad("depth=lots,sites=off");
        assert!(msg.contains("depth"), "{msg}");
        assert!(msg.contains("lots"), "{msg}");
        assert_eq!(c.depth, None);
        assert_eq!(c.sites, Some(CallSites::Off));
    }

    #[test]
    fn depth_zero_keeps_no_frame_as_tracker_depth_zero_does() {
        assert_eq!(ok("depth=0").depth, Some(0));
    }

    #[test]
    fn a_wait_past_64_bits_of_milliseconds_is_the_longest_not_its_remainder() {
        let past = u128::from(u64::MAX) + 384;
        assert_eq!(millis(past), Duration::from_millis(u64::MAX));
        assert_eq!(millis(384), Duration::from_millis(384));
    }

    #[test]
    fn out_of_range_values_are_rejected() {
        assert_eq!(bad("depth=65").0.depth, None);
        assert_eq!(bad("sites=sampled:0").0.sites, None);
        assert_eq!(bad("every=0").0.every, None);
        assert_eq!(bad("every=-1").0.every, None);
        assert_eq!(bad("every=NaN").0.every, None);
        assert_eq!(bad("every=1e300").0.every, None);
        assert_eq!(bad("every=0.01").0.every, None);
        assert_eq!(ok("every=0.1").every, Some(Duration::from_millis(100)));
    }

    #[test]
    fn a_seed_is_any_64_bit_whole_number() {
        assert_eq!(ok("seed=0").seed, Some(0));
        assert_eq!(ok("seed=18446744073709551615").seed, Some(u64::MAX));
        for val in ["-1", "18446744073709551616", "0x10", "time", ""] {
            let (c, msg) = bad(&format!("seed={val}"));
            assert_eq!(c.seed, None, "{val}");
            assert!(msg.contains("expected a whole number"), "{msg}");
        }
    }

    #[test]
    fn a_bad_last_value_of_a_repeated_key_leaves_it_unset_as_it_says() {
        let (c, errors) = parse("sites=off,sites=bogus,depth=8,depth=x");
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(
            errors[1].ends_with("ignored, as if not set"),
            "{}",
            errors[1]
        );
        assert_eq!((c.sites, c.depth), (None, None));
    }

    #[test]
    fn a_key_given_twice_is_reported_and_the_last_one_kept() {
        let (c, msg) = bad("depth=64,depth=8");
        assert!(msg.contains("more than once"), "{msg}");
        assert_eq!(c.depth, Some(8));
    }

    #[test]
    fn unknown_keys_and_missing_equals_are_reported() {
        assert!(bad("colour=red").1.contains("unknown key"));
        assert!(bad("verbose").1.contains("key=value"));
        assert!(bad("sites=sometimes").1.contains("sampled:BYTES"));
        assert!(bad("report=").1.contains("path"));
    }

    #[test]
    fn an_entry_without_a_key_says_so() {
        let (c, errors) = parse("=,,depth=8");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("no key before"), "{}", errors[0]);
        assert_eq!(c.depth, Some(8));
    }

    #[test]
    fn a_key_with_a_line_break_is_escaped_in_its_one_line_message() {
        let (_, msg) = bad("a\nb=1");
        assert_eq!(msg.lines().count(), 1, "{msg}");
        assert!(msg.contains(r#"bad "a\nb"="1""#), "{msg}");
    }

    #[test]
    fn the_exit_report_is_a_timeline_ending_in_an_exit_snapshot() {
        crate::checkpoint("before exit");
        let path = std::env::temp_dir().join(format!("heapdelta-exit-{}.json", std::process::id()));
        at_exit_report(&path).unwrap();
        let t = crate::Timeline::read_json(&path).unwrap();
        let labels: Vec<_> = t.checkpoints().iter().map(|c| c.label()).collect();
        let _ = std::fs::remove_file(&path);
        assert!(labels.contains(&Some("before exit")), "{labels:?}");
        assert_eq!(labels.last(), Some(&Some("exit")));
    }

    #[test]
    fn every_message_is_one_line() {
        let (_, errors) = parse("depth=x,sites=y,every=z,report=,what=ever,nokey");
        assert_eq!(errors.len(), 6);
        assert!(errors.iter().all(|e| !e.contains('\n')));
    }
}
