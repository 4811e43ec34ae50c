//! A thread remembers its last 32 stacks, and with each one where its site's counters are: a
//! program allocating from more places than that, in turn or in no order, makes the buffer forget
//! stacks and reuse their entries, and every block must still be counted at its own site.

use heapdelta::Tracker;
use std::collections::HashMap;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

/// More places than a thread's capture buffer remembers (32).
const PLACES: usize = 40;
/// Blocks kept from each place.
const ROUNDS: usize = 50;

/// One place: each `K` is a function of its own, so its blocks have a call site of their own.
#[inline(never)]
fn alloc_at<const K: usize>() -> Box<[u64; 3]> {
    black_box(Box::new([K as u64; 3]))
}

macro_rules! places {
    ($($k:literal)*) => {
        [$(alloc_at::<$k> as fn() -> Box<[u64; 3]>),*]
    };
}

fn places() -> [fn() -> Box<[u64; 3]>; PLACES] {
    places!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
        32 33 34 35 36 37 38 39)
}

/// Allocates `ROUNDS` blocks from every place, in the order `order` gives for each round, and
/// checks that every place's site holds exactly its `ROUNDS` blocks.
fn every_place_holds_its_blocks(order: impl Fn(usize, usize) -> usize) {
    let places = places();
    let (kept, d) = heapdelta::measure(|| {
        let mut kept = Vec::with_capacity(PLACES * ROUNDS);
        for round in 0..ROUNDS {
            for i in 0..PLACES {
                let place = order(round, i);
                kept.push((place, places[place]()));
            }
        }
        kept
    });
    // Each place's blocks hold its number; a site is the place whose blocks it holds.
    let mut by_site: HashMap<String, i64> = HashMap::new();
    for s in d.sites() {
        if s.live_blocks != 0 {
            *by_site.entry(format!("{:?}", s.site.frames())).or_default() += s.live_blocks;
        }
    }
    let counted: Vec<i64> = {
        let mut v: Vec<i64> = by_site.values().copied().collect();
        v.sort_unstable();
        v
    };
    // The vector of kept blocks is a site of its own too.
    let boxes: Vec<i64> = counted
        .iter()
        .copied()
        .filter(|&n| n == ROUNDS as i64)
        .collect();
    assert_eq!(
        boxes.len(),
        PLACES,
        "sites by live blocks: {counted:?} (expected {PLACES} of {ROUNDS})"
    );
    assert!(
        counted.iter().all(|&n| n == ROUNDS as i64 || n == 1),
        "a site holds blocks of another: {counted:?}"
    );
    assert!(kept.iter().all(|(k, b)| b[0] == *k as u64));
}

#[test]
fn places_taking_turns_are_counted_each_at_its_site() {
    every_place_holds_its_blocks(|_, i| i);
}

#[test]
fn places_in_no_order_are_counted_each_at_its_site() {
    // Each round a permutation of its own: 7 is prime to 40, and the rotation by the round's hash
    // differs from round to round.
    every_place_holds_its_blocks(|round, i| {
        let mut z = (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z ^= z >> 29;
        (i * 7 + z as usize) % PLACES
    });
}
