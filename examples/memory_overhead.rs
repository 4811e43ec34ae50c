//! Peak RSS of a process holding 1 M live small blocks, with and without the tracker, as ratios
//! measured in one run. Each configuration runs in a child process of this example.
//!
//! ```text
//! cargo run --release --example memory_overhead
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::{Command, ExitCode};

use heapdelta::{CallSites, Tracker};

static OFF: Tracker = Tracker::new().call_sites(CallSites::Off);
static EXACT: Tracker = Tracker::new().call_sites(CallSites::Exact);
static SAMPLED: Tracker = Tracker::new().call_sites(CallSites::Sampled {
    mean_bytes: 512 * 1024,
});

const BLOCKS: usize = 1_000_000;
const CONFIGS: [&str; 5] = [
    "system",
    "tracker_off",
    "tracker_exact",
    "tracker_sampled",
    "exact_reported",
];

/// Allocates `BLOCKS` blocks of 16–128 bytes, touches them, runs `report` while they are live, and
/// returns the peak RSS in KiB.
fn hold_blocks<A: GlobalAlloc>(a: &A, report: impl FnOnce()) -> i64 {
    let mut live = Vec::with_capacity(BLOCKS);
    let mut rng = 0x853C_49E6_748F_EA9Bu64;
    for _ in 0..BLOCKS {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let layout = Layout::from_size_align(16 + (rng % 113) as usize, 8).expect("valid layout");
        // SAFETY: non-zero size; a null block is reported, never written.
        let p = unsafe { a.alloc(layout) };
        if p.is_null() {
            return -1;
        }
        // SAFETY: the block has `layout.size()` bytes.
        unsafe { p.write_bytes(1, layout.size()) };
        live.push((p, layout));
    }
    report();
    let rss = peak_rss_kib();
    for (p, layout) in live {
        // SAFETY: `p` is live with `layout`.
        unsafe { a.dealloc(p, layout) };
    }
    rss
}

fn peak_rss_kib() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the struct it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return -1;
    }
    // SAFETY: initialised by the successful call above.
    unsafe { usage.assume_init() }.ru_maxrss
}

fn child(config: &str) -> ExitCode {
    let rss = match config {
        "system" => hold_blocks(&System, || ()),
        "tracker_off" => hold_blocks(&OFF, || ()),
        "tracker_exact" => hold_blocks(&EXACT, || ()),
        "tracker_sampled" => hold_blocks(&SAMPLED, || ()),
        // As `tracker_exact`, with the sites named for a report while the blocks are live: the
        // debug information read to name them is part of what a report costs.
        "exact_reported" => {
            let start = heapdelta::snapshot();
            hold_blocks(&EXACT, || {
                let report = heapdelta::snapshot().since(&start).to_string();
                eprintln!("{report}");
            })
        }
        other => {
            eprintln!("memory_overhead: unknown configuration {other:?}");
            return ExitCode::FAILURE;
        }
    };
    println!("{rss}");
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, config] = args.as_slice() {
        if flag == "--child" {
            return child(config);
        }
    }
    let Ok(me) = std::env::current_exe() else {
        eprintln!("memory_overhead: cannot find this executable to run its children");
        return ExitCode::FAILURE;
    };
    println!("peak RSS holding {BLOCKS} live blocks of 16-128 B (each in its own process):");
    let mut base = None;
    for config in CONFIGS {
        let out = Command::new(&me).args(["--child", config]).output();
        let kib: Option<i64> = out
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|k| *k > 0);
        let Some(kib) = kib else {
            eprintln!("memory_overhead: the {config} run failed");
            return ExitCode::FAILURE;
        };
        let base = *base.get_or_insert(kib);
        println!(
            "  {config:<16} {:>8.1} MiB  {:>5.2}x system",
            kib as f64 / 1024.0,
            kib as f64 / base as f64
        );
    }
    ExitCode::SUCCESS
}
