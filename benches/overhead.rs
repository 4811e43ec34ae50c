//! heapdelta's overhead against the system allocator, as ratios measured in one run.
//!
//! Workloads (the same code for every allocator, called through `GlobalAlloc` directly):
//! - `small_churn`: 1,000 live blocks of random sizes 8–512 B; each op frees one and allocates
//!   a replacement;
//! - `mixed_churn`: the same with sizes log-uniform over 8 B–64 KiB;
//! - `small_churn_2t`: `small_churn` on two threads at once;
//! - `small_churn_3sites` (ratio table only): `small_churn` with the allocations made from three
//!   functions in turn, so exact call sites never see the same stack twice in a row, as in most
//!   programs.
//!
//! Allocators: `System`; `stats_alloc`, a counter-only peer (global atomic counters, no per-block
//! data), in the ratio table; `Tracker` over `System` with call sites off, exact, and sampled
//! (512 KiB); `Pool`, and `Tracker<Pool>` with call sites off and `stats_alloc` over `Pool`
//! (their ratios are to `Pool`).
//! After criterion's report, a table of ratios is printed: each comes from rounds in which the
//! allocator and its baseline run back to back, so the machine's load drifts hit both alike.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use paired::Contender;

#[path = "common/paired.rs"]
mod paired;
use heapdelta::{CallSites, Pool, Tracker};

static OFF: Tracker = Tracker::new().call_sites(CallSites::Off);
static EXACT: Tracker = Tracker::new().call_sites(CallSites::Exact);
static SAMPLED: Tracker = Tracker::new().call_sites(CallSites::Sampled {
    mean_bytes: 512 * 1024,
});

/// A counter-only peer: `stats_alloc` keeps global atomic counters and no per-block data.
static PEER: stats_alloc::StatsAlloc<System> = stats_alloc::StatsAlloc::system();

static POOL: Pool = Pool::new();
static TRACKED_POOL: Tracker<Pool> = Tracker::wrap(Pool::new()).call_sites(CallSites::Off);

/// A program reaches its global allocator through `__rust_alloc`, which calls a function made for
/// that one static, so the static's settings are constants there. Each tracker gets a zero-sized
/// handle forwarding to its static, so the churn code is compiled once per tracker, as in a
/// program that installs it (one shared instance would read the settings at run time instead).
macro_rules! handle {
    ($handle:ident, $static:ident) => {
        struct $handle;
        // SAFETY: forwards every call to the static unchanged.
        unsafe impl GlobalAlloc for $handle {
            #[inline(always)]
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                // SAFETY: the caller's contract, passed on.
                unsafe { $static.alloc(layout) }
            }
            #[inline(always)]
            unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
                // SAFETY: the caller's contract, passed on.
                unsafe { $static.dealloc(ptr, layout) }
            }
        }
    };
}
handle!(Off, OFF);
handle!(Exact, EXACT);
handle!(Sampled, SAMPLED);
handle!(TrackedPool, TRACKED_POOL);

const LIVE: usize = 1000;
const OPS: u64 = 1000;

struct Churn {
    live: Vec<(*mut u8, Layout)>,
    rng: u64,
    log_sizes: bool,
}

impl Churn {
    fn new<A: GlobalAlloc>(a: &A, log_sizes: bool, seed: u64) -> Churn {
        let mut c = Churn {
            live: Vec::with_capacity(LIVE),
            rng: seed | 1,
            log_sizes,
        };
        for _ in 0..LIVE {
            let l = c.layout();
            // SAFETY: non-zero size.
            let p = unsafe { a.alloc(l) };
            c.live.push((p, l));
        }
        c
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn layout(&mut self) -> Layout {
        let size = if self.log_sizes {
            let r = self.next();
            let bits = 3 + (r % 14) as u32; // 8 B .. 64 KiB
            (1usize << bits) + ((r >> 8) as usize & ((1 << bits) - 1))
        } else {
            8 + (self.next() % 505) as usize
        };
        Layout::from_size_align(size.min(65536), 8).unwrap()
    }

    fn run<A: GlobalAlloc>(&mut self, a: &A, ops: u64) {
        // SAFETY: every layout has a non-zero size.
        self.run_with(a, ops, |a, l, _| unsafe { a.alloc(l) });
    }

    /// `run`, with the allocations made from three call sites in turn (as a program's usually
    /// are), so no capture finds the stack of the one before.
    fn run_three_sites<A: GlobalAlloc>(&mut self, a: &A, ops: u64) {
        self.run_with(a, ops, |a, l, op| match op % 3 {
            0 => alloc_at_first_site(a, l),
            1 => alloc_at_second_site(a, l),
            _ => alloc_at_third_site(a, l),
        });
    }

    /// `ops` operations, each freeing a random live block and allocating its replacement with
    /// `alloc(a, layout, op)`.
    #[inline(always)]
    fn run_with<A: GlobalAlloc>(
        &mut self,
        a: &A,
        ops: u64,
        alloc: impl Fn(&A, Layout, u64) -> *mut u8,
    ) {
        for op in 0..ops {
            let i = (self.next() % LIVE as u64) as usize;
            let (p, l) = self.live[i];
            // SAFETY: `p` is live with `l`.
            unsafe { a.dealloc(p, l) };
            let l = self.layout();
            let p = alloc(a, l, op);
            // SAFETY: the block has at least one byte.
            unsafe { p.write(1) };
            self.live[i] = (black_box(p), l);
        }
    }

    fn free_all<A: GlobalAlloc>(self, a: &A) {
        for (p, l) in self.live {
            // SAFETY: `p` is live with `l`.
            unsafe { a.dealloc(p, l) };
        }
    }
}

#[inline(never)]
fn alloc_at_first_site<A: GlobalAlloc>(a: &A, l: Layout) -> *mut u8 {
    // SAFETY: non-zero size.
    black_box(unsafe { a.alloc(l) })
}

#[inline(never)]
fn alloc_at_second_site<A: GlobalAlloc>(a: &A, l: Layout) -> *mut u8 {
    // SAFETY: non-zero size.
    black_box(unsafe { a.alloc(l) })
}

#[inline(never)]
fn alloc_at_third_site<A: GlobalAlloc>(a: &A, l: Layout) -> *mut u8 {
    // SAFETY: non-zero size.
    black_box(unsafe { a.alloc(l) })
}

fn two_threads<A: GlobalAlloc + Sync>(a: &'static A, iters: u64) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..2 {
            s.spawn(move || {
                let mut c = Churn::new(a, false, 0x1234_5678 + t);
                c.run(a, iters * OPS);
                c.free_all(a);
            });
        }
    });
    start.elapsed()
}

