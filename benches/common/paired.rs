//! Ratios measured in one run, robust to a shared machine's load drifts: every round runs each
//! contender once, back to back, and a contender's ratio in that round is its time over its
//! baseline's time in the same round. The table shows the median over rounds and the spread.

use std::time::Duration;

/// One contender: its name, one timed run, and the index of its baseline among the contenders.
pub struct Contender<'a> {
    pub name: &'a str,
    pub run: &'a dyn Fn() -> Duration,
    pub base: usize,
}

impl<'a> Contender<'a> {
    /// `name`, timed by `run`, as a ratio to the contender at index `base`.
    pub fn new(name: &'a str, run: &'a dyn Fn() -> Duration, base: usize) -> Self {
        Contender { name, run, base }
    }
}

/// Runs `rounds` rounds of `contenders` on `workload` and prints one line per contender that is
/// not its own baseline: `median× baseline [min–max]`.
pub fn print_ratios(workload: &str, rounds: usize, contenders: &[Contender]) {
    if let Some(first) = contenders.first() {
        (first.run)(); // warm-up
    }
    let mut times = vec![Vec::with_capacity(rounds); contenders.len()];
    for _ in 0..rounds {
        for (t, c) in times.iter_mut().zip(contenders) {
            t.push((c.run)().as_secs_f64());
        }
    }
    for (i, c) in contenders.iter().enumerate() {
        let (Some(mine), Some(base)) = (times.get(i), times.get(c.base)) else {
            continue;
        };
        if c.base == i || rounds == 0 {
            continue;
        }
        let mut ratios: Vec<f64> = mine.iter().zip(base).map(|(t, b)| t / b).collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "  {workload:<26} {:<18} {:>5.2}x {:<9} [{:.2}–{:.2}]",
            c.name,
            ratios[rounds / 2],
            contenders[c.base].name,
            ratios[0],
            ratios[rounds - 1]
        );
    }
}
