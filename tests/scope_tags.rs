//! Scope tags: a block is counted under the innermost scope it was allocated in, from its
//! allocation to its free, wherever the free happens.

use heapdelta::{CallSites, Tracker};

#[global_allocator]
static GLOBAL: Tracker = Tracker::new().call_sites(CallSites::Off);

/// The live bytes `d` counts under `tag` (0 when it has none).
fn live(d: &heapdelta::Delta, tag: &str) -> i64 {
    d.tags()
        .iter()
        .find(|t| t.tag == tag)
        .map_or(0, |t| t.live_bytes)
}

#[test]
fn blocks_are_counted_under_the_scope_they_were_allocated_in() {
    let before: Vec<u8> = vec![0; 64];
    let ((kept, after), d) = heapdelta::measure(|| {
        let kept = {
            let _parse = heapdelta::scope("parse");
            // Allocated before the scope: its free is not the scope's.
            drop(before);
            let kept: Vec<Box<[u8; 100]>> = (0..10).map(|_| Box::new([0; 100])).collect();
            drop(std::hint::black_box(vec![0u8; 1000]));
            kept
        };
        let after: Vec<u8> = vec![0; 50];
        (kept, after)
    });
    let tags = d.tags();
    assert_eq!(tags.len(), 1, "{tags:?}");
    let parse = &tags[0];
    assert_eq!(parse.tag, "parse");
    // Ten boxes and the vector holding them.
    assert_eq!(parse.live_blocks, 11);
    assert_eq!(parse.live_bytes, 10 * 100 + 10 * 8);
    assert_eq!(parse.allocated_bytes, 10 * 100 + 10 * 8 + 1000);
    drop((kept, after));
}

#[test]
fn a_block_freed_after_its_scope_ended_is_taken_from_its_scope() {
    let ((), d) = heapdelta::measure(|| {
        let b = {
            let _load = heapdelta::scope("load");
            Box::new([0u8; 200])
        };
        drop(std::hint::black_box(b));
    });
    let load = d
        .tags()
        .iter()
        .find(|t| t.tag == "load")
        .expect("the load tag");
    assert_eq!(
        (load.live_bytes, load.live_blocks, load.allocated_bytes),
        (0, 0, 200)
    );
}

#[test]
fn nested_scopes_count_under_the_innermost_tag() {
    let (kept, d) = heapdelta::measure(|| {
        let _outer = heapdelta::scope("outer");
        let a = Box::new([0u8; 300]);
        let b = {
            let _inner = heapdelta::scope("inner");
            Box::new([0u8; 400])
        };
        let c = Box::new([0u8; 500]);
        (a, b, c)
    });
    assert_eq!((live(&d, "outer"), live(&d, "inner")), (300 + 500, 400));
    drop(kept);
}

#[test]
fn an_empty_tag_name_is_a_tag_like_any_other() {
    let (kept, d) = heapdelta::measure(|| {
        let _outer = heapdelta::scope("outer");
        let a = Box::new([0u8; 100]);
        let b = {
            let _empty = heapdelta::scope("");
            Box::new([0u8; 200])
        };
        (a, b)
    });
    let mut tags: Vec<(&str, i64)> = d.tags().iter().map(|t| (t.tag, t.live_bytes)).collect();
    tags.sort();
    assert_eq!(tags, [("", 200), ("outer", 100)]);
    let table = d.table(heapdelta::By::Tag, 10);
    let named_empty = table.lines().any(|l| l.ends_with("  \"\""));
    assert!(named_empty && !table.contains("(no tag)"), "{table}");
    drop(kept);
}

#[test]
fn scopes_ended_out_of_order_leave_the_one_still_open_then_none() {
    // Two tasks' guards interleaved on one thread (a user trial's current-thread runtime): the
    // first task's scope ends while the second's is open.
    let (kept, d) = heapdelta::measure(|| {
        let first = heapdelta::scope("first");
        let second = heapdelta::scope("second");
        drop(first);
        let in_second = Box::new([0u8; 300]);
        drop(second);
        let untagged = Box::new([0u8; 500]);
        (in_second, untagged)
    });
    assert_eq!(
        (live(&d, "first"), live(&d, "second")),
        (0, 300),
        "{:?}",
        d.tags()
    );
    drop(kept);
}
