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

/// Keeps 16 MiB in 1 KiB blocks: about 32 samples at a 512 KiB mean.
#[inline(never)]
fn keep_sixteen_mib() -> Vec<Vec<u8>> {
    (0..16 * 1024).map(|_| vec![1u8; 1024]).collect()
}

#[test]
fn a_sampled_step_says_its_site_figures_are_estimates() {
    let (kept, delta) = heapdelta::measure(keep_sixteen_mib);
    let text = delta.to_string();
    assert!(
        text.contains("call sites sampled about once per 512.0 KiB: their figures are estimates"),
        "{text}"
    );
    drop(kept);
}

#[cfg(feature = "pprof")]
#[test]
fn a_sampled_profile_gives_the_sampling_mean_as_its_period() {
    use prost::Message;
    use std::io::Read;
    /// The one field of pprof's `Profile` checked here.
    #[derive(Clone, PartialEq, Message)]
    struct Profile {
        #[prost(int64, tag = "12")]
        period: i64,
    }
    let (kept, delta) = heapdelta::measure(keep_sixteen_mib);
    let mut gzipped = Vec::new();
    delta.write_pprof_to(&mut gzipped).unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gzipped[..])
        .read_to_end(&mut raw)
        .unwrap();
    assert_eq!(Profile::decode(&raw[..]).unwrap().period, 512 * 1024);
    drop(kept);
}
