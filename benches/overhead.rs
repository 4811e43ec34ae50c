//! heapdelta's overhead against the system allocator, as ratios measured in one run.
//!
//! Workloads (the same code for every allocator, called through `GlobalAlloc` directly):
//! - `small_churn`: 1,000 live blocks of random sizes 8–512 B; each op frees one and allocates
//!   a replacement;
//! - `mixed_churn`: the same with sizes log-uniform over 8 B–64 KiB;
//! - `small_churn_2t`: `small_churn` on two threads at once.
//!
//! Allocators: `System`, and `Tracker` over it with call sites off, exact, and sampled (512 KiB);
//! `Pool`, and `Tracker<Pool>` with call sites off (its ratio is to `Pool`).
//! After criterion's report, a table of ratios is printed: each comes from rounds in which the
//! allocator and its baseline run back to back, so the machine's load drifts hit both alike.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use heapdelta::{CallSites, Pool, Tracker};

static OFF: Tracker = Tracker::new().call_sites(CallSites::Off);
static EXACT: Tracker = Tracker::new().call_sites(CallSites::Exact);
static SAMPLED: Tracker = Tracker::new().call_sites(CallSites::Sampled {
    mean_bytes: 512 * 1024,
});

static POOL: Pool = Pool::new();
static TRACKED_POOL: Tracker<Pool> = Tracker::wrap(Pool::new()).call_sites(CallSites::Off);

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
        for _ in 0..ops {
            let i = (self.next() % LIVE as u64) as usize;
            let (p, l) = self.live[i];
            // SAFETY: `p` is live with `l`.
            unsafe { a.dealloc(p, l) };
            let l = self.layout();
            // SAFETY: non-zero size.
            let p = unsafe { a.alloc(l) };
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
    bench_allocator(c, "tracker_off", &OFF);
    bench_allocator(c, "tracker_exact", &EXACT);
    bench_allocator(c, "tracker_sampled", &SAMPLED);
    bench_allocator(c, "pool", &POOL);
    bench_allocator(c, "tracker_pool_off", &TRACKED_POOL);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! { name = overhead; config = config(); targets = benches }

/// The workloads of the ratio table: name, and one timed run of it on an allocator.
type Workload = (&'static str, fn(&'static dyn GlobalAllocSync) -> Duration);

/// `GlobalAlloc` behind a `dyn` reference, so the table can loop over allocators.
trait GlobalAllocSync: Sync {
    fn churn(&self, log_sizes: bool, ops: u64) -> Duration;
    fn two_threads(&'static self, ops: u64) -> Duration;
}

impl<A: GlobalAlloc + Sync> GlobalAllocSync for A {
    fn churn(&self, log_sizes: bool, ops: u64) -> Duration {
        let mut c = Churn::new(self, log_sizes, 42);
        let start = Instant::now();
        c.run(self, ops);
        let t = start.elapsed();
        c.free_all(self);
        t
    }

    fn two_threads(&'static self, ops: u64) -> Duration {
        two_threads(self, ops / OPS)
    }
}

const WORKLOADS: [Workload; 3] = [
    ("small_churn", |a| a.churn(false, 200_000)),
    ("mixed_churn", |a| a.churn(true, 40_000)),
    ("small_churn_2t", |a| a.two_threads(200_000)),
];

/// Rounds of the ratio table; each runs every allocator once on every workload.
const ROUNDS: usize = 21;

/// The ratio table: every round times each allocator on a workload back to back with its
/// baseline, so slow phases of a shared machine hit both sides of a ratio alike; the table shows
/// the median over rounds of those paired ratios, and their spread.
fn paired_ratios() {
    static SYSTEM: System = System;
    let allocators: [(&str, &'static dyn GlobalAllocSync, usize); 6] = [
        ("system", &SYSTEM, 0),
        ("tracker_off", &OFF, 0),
        ("tracker_exact", &EXACT, 0),
        ("tracker_sampled", &SAMPLED, 0),
        ("pool", &POOL, 0),
        ("tracker_pool_off", &TRACKED_POOL, 4),
    ];
    println!("\nratios to the baseline, paired within each of {ROUNDS} rounds (median [min–max]):");
    for (workload, run) in WORKLOADS {
        let mut times = vec![Vec::with_capacity(ROUNDS); allocators.len()];
        run(allocators[0].1); // warm-up
        for _ in 0..ROUNDS {
            for (i, (_, a, _)) in allocators.iter().enumerate() {
                times[i].push(run(*a).as_secs_f64());
            }
        }
        for (i, (name, _, base)) in allocators.iter().enumerate().skip(1) {
            let mut ratios: Vec<f64> = (0..ROUNDS).map(|r| times[i][r] / times[*base][r]).collect();
            ratios.sort_by(f64::total_cmp);
            println!(
                "  {workload:<15} {name:<17} {:>5.2}x {:<7} [{:.2}–{:.2}]",
                ratios[ROUNDS / 2],
                allocators[*base].0,
                ratios[0],
                ratios[ROUNDS - 1]
            );
        }
    }
}

fn main() {
    overhead();
    Criterion::default().configure_from_args().final_summary();
    paired_ratios();
}
