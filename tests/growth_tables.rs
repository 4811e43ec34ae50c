//! `Delta::table`: the growth grouped by call site, type, size class or tag, the largest change
//! first.

use heapdelta::By;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[inline(never)]
fn load_images(out: &mut Vec<Vec<u8>>) {
    for _ in 0..40 {
        out.push(vec![1u8; 300]);
    }
}

#[inline(never)]
fn parse_labels(out: &mut Vec<Vec<u8>>) {
    for _ in 0..25 {
        out.push(vec![2u8; 500]);
    }
}

/// The rows of `table` under its header line.
fn rows(table: &str) -> Vec<&str> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    assert!(header.contains("live bytes"), "{table}");
    lines.collect()
}

/// The growth of both loaders: 12,000 B in 40 blocks and 12,500 B in 25.
fn both_loaders(kept: &mut Vec<Vec<u8>>) -> heapdelta::Delta {
    heapdelta::measure(|| {
        load_images(kept);
        parse_labels(kept);
    })
    .1
}

#[test]
fn a_table_by_site_puts_the_larger_growth_first_with_its_bytes_blocks_and_allocations() {
    let mut kept = Vec::with_capacity(100);
    let table = both_loaders(&mut kept).table(By::Site, 10);
    let rows = rows(&table);
    let labels = rows.iter().position(|r| r.contains("parse_labels"));
    let images = rows.iter().position(|r| r.contains("load_images"));
    assert!(labels.is_some() && labels < images, "{table}");
    let row: Vec<&str> = rows[labels.unwrap_or(0)].split_whitespace().collect();
    assert_eq!(row[..4], ["+12.2", "KiB", "+25", "25"], "{table}");
}

#[test]
fn a_table_keeps_at_most_top_rows() {
    let mut kept = Vec::with_capacity(100);
    let table = both_loaders(&mut kept).table(By::Site, 1);
    let rows = rows(&table);
    assert_eq!(rows.len(), 2, "{table}");
    assert_eq!(rows[1].trim(), "(and 1 more site that changed)", "{table}");
}

#[test]
fn a_table_by_type_names_the_type_allocated() {
    let mut kept = Vec::with_capacity(100);
    let table = both_loaders(&mut kept).table(By::Type, 10);
    let first = rows(&table).first().copied().unwrap_or_default();
    assert!(first.ends_with("Vec<u8>"), "{table}");
    assert!(first.contains("+65"), "{table}");
}

#[test]
fn a_table_by_tag_lists_each_scope_with_the_bytes_it_allocated() {
    let mut kept = Vec::with_capacity(100);
    let (_, delta) = heapdelta::measure(|| {
        let _decode = heapdelta::scope("decode");
        load_images(&mut kept);
    });
    let table = delta.table(By::Tag, 10);
    assert!(
        table
            .lines()
            .next()
            .unwrap_or_default()
            .contains("allocated"),
        "{table}"
    );
    let row = rows(&table)
        .into_iter()
        .find(|r| r.ends_with("decode"))
        .unwrap_or_default();
    assert!(row.contains("+40"), "{table}");
}

#[test]
fn a_table_by_tag_adds_up_to_the_delta_with_a_row_for_what_no_tag_counted() {
    let mut kept = Vec::with_capacity(100);
    let (_, delta) = heapdelta::measure(|| {
        {
            let _decode = heapdelta::scope("decode");
            load_images(&mut kept);
        }
        kept.push(vec![0u8; 5000]);
    });
    let table = delta.table(By::Tag, 10);
    let untagged = rows(&table)
        .into_iter()
        .find(|r| r.ends_with("(no tag)"))
        .unwrap_or_default();
    assert!(untagged.contains("+4.9 KiB"), "{table}");
    let text = delta.to_string();
    let tags = text.lines().find(|l| l.trim_start().starts_with("tags:"));
    assert!(
        tags.is_some_and(|l| l.contains("decode +") && l.contains("(no tag) +4.9 KiB (+1 blk)")),
        "{text}"
    );
}

#[test]
fn a_snapshot_since_the_start_ranks_what_holds_the_heap() {
    let mut kept = Vec::new();
    load_images(&mut kept);
    // Other tests of this binary run meanwhile: their blocks may be live too.
    let live = heapdelta::snapshot().since_start();
    assert!(live.live_bytes() >= 12_000);
    let table = live.table(By::Site, 100);
    let row = rows(&table)
        .into_iter()
        .find(|r| r.contains("load_images"))
        .unwrap_or_else(|| panic!("{table}"));
    // Live blocks, the second figure: at least this test's 40 (other tests' may add to them).
    let blocks = row
        .split_whitespace()
        .nth(2)
        .and_then(|b| b.trim_start_matches('+').parse().ok());
    assert!(blocks.is_some_and(|b: u64| b >= 40), "{row}");
    drop(kept);
}

#[test]
fn a_table_without_rows_says_so() {
    let (kept, d) = heapdelta::measure(|| vec![0u8; 8]);
    let table = d.table(By::Tag, 5);
    assert_eq!(
        rows(&table),
        ["              (nothing was counted by tag here)"],
        "{table}"
    );
    drop(kept);
}

#[test]
fn a_window_that_shrank_lists_what_fell_most_first() {
    let big = vec![0u8; 100_000];
    let (kept, d) = heapdelta::measure(|| {
        drop(big);
        vec![1u8; 64]
    });
    let table = d.table(By::Site, 5);
    let first = rows(&table)[0];
    assert!(first.trim_start().starts_with("-97.7 KiB"), "{table}");
    drop(kept);
}

#[inline(never)]
fn churn() {
    for _ in 0..10 {
        drop(std::hint::black_box(vec![3u8; 700]));
    }
}

#[test]
fn sites_that_did_not_change_are_counted_under_the_table_not_listed() {
    let mut kept = Vec::with_capacity(100);
    let (_, d) = heapdelta::measure(|| {
        load_images(&mut kept);
        churn();
    });
    let table = d.table(By::Site, 10);
    let rows = rows(&table);
    let listed = rows.iter().filter(|r| !r.trim_start().starts_with('('));
    assert!(!listed.clone().any(|r| r.contains("churn")), "{table}");
    assert_eq!(listed.count(), 1, "{table}");
    let note = rows.last().map_or("", |r| r.trim());
    assert!(
        note.starts_with(
            "(1 site was allocated and freed alike: no change; the busiest, 10 allocs: \
             growth_tables::churn"
        ),
        "{table}"
    );
}