fn bench_allocator<A: GlobalAlloc + Sync>(c: &mut Criterion, name: &str, a: &'static A) {
    let mut g = c.benchmark_group("small_churn");
    let mut churn = Churn::new(a, false, 42);
    g.bench_function(name, |b| b.iter(|| churn.run(a, OPS)));
    churn.free_all(a);
    g.finish();

    let mut g = c.benchmark_group("mixed_churn");
    let mut churn = Churn::new(a, true, 42);
    g.bench_function(name, |b| b.iter(|| churn.run(a, OPS)));
    churn.free_all(a);
    g.finish();

    let mut g = c.benchmark_group("small_churn_2t");
    g.bench_function(name, |b| b.iter_custom(|iters| two_threads(a, iters)));
    g.finish();
}

fn benches(c: &mut Criterion) {
    static SYSTEM: System = System;
    bench_allocator(c, "system", &SYSTEM);
    bench_allocator(c, "tracker_off", &Off);
    bench_allocator(c, "tracker_exact", &Exact);
    bench_allocator(c, "tracker_sampled", &Sampled);
    bench_allocator(c, "pool", &POOL);
    bench_allocator(c, "tracker_pool_off", &TrackedPool);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! { name = overhead; config = config(); targets = benches }

/// One timed run of `small_churn` / `mixed_churn` (`log_sizes`) on `a`: `ops` operations after
/// setting up the live blocks, which are freed after the clock stops.
fn timed_churn<A: GlobalAlloc>(a: &A, log_sizes: bool, ops: u64) -> Duration {
    let mut c = Churn::new(a, log_sizes, 42);
    let start = Instant::now();
    c.run(a, ops);
    let t = start.elapsed();
    c.free_all(a);
    t
}

/// Rounds of the ratio table.
const ROUNDS: usize = 21;

/// The ratio table (see `paired`): each allocator's rounds run back to back with its baseline's.
fn paired_ratios() {
    static SYSTEM: System = System;
    // `StatsAlloc::new` is not `const`: the peer over a pool is made here, for the whole run.
    let peer_pool: &'static stats_alloc::StatsAlloc<Pool> =
        Box::leak(Box::new(stats_alloc::StatsAlloc::new(Pool::new())));
    println!("\nratios to the baseline, paired within each of {ROUNDS} rounds (median [min–max]):");
    macro_rules! contenders {
        ($run:expr) => {
            [
                Contender {
                    name: "system",
                    run: &|| $run(&SYSTEM),
                    base: 0,
                },
                Contender {
                    name: "stats_alloc (peer)",
                    run: &|| $run(&PEER),
                    base: 0,
                },
                Contender {
                    name: "tracker_off",
                    run: &|| $run(&Off),
                    base: 0,
                },
                Contender {
                    name: "tracker_exact",
                    run: &|| $run(&Exact),
                    base: 0,
                },
                Contender {
                    name: "tracker_sampled",
                    run: &|| $run(&Sampled),
                    base: 0,
                },
                Contender {
                    name: "pool",
                    run: &|| $run(&POOL),
                    base: 0,
                },
                Contender {
                    name: "tracker_pool_off",
                    run: &|| $run(&TrackedPool),
                    base: 5,
                },
                Contender {
                    name: "stats_alloc<Pool>",
                    run: &|| $run(peer_pool),
                    base: 5,
                },
            ]
        };
    }
    paired::print_ratios(
        "small_churn",
        ROUNDS,
        &contenders!(|a| timed_churn(a, false, 200_000)),
    );
    paired::print_ratios(
        "mixed_churn",
        ROUNDS,
        &contenders!(|a| timed_churn(a, true, 40_000)),
    );
    paired::print_ratios(
        "small_churn_3sites",
        ROUNDS,
        &contenders!(|a| {
            let mut c = Churn::new(a, false, 42);
            let start = Instant::now();
            c.run_three_sites(a, 200_000);
            let t = start.elapsed();
            c.free_all(a);
            t
        }),
    );
    paired::print_ratios(
        "small_churn_2t",
        ROUNDS,
        &contenders!(|a| two_threads(a, 200)),
    );
}

fn main() {
    overhead();
    Criterion::default().configure_from_args().final_summary();
    paired_ratios();
}
