//! A thread remembers its last 32 stacks, and with each one where its site's counters are: a
//! program allocating from more places than that, in turn or in no order, makes the buffer forget
//! stacks and reuse their entries, and every block must still be counted at its own site.

use heapdelta::Tracker;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

/// More places than a thread's capture buffer remembers (32).
const PLACES: usize = 40;
/// Rounds over the places.
const ROUNDS: usize = 50;

type Block = Box<[u64; 3]>;

/// The places: functions of their own, each on a line of its own, so that their sites differ by
/// name and line whatever the build's symbol mangling.
#[rustfmt::skip]
mod places {
    use super::{black_box, Block};
    #[inline(never)] pub fn p0() -> Block { black_box(Box::new([0; 3])) }
    #[inline(never)] pub fn p1() -> Block { black_box(Box::new([1; 3])) }
    #[inline(never)] pub fn p2() -> Block { black_box(Box::new([2; 3])) }
    #[inline(never)] pub fn p3() -> Block { black_box(Box::new([3; 3])) }
    #[inline(never)] pub fn p4() -> Block { black_box(Box::new([4; 3])) }
    #[inline(never)] pub fn p5() -> Block { black_box(Box::new([5; 3])) }
    #[inline(never)] pub fn p6() -> Block { black_box(Box::new([6; 3])) }
    #[inline(never)] pub fn p7() -> Block { black_box(Box::new([7; 3])) }
    #[inline(never)] pub fn p8() -> Block { black_box(Box::new([8; 3])) }
    #[inline(never)] pub fn p9() -> Block { black_box(Box::new([9; 3])) }
    #[inline(never)] pub fn p10() -> Block { black_box(Box::new([10; 3])) }
    #[inline(never)] pub fn p11() -> Block { black_box(Box::new([11; 3])) }
    #[inline(never)] pub fn p12() -> Block { black_box(Box::new([12; 3])) }
    #[inline(never)] pub fn p13() -> Block { black_box(Box::new([13; 3])) }
    #[inline(never)] pub fn p14() -> Block { black_box(Box::new([14; 3])) }
    #[inline(never)] pub fn p15() -> Block { black_box(Box::new([15; 3])) }
    #[inline(never)] pub fn p16() -> Block { black_box(Box::new([16; 3])) }
    #[inline(never)] pub fn p17() -> Block { black_box(Box::new([17; 3])) }
    #[inline(never)] pub fn p18() -> Block { black_box(Box::new([18; 3])) }
    #[inline(never)] pub fn p19() -> Block { black_box(Box::new([19; 3])) }
    #[inline(never)] pub fn p20() -> Block { black_box(Box::new([20; 3])) }
    #[inline(never)] pub fn p21() -> Block { black_box(Box::new([21; 3])) }
    #[inline(never)] pub fn p22() -> Block { black_box(Box::new([22; 3])) }
    #[inline(never)] pub fn p23() -> Block { black_box(Box::new([23; 3])) }
    #[inline(never)] pub fn p24() -> Block { black_box(Box::new([24; 3])) }
    #[inline(never)] pub fn p25() -> Block { black_box(Box::new([25; 3])) }
    #[inline(never)] pub fn p26() -> Block { black_box(Box::new([26; 3])) }
    #[inline(never)] pub fn p27() -> Block { black_box(Box::new([27; 3])) }
    #[inline(never)] pub fn p28() -> Block { black_box(Box::new([28; 3])) }
    #[inline(never)] pub fn p29() -> Block { black_box(Box::new([29; 3])) }
    #[inline(never)] pub fn p30() -> Block { black_box(Box::new([30; 3])) }
    #[inline(never)] pub fn p31() -> Block { black_box(Box::new([31; 3])) }
    #[inline(never)] pub fn p32() -> Block { black_box(Box::new([32; 3])) }
    #[inline(never)] pub fn p33() -> Block { black_box(Box::new([33; 3])) }
    #[inline(never)] pub fn p34() -> Block { black_box(Box::new([34; 3])) }
    #[inline(never)] pub fn p35() -> Block { black_box(Box::new([35; 3])) }
    #[inline(never)] pub fn p36() -> Block { black_box(Box::new([36; 3])) }
    #[inline(never)] pub fn p37() -> Block { black_box(Box::new([37; 3])) }
    #[inline(never)] pub fn p38() -> Block { black_box(Box::new([38; 3])) }
    #[inline(never)] pub fn p39() -> Block { black_box(Box::new([39; 3])) }
}

fn places() -> [fn() -> Block; PLACES] {
    use places::*;
    [
        p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, p16, p17, p18, p19,
        p20, p21, p22, p23, p24, p25, p26, p27, p28, p29, p30, p31, p32, p33, p34, p35, p36, p37,
        p38, p39,
    ]
}

/// The place a site is: the number in the name of its first frame (`…::places::p7`).
fn place_of(site: &heapdelta::Site) -> Option<usize> {
    let name = &site.frames().first()?.function;
    name.rsplit("::").next()?.strip_prefix('p')?.parse().ok()
}

/// Allocates a block from each place of `sequence` in turn, and checks that every place's site
/// holds exactly the blocks allocated there.
fn every_place_holds_its_blocks(sequence: &[usize]) {
    let places = places();
    let (kept, d) =
        heapdelta::measure(|| sequence.iter().map(|&p| places[p]()).collect::<Vec<_>>());
    let mut expected = [0i64; PLACES];
    for &p in sequence {
        expected[p] += 1;
    }
    let mut counted = [0i64; PLACES];
    for s in d.sites() {
        if let Some(place) = place_of(&s.site) {
            counted[place] += s.live_blocks;
        }
    }
    assert_eq!(counted, expected, "live blocks by place");
    assert!(kept.iter().zip(sequence).all(|(b, &p)| b[0] == p as u64));
}

#[test]
fn places_taking_turns_are_counted_each_at_its_site() {
    // Thirty-two places in turn, as many as the buffer remembers, so their stacks are replayed;
    // then thirty-two of which eight are new, each taking the entry of a place no longer used.
    let first: Vec<usize> = (0..ROUNDS / 2).flat_map(|_| 0..32).collect();
    let then: Vec<usize> = (0..ROUNDS / 2).flat_map(|_| 8..PLACES).collect();
    every_place_holds_its_blocks(&[first, then].concat());
}

#[test]
fn places_in_no_order_are_counted_each_at_its_site() {
    // Each round a permutation of its own: 7 is prime to 40, and the rotation by the round's hash
    // differs from round to round.
    let sequence: Vec<usize> = (0..ROUNDS)
        .flat_map(|round| {
            let mut z = (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z ^= z >> 29;
            (0..PLACES).map(move |i| (i * 7 + z as usize) % PLACES)
        })
        .collect();
    every_place_holds_its_blocks(&sequence);
}
