//! Poisson sampling by bytes, as tcmalloc, jemalloc and Go's runtime do.
//!
//! Every allocated byte is sampled with probability `1 / mean_bytes`, independently. So an
//! allocation of `size` bytes is sampled with probability `p = 1 - exp(-size / mean_bytes)`, and
//! counting a sampled allocation as `size / p` bytes (and `1 / p` blocks) gives unbiased estimates
//! (pprof's scaling). It is implemented with a per-thread countdown: the bytes until the next
//! sampled byte are drawn from an exponential distribution of mean `mean_bytes`; an allocation that
//! crosses zero is sampled and a fresh countdown is drawn (the exponential is memoryless, so the
//! remainder of a large allocation needs no special case).
//!
//! Runs inside the global allocator: no allocation, no panic, no lock; the generator is
//! splitmix64, seedable for tests.

use std::cell::Cell;

/// Per-thread sampling state. `const`-constructible, so it can live in a `const`-initialised
/// thread-local. Its fields are cells, read and written through `&self`: a signal handler that
/// allocates on the thread while it is in the middle of a call (allocating in a handler is not
/// async-signal-safe, but glibc's malloc survives it when the handler did not interrupt malloc
/// itself) then at worst moves the countdown, where a second `&mut` would be undefined behaviour.
#[derive(Debug)]
pub(crate) struct Sampler {
    /// Bytes left before the next sampled byte; `<= 0` once crossed.
    bytes_until_sample: Cell<i64>,
    /// splitmix64 state.
    rng: Cell<u64>,
    /// Whether the first countdown was drawn.
    started: Cell<bool>,
}

impl Sampler {
    /// A sampler whose random sequence is determined by `seed`.
    pub(crate) const fn new(seed: u64) -> Self {
        Sampler {
            bytes_until_sample: Cell::new(0),
            rng: Cell::new(seed),
            started: Cell::new(false),
        }
    }

    /// Starts the sampler again, as `Sampler::new(seed)` would.
    pub(crate) fn reseed(&self, seed: u64) {
        self.bytes_until_sample.set(0);
        self.rng.set(seed);
        self.started.set(false);
    }

    /// Whether the allocation of `size` bytes is sampled, with a mean of one sample per
    /// `mean_bytes` bytes. `mean_bytes` of 0 or 1 samples every allocation.
    #[inline(always)]
    pub(crate) fn sample(&self, size: usize, mean_bytes: u64) -> bool {
        let size = i64::try_from(size).unwrap_or(i64::MAX);
        let left = self.bytes_until_sample.get().saturating_sub(size);
        self.bytes_until_sample.set(left);
        if left > 0 {
            return false;
        }
        self.crossed(size, mean_bytes)
    }

    /// Counts down `size` bytes and returns `true` when that does not reach the next sample;
    /// otherwise changes nothing and returns `false` (then `sample` must decide). `size` is at
    /// most `isize::MAX`, as every `Layout`'s.
    #[inline(always)]
    pub(crate) fn skip(&self, size: usize) -> bool {
        // `size as i64` is exact for every `Layout` size; the subtraction cannot overflow once the
        // compare holds.
        let size = size as i64;
        let left = self.bytes_until_sample.get();
        if size < left {
            self.bytes_until_sample.set(left - size);
            return true;
        }
        false
    }

    /// `sample` once the countdown reached zero (also on the first call, whose countdown starts
    /// at zero, and on every call when everything is sampled).
    #[cold]
    #[inline(never)]
    fn crossed(&self, size: i64, mean_bytes: u64) -> bool {
        if mean_bytes <= 1 {
            return true;
        }
        if !self.started.replace(true) {
            let left = self.next_interval(mean_bytes).saturating_sub(size);
            self.bytes_until_sample.set(left);
            if left > 0 {
                return false;
            }
        }
        self.bytes_until_sample.set(self.next_interval(mean_bytes));
        true
    }

    /// An exponentially distributed number of bytes of mean `mean_bytes`, at least 1.
    fn next_interval(&self, mean_bytes: u64) -> i64 {
        // Uniform in (0, 1]: 53 random bits, plus one so that ln never sees 0.
        let bits = self.next_u64() >> 11;
        let uniform = (bits as f64 + 1.0) * (1.0 / (1u64 << 53) as f64);
        let interval = -uniform.ln() * mean_bytes as f64;
        // `as` saturates for floats (and maps NaN to 0, which `max` lifts to 1).
        (interval as i64).max(1)
    }

