//! The timeline plot draws the sites that grew at every step before the others that grew most:
//! one-off growths larger than a steady leak do not crowd the leak out of it.
#![cfg(feature = "plot")]

mod common;

use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

/// A steady leak: a little at every step.
#[inline(never)]
fn leak_a_little(kept: &mut Vec<Vec<u8>>) {
    kept.push(std::hint::black_box(vec![1u8; 100]));
}

/// A one-off growth far larger than the leak's, from a place of its own per `step` (1 to 6).
/// (Each `grow_once_from` ends in a tail call, so its site is the line here that called it.)
#[inline(never)]
fn grow_once(kept: &mut Vec<Vec<u8>>, step: usize) {
    let block = match step {
        1 => grow_once_from::<1>(),
        2 => grow_once_from::<2>(),
        3 => grow_once_from::<3>(),
        4 => grow_once_from::<4>(),
        5 => grow_once_from::<5>(),
        _ => grow_once_from::<6>(),
    };
    kept.push(std::hint::black_box(block));
}

#[inline(never)]
fn grow_once_from<const N: u8>() -> Vec<u8> {
    vec![N; 64 * 1024]
}

#[test]
fn the_plot_draws_the_site_that_grew_at_every_step_beside_larger_one_off_growths() {
    let mut kept = Vec::with_capacity(100);
    heapdelta::checkpoint("start");
    for step in 1..=7 {
        leak_a_little(&mut kept);
        if step <= 6 {
            grow_once(&mut kept, step);
        }
        heapdelta::checkpoint(format!("step {step}"));
    }
    let dir = common::temp_dir("plot_leak");
    let path = dir.join("timeline.svg");
    heapdelta::timeline().write_plot(&path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(
        svg.contains("grow_once ("),
        "the larger growths are drawn too: {svg}"
    );
    assert!(svg.contains("leak_a_little"), "{svg}");
}
