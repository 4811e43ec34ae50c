//! A thread remembers up to 128 recent stacks (sixteen in each of eight sets, a stack's set picked
//! by where its walk starts), and with each one where its site's counters are: a program
//! allocating from more places than a set holds, in turn or in no order, makes the buffer forget
//! stacks and reuse their entries, and every block must still be counted at its own site.

use heapdelta::Tracker;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

/// More places than a thread's capture buffer remembers (128).
const PLACES: usize = 160;
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
    #[inline(never)] pub fn p40() -> Block { black_box(Box::new([40; 3])) }
    #[inline(never)] pub fn p41() -> Block { black_box(Box::new([41; 3])) }
    #[inline(never)] pub fn p42() -> Block { black_box(Box::new([42; 3])) }
    #[inline(never)] pub fn p43() -> Block { black_box(Box::new([43; 3])) }
    #[inline(never)] pub fn p44() -> Block { black_box(Box::new([44; 3])) }
    #[inline(never)] pub fn p45() -> Block { black_box(Box::new([45; 3])) }
    #[inline(never)] pub fn p46() -> Block { black_box(Box::new([46; 3])) }
    #[inline(never)] pub fn p47() -> Block { black_box(Box::new([47; 3])) }
    #[inline(never)] pub fn p48() -> Block { black_box(Box::new([48; 3])) }
    #[inline(never)] pub fn p49() -> Block { black_box(Box::new([49; 3])) }
    #[inline(never)] pub fn p50() -> Block { black_box(Box::new([50; 3])) }
    #[inline(never)] pub fn p51() -> Block { black_box(Box::new([51; 3])) }
    #[inline(never)] pub fn p52() -> Block { black_box(Box::new([52; 3])) }
    #[inline(never)] pub fn p53() -> Block { black_box(Box::new([53; 3])) }
    #[inline(never)] pub fn p54() -> Block { black_box(Box::new([54; 3])) }
    #[inline(never)] pub fn p55() -> Block { black_box(Box::new([55; 3])) }
    #[inline(never)] pub fn p56() -> Block { black_box(Box::new([56; 3])) }
    #[inline(never)] pub fn p57() -> Block { black_box(Box::new([57; 3])) }
    #[inline(never)] pub fn p58() -> Block { black_box(Box::new([58; 3])) }
    #[inline(never)] pub fn p59() -> Block { black_box(Box::new([59; 3])) }
    #[inline(never)] pub fn p60() -> Block { black_box(Box::new([60; 3])) }
    #[inline(never)] pub fn p61() -> Block { black_box(Box::new([61; 3])) }
    #[inline(never)] pub fn p62() -> Block { black_box(Box::new([62; 3])) }
    #[inline(never)] pub fn p63() -> Block { black_box(Box::new([63; 3])) }
    #[inline(never)] pub fn p64() -> Block { black_box(Box::new([64; 3])) }
    #[inline(never)] pub fn p65() -> Block { black_box(Box::new([65; 3])) }
    #[inline(never)] pub fn p66() -> Block { black_box(Box::new([66; 3])) }
    #[inline(never)] pub fn p67() -> Block { black_box(Box::new([67; 3])) }
    #[inline(never)] pub fn p68() -> Block { black_box(Box::new([68; 3])) }
    #[inline(never)] pub fn p69() -> Block { black_box(Box::new([69; 3])) }
    #[inline(never)] pub fn p70() -> Block { black_box(Box::new([70; 3])) }
    #[inline(never)] pub fn p71() -> Block { black_box(Box::new([71; 3])) }
    #[inline(never)] pub fn p72() -> Block { black_box(Box::new([72; 3])) }
    #[inline(never)] pub fn p73() -> Block { black_box(Box::new([73; 3])) }
    #[inline(never)] pub fn p74() -> Block { black_box(Box::new([74; 3])) }
    #[inline(never)] pub fn p75() -> Block { black_box(Box::new([75; 3])) }
    #[inline(never)] pub fn p76() -> Block { black_box(Box::new([76; 3])) }
    #[inline(never)] pub fn p77() -> Block { black_box(Box::new([77; 3])) }
    #[inline(never)] pub fn p78() -> Block { black_box(Box::new([78; 3])) }
    #[inline(never)] pub fn p79() -> Block { black_box(Box::new([79; 3])) }
    #[inline(never)] pub fn p80() -> Block { black_box(Box::new([80; 3])) }
    #[inline(never)] pub fn p81() -> Block { black_box(Box::new([81; 3])) }
    #[inline(never)] pub fn p82() -> Block { black_box(Box::new([82; 3])) }
    #[inline(never)] pub fn p83() -> Block { black_box(Box::new([83; 3])) }
    #[inline(never)] pub fn p84() -> Block { black_box(Box::new([84; 3])) }
    #[inline(never)] pub fn p85() -> Block { black_box(Box::new([85; 3])) }
    #[inline(never)] pub fn p86() -> Block { black_box(Box::new([86; 3])) }
    #[inline(never)] pub fn p87() -> Block { black_box(Box::new([87; 3])) }
    #[inline(never)] pub fn p88() -> Block { black_box(Box::new([88; 3])) }
    #[inline(never)] pub fn p89() -> Block { black_box(Box::new([89; 3])) }
    #[inline(never)] pub fn p90() -> Block { black_box(Box::new([90; 3])) }
    #[inline(never)] pub fn p91() -> Block { black_box(Box::new([91; 3])) }
    #[inline(never)] pub fn p92() -> Block { black_box(Box::new([92; 3])) }
    #[inline(never)] pub fn p93() -> Block { black_box(Box::new([93; 3])) }
    #[inline(never)] pub fn p94() -> Block { black_box(Box::new([94; 3])) }
    #[inline(never)] pub fn p95() -> Block { black_box(Box::new([95; 3])) }
    #[inline(never)] pub fn p96() -> Block { black_box(Box::new([96; 3])) }
    #[inline(never)] pub fn p97() -> Block { black_box(Box::new([97; 3])) }
    #[inline(never)] pub fn p98() -> Block { black_box(Box::new([98; 3])) }
    #[inline(never)] pub fn p99() -> Block { black_box(Box::new([99; 3])) }
    #[inline(never)] pub fn p100() -> Block { black_box(Box::new([100; 3])) }
    #[inline(never)] pub fn p101() -> Block { black_box(Box::new([101; 3])) }
    #[inline(never)] pub fn p102() -> Block { black_box(Box::new([102; 3])) }
    #[inline(never)] pub fn p103() -> Block { black_box(Box::new([103; 3])) }
    #[inline(never)] pub fn p104() -> Block { black_box(Box::new([104; 3])) }
    #[inline(never)] pub fn p105() -> Block { black_box(Box::new([105; 3])) }
    #[inline(never)] pub fn p106() -> Block { black_box(Box::new([106; 3])) }
    #[inline(never)] pub fn p107() -> Block { black_box(Box::new([107; 3])) }
    #[inline(never)] pub fn p108() -> Block { black_box(Box::new([108; 3])) }
    #[inline(never)] pub fn p109() -> Block { black_box(Box::new([109; 3])) }
    #[inline(never)] pub fn p110() -> Block { black_box(Box::new([110; 3])) }
    #[inline(never)] pub fn p111() -> Block { black_box(Box::new([111; 3])) }
    #[inline(never)] pub fn p112() -> Block { black_box(Box::new([112; 3])) }
    #[inline(never)] pub fn p113() -> Block { black_box(Box::new([113; 3])) }
    #[inline(never)] pub fn p114() -> Block { black_box(Box::new([114; 3])) }
    #[inline(never)] pub fn p115() -> Block { black_box(Box::new([115; 3])) }
    #[inline(never)] pub fn p116() -> Block { black_box(Box::new([116; 3])) }
    #[inline(never)] pub fn p117() -> Block { black_box(Box::new([117; 3])) }
    #[inline(never)] pub fn p118() -> Block { black_box(Box::new([118; 3])) }
    #[inline(never)] pub fn p119() -> Block { black_box(Box::new([119; 3])) }
    #[inline(never)] pub fn p120() -> Block { black_box(Box::new([120; 3])) }
    #[inline(never)] pub fn p121() -> Block { black_box(Box::new([121; 3])) }
    #[inline(never)] pub fn p122() -> Block { black_box(Box::new([122; 3])) }
    #[inline(never)] pub fn p123() -> Block { black_box(Box::new([123; 3])) }
    #[inline(never)] pub fn p124() -> Block { black_box(Box::new([124; 3])) }
    #[inline(never)] pub fn p125() -> Block { black_box(Box::new([125; 3])) }
    #[inline(never)] pub fn p126() -> Block { black_box(Box::new([126; 3])) }
    #[inline(never)] pub fn p127() -> Block { black_box(Box::new([127; 3])) }
    #[inline(never)] pub fn p128() -> Block { black_box(Box::new([128; 3])) }
    #[inline(never)] pub fn p129() -> Block { black_box(Box::new([129; 3])) }
    #[inline(never)] pub fn p130() -> Block { black_box(Box::new([130; 3])) }
    #[inline(never)] pub fn p131() -> Block { black_box(Box::new([131; 3])) }
    #[inline(never)] pub fn p132() -> Block { black_box(Box::new([132; 3])) }
    #[inline(never)] pub fn p133() -> Block { black_box(Box::new([133; 3])) }
    #[inline(never)] pub fn p134() -> Block { black_box(Box::new([134; 3])) }
    #[inline(never)] pub fn p135() -> Block { black_box(Box::new([135; 3])) }
    #[inline(never)] pub fn p136() -> Block { black_box(Box::new([136; 3])) }
    #[inline(never)] pub fn p137() -> Block { black_box(Box::new([137; 3])) }
    #[inline(never)] pub fn p138() -> Block { black_box(Box::new([138; 3])) }
    #[inline(never)] pub fn p139() -> Block { black_box(Box::new([139; 3])) }
    #[inline(never)] pub fn p140() -> Block { black_box(Box::new([140; 3])) }
    #[inline(never)] pub fn p141() -> Block { black_box(Box::new([141; 3])) }
    #[inline(never)] pub fn p142() -> Block { black_box(Box::new([142; 3])) }
    #[inline(never)] pub fn p143() -> Block { black_box(Box::new([143; 3])) }
    #[inline(never)] pub fn p144() -> Block { black_box(Box::new([144; 3])) }
    #[inline(never)] pub fn p145() -> Block { black_box(Box::new([145; 3])) }
    #[inline(never)] pub fn p146() -> Block { black_box(Box::new([146; 3])) }
    #[inline(never)] pub fn p147() -> Block { black_box(Box::new([147; 3])) }
    #[inline(never)] pub fn p148() -> Block { black_box(Box::new([148; 3])) }
    #[inline(never)] pub fn p149() -> Block { black_box(Box::new([149; 3])) }
    #[inline(never)] pub fn p150() -> Block { black_box(Box::new([150; 3])) }
    #[inline(never)] pub fn p151() -> Block { black_box(Box::new([151; 3])) }
    #[inline(never)] pub fn p152() -> Block { black_box(Box::new([152; 3])) }
    #[inline(never)] pub fn p153() -> Block { black_box(Box::new([153; 3])) }
    #[inline(never)] pub fn p154() -> Block { black_box(Box::new([154; 3])) }
    #[inline(never)] pub fn p155() -> Block { black_box(Box::new([155; 3])) }
    #[inline(never)] pub fn p156() -> Block { black_box(Box::new([156; 3])) }
    #[inline(never)] pub fn p157() -> Block { black_box(Box::new([157; 3])) }
    #[inline(never)] pub fn p158() -> Block { black_box(Box::new([158; 3])) }
    #[inline(never)] pub fn p159() -> Block { black_box(Box::new([159; 3])) }
}

