//! `measure` follows the highest its thread's live bytes rise while the measured code runs
//! (`Delta::peak_added_bytes`), not only what is left at the end.

use std::hint::black_box;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// The measured peak of `f`: (bytes, blocks).
fn peak_of<R>(f: impl FnOnce() -> R) -> (u64, i64) {
    let (r, d) = heapdelta::measure(f);
    drop(r);
    (
        d.peak_added_bytes().unwrap(),
        d.peak_added_blocks().unwrap(),
    )
}

#[test]
fn the_peak_of_a_window_is_its_highest_rise_not_what_is_left() {
    let ((), d) = heapdelta::measure(|| {
        let a = black_box(vec![0u8; 10_000]);
        let b = black_box(vec![0u8; 20_000]);
        drop(a);
        let c = black_box(vec![0u8; 5_000]);
        drop(b);
        drop(c);
    });
    assert_eq!(d.live_bytes(), 0);
    assert_eq!(d.peak_added_bytes(), Some(30_000));
    assert_eq!(d.peak_added_blocks(), Some(2));
}

#[test]
fn a_later_higher_rise_is_the_peak() {
    let peak = peak_of(|| {
        drop(black_box(vec![0u8; 1_000]));
        drop(black_box(vec![0u8; 3_000]));
        drop(black_box(vec![0u8; 2_000]));
    });
    assert_eq!(peak, (3_000, 1));
}

#[test]
fn a_window_that_only_frees_older_blocks_peaks_at_nothing() {
    let older = black_box(vec![0u8; 50_000]);
    assert_eq!(peak_of(move || drop(older)), (0, 0));
}

#[test]
fn a_peak_past_the_threads_folds_into_the_global_figure_is_exact() {
    // A megabyte: the thread folds its change into the global figure every 256 KiB on the way.
    let peak = peak_of(|| {
        let mut parts: Vec<Vec<u8>> = Vec::with_capacity(100);
        for _ in 0..100 {
            parts.push(black_box(vec![0u8; 10_000]));
        }
        drop(parts);
    });
    assert_eq!(peak, (100 * 10_000 + 100 * 24, 101));
}

#[test]
fn an_inner_window_has_its_own_peak_and_counts_in_the_outer_one() {
    let mut inner = (0, 0);
    let ((), outer) = heapdelta::measure(|| {
        let kept = black_box(vec![0u8; 1_000]);
        inner = peak_of(|| drop(black_box(vec![0u8; 50_000])));
        drop(kept);
    });
    assert_eq!(inner, (50_000, 1));
    assert_eq!(outer.peak_added_bytes(), Some(51_000));
    assert_eq!(outer.peak_added_blocks(), Some(2));
}

#[test]
fn a_window_closed_by_a_panic_leaves_the_next_one_exact() {
    let caught = std::panic::catch_unwind(|| {
        heapdelta::measure(|| {
            let _big = black_box(vec![0u8; 100_000]);
            panic!("measured code panicked");
        })
    });
    assert!(caught.is_err());
    assert_eq!(peak_of(|| drop(black_box(vec![0u8; 7_000]))), (7_000, 1));
}

#[test]
fn the_printed_measure_says_its_peak() {
    let ((), d) = heapdelta::measure(|| drop(black_box(vec![0u8; 4096])));
    let text = d.to_string();
    assert!(
        text.starts_with("| measure | added +0 B | peak +4.0 KiB | blocks +0 |"),
        "{text}"
    );
}
