//! Scope tags with exact call sites: a block allocated in a scope is counted under its tag and at
//! its call site, and its free is taken from both, inside the scope or after it.

use heapdelta::{CallSites, Tracker};

#[global_allocator]
static GLOBAL: Tracker = Tracker::new().call_sites(CallSites::Exact);

const SIZE: usize = 120;

#[inline(never)]
fn scoped_block() -> Box<[u8; SIZE]> {
    Box::new([3; SIZE])
}

#[test]
fn a_scoped_block_is_counted_under_its_tag_and_at_its_site() {
    let (kept, d) = heapdelta::measure(|| {
        let mut blocks = {
            let _step = heapdelta::scope("step");
            let mut blocks: Vec<Box<[u8; SIZE]>> = (0..10).map(|_| scoped_block()).collect();
            // Three freed inside the scope, two after it.
            blocks.truncate(7);
            blocks
        };
        blocks.truncate(5);
        blocks
    });
    let step = d
        .tags()
        .iter()
        .find(|t| t.tag == "step")
        .cloned()
        .expect("the step tag");
    // The five boxes still held, and the vector holding them.
    assert_eq!(step.live_blocks, 6);
    assert_eq!(step.live_bytes, (5 * SIZE + 10 * 8) as i64);
    assert_eq!(step.allocated_bytes, (10 * SIZE + 10 * 8) as u64);
    let sites = d.sites();
    let site = sites
        .iter()
        .find(|s| s.site.to_string().contains("scoped_block"))
        .unwrap_or_else(|| panic!("no scoped_block site: {d}"));
    assert_eq!((site.allocs, site.frees), (10, 5));
    assert_eq!(site.live_bytes, (5 * SIZE) as i64);
    drop(kept);
}
