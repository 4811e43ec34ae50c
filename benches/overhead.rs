//! heapdelta's overhead against the system allocator, as ratios measured in one run.
//!
//! Workloads (`common/churn.rs`, the same code for every allocator): `small_churn`,
//! `mixed_churn`, `small_churn_2t`, and, in the ratio table only, `small_churn_3sites`,
//! `small_churn_8sites`, `small_churn_16sites_random`, `small_churn_64sites_random`, `growth` (a
//! leaking loop), `thread_churn` (a thread per task) and `small_churn_scope` (sites off, with the
//! churn run inside a `heapdelta::scope`).
//!
//! Allocators: `System`; two counter-only peers in the ratio table, `cap` (one global atomic: the
//! live bytes) and `stats_alloc` (global atomic counters of blocks and bytes), neither keeping
//! per-block data; `Tracker` over `System` with call sites off, exact, and sampled
//! (512 KiB); `Pool`, and `Tracker<Pool>` and `Tracker<&Pool>` (`tracker_ref_pool`) with call
//! sites off and `stats_alloc` over `Pool` (their ratios are to `Pool`).
//! After criterion's report, a table of ratios is printed: each comes from rounds in which the
//! allocator and its baseline run back to back, so the machine's load drifts hit both alike.

use std::alloc::{GlobalAlloc, System};
use std::time::Duration;

use criterion::{criterion_group, Criterion};
use paired::Contender;

#[path = "common/churn.rs"]
mod churn;
#[macro_use]
#[path = "common/handle.rs"]
mod handle;
#[path = "common/paired.rs"]
mod paired;
use churn::{
    thread_churn, timed_churn, timed_growth, timed_many_sites, timed_places, timed_three_sites,
    two_threads, Churn, OPS,
};
use heapdelta::{CallSites, Pool, Tracker};

static OFF: Tracker = Tracker::new().call_sites(CallSites::Off);
static EXACT: Tracker = Tracker::new().call_sites(CallSites::Exact);
static SAMPLED: Tracker = Tracker::new().call_sites(CallSites::Sampled {
    mean_bytes: 512 * 1024,
});

/// A counter-only peer: `stats_alloc` keeps global atomic counters and no per-block data.
static PEER: stats_alloc::StatsAlloc<System> = stats_alloc::StatsAlloc::system();
/// The leanest counter-only peer: `cap` adds and subtracts the live bytes on one global atomic.
static CAP: cap::Cap<System> = cap::Cap::new(System, usize::MAX);

static POOL: Pool = Pool::new();
static TRACKED_POOL: Tracker<Pool> = Tracker::wrap(Pool::new()).call_sites(CallSites::Off);
/// The cheaper way to track a pool: a reference to one in a static of its own (see `Pool`).
static REF_POOL: Pool = Pool::new();
static TRACKED_REF_POOL: Tracker<&Pool> = Tracker::wrap(&REF_POOL).call_sites(CallSites::Off);

handle!(Off, OFF);
handle!(Exact, EXACT);
handle!(Sampled, SAMPLED);
handle!(TrackedPool, TRACKED_POOL);
handle!(TrackedRefPool, TRACKED_REF_POOL);

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
                Contender::new("system", &|| $run(&SYSTEM), 0),
                Contender::new("cap (peer)", &|| $run(&CAP), 0),
                Contender::new("stats_alloc (peer)", &|| $run(&PEER), 0),
                Contender::new("tracker_off", &|| $run(&Off), 0),
                Contender::new("tracker_exact", &|| $run(&Exact), 0),
                Contender::new("tracker_sampled", &|| $run(&Sampled), 0),
                Contender::new("pool", &|| $run(&POOL), 0),
                Contender::new("tracker_pool_off", &|| $run(&TrackedPool), 6),
                Contender::new("tracker_ref_pool", &|| $run(&TrackedRefPool), 6),
                Contender::new("stats_alloc<Pool>", &|| $run(peer_pool), 6),
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
        &contenders!(|a| timed_three_sites(a, 200_000)),
    );
    paired::print_ratios(
        "small_churn_8sites",
        ROUNDS,
        &contenders!(|a| timed_many_sites(a, 200_000, false)),
    );
    paired::print_ratios(
        "small_churn_16sites_random",
        ROUNDS,
        &contenders!(|a| timed_many_sites(a, 200_000, true)),
    );
    paired::print_ratios(
        "small_churn_64sites_random",
        ROUNDS,
        &contenders!(|a| timed_places(a, 200_000, 64)),
    );
    paired::print_ratios(
        "small_churn_2t",
        ROUNDS,
        &contenders!(|a| two_threads(a, 200)),
    );
    paired::print_ratios("growth", ROUNDS, &contenders!(|a| timed_growth(a, 20_000)));
    paired::print_ratios(
        "thread_churn",
        ROUNDS,
        &contenders!(|a| thread_churn(a, 100)),
    );
    // Inside a scope, events take the general recording path instead of the inlined one.
    paired::print_ratios(
        "small_churn_scope",
        ROUNDS,
        &[
            Contender::new("system", &|| timed_churn(&SYSTEM, false, 200_000), 0),
            Contender::new("tracker_off", &|| timed_churn(&Off, false, 200_000), 0),
            Contender::new(
                "tracker_off_scoped",
                &|| {
                    let _scope = heapdelta::scope("bench");
                    timed_churn(&Off, false, 200_000)
                },
                0,
            ),
        ],
    );
}

fn main() {
    overhead();
    Criterion::default().configure_from_args().final_summary();
    paired_ratios();
}
