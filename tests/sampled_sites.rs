//! Sampled call sites: per-site figures are unbiased estimates, totals stay exact.

use heapdelta::{CallSites, Tracker};

#[global_allocator]
static GLOBAL: Tracker = Tracker::new().call_sites(CallSites::Sampled {
    mean_bytes: 512 * 1024,
});

const PER_RUN: u64 = 50 << 20;
const RUNS: u64 = 20;

/// Allocates exactly `PER_RUN` bytes in blocks of 1–8 KiB, each freed at once.
#[inline(never)]
fn churn_fifty_mib() {
    let mut left = PER_RUN;
    let mut k = 0u64;
    while left > 0 {
        let size = (1024 + (k * 2654435761 % 7168)).min(left);
        std::hint::black_box(vec![0u8; size as usize]);
        left -= size;
        k += 1;
    }
}

#[test]
fn a_sampled_site_estimate_is_within_five_percent_and_totals_stay_exact() {
    let mut estimated = 0u64;
    for run in 0..RUNS {
        let ((), delta) = heapdelta::measure(churn_fifty_mib);
        assert_eq!(
            delta.allocated_bytes(),
            PER_RUN,
            "run {run}: totals are exact"
        );
        assert_eq!(delta.live_bytes(), 0);
        estimated += delta
            .sites()
            .iter()
            .filter(|s| s.site.to_string().contains("churn_fifty_mib"))
            .map(|s| s.allocated_bytes)
            .sum::<u64>();
    }
    assert_ne!(
        estimated,
        PER_RUN * RUNS,
        "a sampled figure is an estimate, not a count"
    );
    let exact = (PER_RUN * RUNS) as f64;
    let error = (estimated as f64 - exact).abs() / exact;
    assert!(
        error < 0.05,
        "estimate {estimated} vs exact {exact}: {:.1}% off",
        error * 100.0
    );
}