    /// splitmix64.
    fn next_u64(&self) -> u64 {
        let state = self.rng.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.rng.set(state);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Probability that an allocation of `size` bytes is sampled at `mean_bytes`.
fn probability(size: u64, mean_bytes: u64) -> f64 {
    if mean_bytes <= 1 {
        return 1.0;
    }
    -(-(size as f64) / mean_bytes as f64).exp_m1()
}

/// Unbiased byte weight of a sampled allocation of `size` bytes: `size / (1 - exp(-size/mean))`.
/// Equal to `size` when every allocation is sampled (`mean_bytes <= 1`); 0 for `size == 0`.
pub(crate) fn scale(size: u64, mean_bytes: u64) -> f64 {
    if size == 0 {
        return 0.0;
    }
    size as f64 / probability(size, mean_bytes)
}

/// Unbiased block-count weight of a sampled allocation of `size` bytes: `1 / (1 -
/// exp(-size/mean))`. 1 when every allocation is sampled or for `size == 0`.
pub(crate) fn scale_blocks(size: u64, mean_bytes: u64) -> f64 {
    if size == 0 {
        return 1.0;
    }
    1.0 / probability(size, mean_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes of a synthetic workload: mostly small, some medium, a few large.
    fn workload(n: usize) -> impl Iterator<Item = u64> {
        let rng = Sampler::new(42);
        (0..n).map(move |_| {
            let r = rng.next_u64();
            match r % 100 {
                0 => 64 * 1024 + (r >> 40) % (1 << 20),
                1..=9 => 512 + (r >> 40) % 4096,
                _ => 8 + (r >> 40) % 256,
            }
        })
    }

    fn estimate(seed: u64, mean: u64) -> (f64, f64, u64, u64) {
        let sampler = Sampler::new(seed);
        let (mut est_bytes, mut est_blocks, mut bytes, mut blocks) = (0.0, 0.0, 0u64, 0u64);
        for size in workload(1_000_000) {
            bytes += size;
            blocks += 1;
            if sampler.sample(size as usize, mean) {
                est_bytes += scale(size, mean);
                est_blocks += scale_blocks(size, mean);
            }
        }
        (est_bytes, est_blocks, bytes, blocks)
    }

    #[test]
    fn scaled_bytes_estimate_the_true_total_within_3_percent() {
        let (est, _, truth, _) = estimate(7, 64 * 1024);
        let error = (est - truth as f64).abs() / truth as f64;
        assert!(error < 0.03, "estimate {est} vs {truth}: {error}");
    }

    #[test]
    fn scaled_blocks_estimate_the_true_count_within_3_percent() {
        let (_, est, _, truth) = estimate(7, 64 * 1024);
        let error = (est - truth as f64).abs() / truth as f64;
        assert!(error < 0.03, "estimate {est} vs {truth}: {error}");
    }

    #[test]
    fn sampling_is_deterministic_for_a_seed() {
        assert_eq!(estimate(3, 4096), estimate(3, 4096));
    }

    #[test]
    fn different_seeds_sample_differently() {
        assert_ne!(estimate(3, 4096).0, estimate(4, 4096).0);
    }

    #[test]
    fn trying_skip_first_picks_exactly_the_allocations_sample_alone_picks() {
        let (alone, skipping) = (Sampler::new(11), Sampler::new(11));
        for size in workload(200_000) {
            let size = size as usize;
            let picked = alone.sample(size, 8192);
            let picked_after_skip = !skipping.skip(size) && skipping.sample(size, 8192);
            assert_eq!(picked, picked_after_skip, "size {size}");
        }
    }

    #[test]
    fn mean_of_one_samples_every_allocation() {
        let sampler = Sampler::new(1);
        assert!((0..1000).all(|_| sampler.sample(16, 1)));
    }

    #[test]
    fn sample_rate_matches_the_poisson_probability() {
        let sampler = Sampler::new(9);
        let n = 200_000;
        let hits = (0..n).filter(|_| sampler.sample(1024, 8192)).count();
        let expected = probability(1024, 8192) * n as f64;
        assert!(
            (hits as f64 - expected).abs() < 0.03 * expected,
            "{hits} vs {expected}"
        );
    }

    #[test]
    fn huge_sizes_do_not_overflow() {
        let sampler = Sampler::new(5);
        assert!(sampler.sample(usize::MAX, 512 * 1024));
        assert!(scale(u64::MAX, 512 * 1024).is_finite());
    }

    #[test]
    fn scale_is_size_when_everything_is_sampled() {
        assert_eq!(scale(100, 0), 100.0);
        assert_eq!(scale_blocks(100, 1), 1.0);
    }

    #[test]
    fn scale_of_a_small_allocation_is_about_the_mean() {
        // p ≈ size / mean for size << mean, so the weight is ≈ mean.
        let w = scale(16, 1 << 20);
        assert!((w - (1 << 20) as f64).abs() < 16.0, "{w}");
    }

    #[test]
    fn zero_sized_allocations_weigh_nothing() {
        assert_eq!(scale(0, 4096), 0.0);
    }
}
