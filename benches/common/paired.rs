//! Ratios measured in one run, robust to a shared machine's load drifts: every round runs each
//! contender once, back to back, in an order of its own (`shuffle`), and a contender's ratio in
//! that round is its time over its baseline's time in the same round. The table shows the median
//! over rounds and the spread.

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
    let mut order: Vec<usize> = (0..contenders.len()).collect();
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..rounds {
        shuffle(&mut order, &mut rng);
        for &i in &order {
            if let (Some(t), Some(c)) = (times.get_mut(i), contenders.get(i)) {
                t.push((c.run)().as_secs_f64());
            }
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

/// Puts `order` in a random order (Fisher-Yates, from the xorshift state `rng`): each round runs
/// the contenders in an order of its own, so that none always runs after the same others. A
/// workload that leaves the heap otherwise than it found it, as `growth` does, weighs on
/// whichever contender comes next: with a fixed order every tracker measured about 0.1 less on
/// `growth` than with the order reversed every other round.
fn shuffle(order: &mut [usize], rng: &mut u64) {
    for i in (1..order.len()).rev() {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        order.swap(i, (*rng % (i as u64 + 1)) as usize);
    }
}
