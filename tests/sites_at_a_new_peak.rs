//! One call site is one site whether its allocations stay below the peak or raise it: the stack
//! is captured from the same frame on both paths, so a `depth` the user's stack fills cuts it at
//! the same place.

use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new().depth(6);

type Block = Box<[u8; 4000]>;

#[inline(never)]
fn leak_one() -> Block {
    Box::new([1; 4000])
}

#[inline(never)]
fn level1(v: &mut Vec<Block>) {
    v.push(leak_one());
    std::hint::black_box(&v);
}

#[inline(never)]
fn level2(v: &mut Vec<Block>) {
    level1(v);
    std::hint::black_box(&v);
}

#[inline(never)]
fn level3(v: &mut Vec<Block>) {
    level2(v);
    std::hint::black_box(&v);
}

#[inline(never)]
fn level4(v: &mut Vec<Block>) {
    level3(v);
    std::hint::black_box(&v);
}

/// Allocates `n` blocks from one call site, keeping them or not.
#[inline(never)]
fn allocate(kept: &mut Vec<Block>, n: usize, keep: bool) {
    for _ in 0..n {
        level4(kept);
        if !keep {
            kept.pop();
        }
    }
}

#[test]
fn allocations_below_and_at_a_new_peak_are_one_site() {
    let mut kept = Vec::with_capacity(30_000);
    // Raise the peak well above what the first call reaches, so it stays below it.
    drop(std::hint::black_box(vec![0u8; 64 << 20]));
    heapdelta::checkpoint("start");
    allocate(&mut kept, 2_000, false);
    // 80 MB of growth: these cross the old peak and keep raising it.
    allocate(&mut kept, 20_000, true);
    let d = heapdelta::checkpoint("end");
    let sites: Vec<String> = d
        .sites()
        .iter()
        .filter(|s| s.site.to_string().contains("leak_one"))
        .map(|s| format!("{:?} ({} allocations)", s.site.frames(), s.allocs))
        .collect();
    assert_eq!(sites.len(), 1, "{sites:#?}");
    assert!(sites[0].ends_with("(22000 allocations)"), "{sites:#?}");
}
