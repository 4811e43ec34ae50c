//! Once the site table is full, the blocks of stacks first seen after that are counted at one
//! site, `(other call sites: the site table is full)`, so the sites still add up to the totals.

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Two functions that call each other down `depth` levels, choosing at each level by one bit of
/// `path`: every path is a stack of its own (the return addresses differ), so `2^depth` paths
/// intern `2^depth` distinct stacks.
#[inline(never)]
fn left(depth: u32, path: u32, out: &mut Vec<Vec<u8>>) {
    descend(depth, path, out);
    std::hint::black_box(1u8);
}

#[inline(never)]
fn right(depth: u32, path: u32, out: &mut Vec<Vec<u8>>) {
    descend(depth, path, out);
    std::hint::black_box(2u8);
}

#[inline(always)]
fn descend(depth: u32, path: u32, out: &mut Vec<Vec<u8>>) {
    if depth == 0 {
        out.push(vec![path as u8; 8]);
    } else if path >> (depth - 1) & 1 == 0 {
        left(depth - 1, path, out);
    } else {
        right(depth - 1, path, out);
    }
}

#[test]
fn blocks_past_a_full_site_table_are_counted_at_one_site() {
    // 2^17 distinct stacks, twice the table's 65,536.
    const DEPTH: u32 = 17;
    let mut out = Vec::with_capacity(1 << DEPTH);
    let (_, delta) = heapdelta::measure(|| {
        for path in 0..1u32 << DEPTH {
            descend(DEPTH, path, &mut out);
        }
    });
    let full: Vec<_> = delta
        .sites()
        .iter()
        .filter(|s| s.site.to_string().contains("the site table is full"))
        .collect();
    assert_eq!(full.len(), 1, "one site for the stacks past the table");
    assert!(full[0].allocs > 0);
    let at_sites: u64 = delta.sites().iter().map(|s| s.allocs).sum();
    assert_eq!(at_sites, delta.allocated_blocks());
}