fn places() -> [fn() -> Block; PLACES] {
    use places::*;
    [
        p0, p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, p16, p17, p18, p19,
        p20, p21, p22, p23, p24, p25, p26, p27, p28, p29, p30, p31, p32, p33, p34, p35, p36, p37,
        p38, p39, p40, p41, p42, p43, p44, p45, p46, p47, p48, p49, p50, p51, p52, p53, p54, p55,
        p56, p57, p58, p59, p60, p61, p62, p63, p64, p65, p66, p67, p68, p69, p70, p71, p72, p73,
        p74, p75, p76, p77, p78, p79, p80, p81, p82, p83, p84, p85, p86, p87, p88, p89, p90, p91,
        p92, p93, p94, p95, p96, p97, p98, p99, p100, p101, p102, p103, p104, p105, p106, p107,
        p108, p109, p110, p111, p112, p113, p114, p115, p116, p117, p118, p119, p120, p121, p122,
        p123, p124, p125, p126, p127, p128, p129, p130, p131, p132, p133, p134, p135, p136, p137,
        p138, p139, p140, p141, p142, p143, p144, p145, p146, p147, p148, p149, p150, p151, p152,
        p153, p154, p155, p156, p157, p158, p159,
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
    // 128 places in turn, as many as the buffer remembers, though some sets get more than their
    // sixteen (those places' stacks take each other's entries, the others are replayed); then 128
    // of which 32 are new, each taking the entry of a place in its set, no longer used or not.
    let first: Vec<usize> = (0..ROUNDS / 2).flat_map(|_| 0..128).collect();
    let then: Vec<usize> = (0..ROUNDS / 2).flat_map(|_| 32..PLACES).collect();
    every_place_holds_its_blocks(&[first, then].concat());
}

#[test]
fn places_in_no_order_are_counted_each_at_its_site() {
    // Each round a permutation of its own: 7 is prime to 160, and the rotation by the round's hash
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
