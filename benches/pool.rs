//! Small-object churn through `System`, `Pool` and `mimalloc`, each called directly as a
//! `GlobalAlloc` instance: 1,000 live blocks of random sizes 8–512 B, each step frees a random
//! live block and allocates a new one in its place. Reported per step (one free + one alloc);
//! the 2-thread runs do the same on two threads at once (time per step of one thread).
//! After criterion's report, a table of ratios to `System` from paired rounds is printed.

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use heapdelta::Pool;
use mimalloc::MiMalloc;
use paired::Contender;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "common/paired.rs"]
mod paired;

const LIVE: usize = 1_000;
const STEPS: u64 = 100_000;

static POOL: Pool = Pool::new();
static MIMALLOC: MiMalloc = MiMalloc;

fn layout(seed: &mut u64) -> Layout {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    Layout::from_size_align(8 + (*seed % 505) as usize, 8).unwrap()
}

/// Runs `steps` churn steps on `a` and returns the elapsed time (setup and teardown excluded).
fn churn<A: GlobalAlloc>(a: &A, steps: u64, mut seed: u64) -> Duration {
    let mut live: Vec<(*mut u8, Layout)> = (0..LIVE)
        .map(|_| {
            let l = layout(&mut seed);
            // SAFETY: non-zero size.
            (unsafe { a.alloc(l) }, l)
        })
        .collect();
    let start = Instant::now();
    for _ in 0..steps {
        let l = layout(&mut seed);
        let slot = &mut live[(seed >> 20) as usize % LIVE];
        // SAFETY: the slot's block came from `a` with its layout; the new size is non-zero.
        unsafe {
            a.dealloc(slot.0, slot.1);
            let p = a.alloc(l);
            *p = 1;
            *slot = (black_box(p), l);
        }
    }
    let t = start.elapsed();
    for (p, l) in live {
        // SAFETY: allocated by `a` with `l`.
        unsafe { a.dealloc(p, l) };
    }
    t
}

fn churn_threads<A: GlobalAlloc + Sync>(a: &A, threads: u64, steps: u64) -> Duration {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || churn(a, steps, 0x9e37_79b9 + t * 7919)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn bench(c: &mut Criterion) {
    for threads in [1u64, 2] {
        let mut g = c.benchmark_group(format!("small_churn_{threads}_thread"));
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Elements(STEPS));
        macro_rules! run {
            ($name:expr, $alloc:expr) => {
                g.bench_function(BenchmarkId::from_parameter($name), |b| {
                    b.iter_custom(|iters| {
                        (0..iters)
                            .map(|_| churn_threads($alloc, threads, STEPS))
                            .sum()
                    })
                });
            };
        }
        run!("System", &System);
        run!("Pool", &POOL);
        run!("mimalloc", &MIMALLOC);
        g.finish();
    }
}

criterion_group!(benches, bench);

/// Rounds of the ratio table.
const ROUNDS: usize = 21;

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    println!("\nratios to System, paired within each of {ROUNDS} rounds (median [min–max]):");
    for threads in [1u64, 2] {
        let workload = format!("small_churn_{threads}t");
        paired::print_ratios(
            &workload,
            ROUNDS,
            &[
                Contender::new("System", &|| churn_threads(&System, threads, STEPS), 0),
                Contender::new("Pool", &|| churn_threads(&POOL, threads, STEPS), 0),
                Contender::new("mimalloc", &|| churn_threads(&MIMALLOC, threads, STEPS), 0),
            ],
        );
    }
}
