//! heapdelta's call sites against a profiler that records them too: dhat (`dhat::Alloc`, heap
//! mode), as ratios to `System` measured in one run (paired rounds, see `common/paired.rs`).
//!
//! dhat must be the global allocator for its profiler to run, so this bench has its own binary.
//! Every contender is still called through `GlobalAlloc` directly on the same churn workloads as
//! `overhead` (`common/churn.rs`); the profiler runs in testing mode, so it writes no file.
//!
//! `cargo bench --bench peers` prints the table (about a minute: dhat is slow).

use std::alloc::System;

use heapdelta::{CallSites, Tracker};
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
    two_threads,
};

#[global_allocator]
static DHAT: dhat::Alloc = dhat::Alloc;

static EXACT: Tracker = Tracker::new().call_sites(CallSites::Exact);
static SAMPLED: Tracker = Tracker::new().call_sites(CallSites::Sampled {
    mean_bytes: 512 * 1024,
});

handle!(Exact, EXACT);
handle!(Sampled, SAMPLED);

/// Rounds per table: fewer than `overhead`'s 21, since a dhat round takes a while.
const ROUNDS: usize = 7;

fn main() {
    static SYSTEM: System = System;
    let _profiler = dhat::Profiler::builder().testing().build();
    println!("ratios to the baseline, paired within each of {ROUNDS} rounds (median [min–max]):");
    macro_rules! contenders {
        ($run:expr) => {
            [
                Contender::new("system", &|| $run(&SYSTEM), 0),
                Contender::new("tracker_exact", &|| $run(&Exact), 0),
                Contender::new("tracker_sampled", &|| $run(&Sampled), 0),
                Contender::new("dhat (peer)", &|| $run(&DHAT), 0),
            ]
        };
    }
    paired::print_ratios(
        "small_churn",
        ROUNDS,
        &contenders!(|a| timed_churn(a, false, 50_000)),
    );
    paired::print_ratios(
        "small_churn_3sites",
        ROUNDS,
        &contenders!(|a| timed_three_sites(a, 50_000)),
    );
    paired::print_ratios(
        "small_churn_8sites",
        ROUNDS,
        &contenders!(|a| timed_many_sites(a, 50_000, false)),
    );
    paired::print_ratios(
        "small_churn_16sites_random",
        ROUNDS,
        &contenders!(|a| timed_many_sites(a, 50_000, true)),
    );
    paired::print_ratios(
        "small_churn_64sites_random",
        ROUNDS,
        &contenders!(|a| timed_places(a, 50_000, 64)),
    );
    paired::print_ratios(
        "mixed_churn",
        ROUNDS,
        &contenders!(|a| timed_churn(a, true, 20_000)),
    );
    paired::print_ratios(
        "small_churn_2t",
        ROUNDS,
        &contenders!(|a| two_threads(a, 50)),
    );
    paired::print_ratios(
        "thread_churn",
        ROUNDS,
        &contenders!(|a| thread_churn(a, 25)),
    );
    paired::print_ratios("growth", ROUNDS, &contenders!(|a| timed_growth(a, 10_000)));
}
