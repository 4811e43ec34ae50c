//! The terminal report's tests.

use super::delta::*;
use super::format::*;
use crate::callsite::Site;
use crate::diff::{Delta, Timeline};
use crate::snapshot::{ClassCount, SiteCount, SiteList, Snapshot};
use crate::stats::Counts;

#[test]
fn one_line_escapes_what_would_turn_the_line_around_or_break_an_svg() {
    assert_eq!(
        OneLine("a\u{202e}b\u{ffff}c\nd").to_string(),
        "a\\u{202e}b\\u{ffff}c\\nd"
    );
}

#[test]
fn a_changes_line_lists_the_largest_changes_either_way() {
    // As a step that shrank lists its types: largest growth first, so the falls come last.
    let entries = [("a", 10, 1), ("b", -1, -1), ("c", -2, -1), ("d", -3, -1)]
        .into_iter()
        .chain([("e", -4, -1), ("f", -5, -1), ("g", -1 << 20, -9)])
        .map(|(n, b, k)| (n.to_string(), b, k));
    let line = changes_line("types", entries).expect("some changed");
    assert_eq!(
        line,
        "   types: g -1.0 MiB (-9 blk) | a +10 B (+1 blk) | f -5 B (-1 blk) | \
         e -4 B (-1 blk) | d -3 B (-1 blk) | 2 more"
    );
}

/// A step from an empty heap to one whose size classes say `live` bytes in `blocks`, with one
/// site of 3 blocks of 8 bytes.
fn step_with_one_site(live: u64, blocks: u64) -> String {
    let mut s = Snapshot::zero();
    s.totals.live_bytes = live;
    s.totals.live_blocks = blocks;
    s.totals.total_bytes = live;
    s.totals.total_blocks = blocks;
    s.totals.peak_bytes = live;
    s.totals.peak_blocks = blocks;
    s.classes = vec![ClassCount {
        size: 16,
        counts: Counts {
            alloc_blocks: blocks,
            alloc_bytes: live,
            free_blocks: 0,
            free_bytes: 0,
        },
    }]
    .into();
    let mut site = SiteCount::live(1, 3);
    site.counts.alloc_blocks = 3 * crate::stats::UNIT;
    s.sites = SiteList::new(vec![site]);
    s.since(&Snapshot::zero()).to_string()
}

/// A site count of a run read from a file, at a site named `function`.
fn site_named(function: &str, id: u32, counts: Counts, young_free: (u64, u64)) -> SiteCount {
    SiteCount {
        site: Some(crate::Site::new(vec![crate::Frame {
            function: function.to_string(),
            file: Some("src/main.rs".to_string()),
            line: Some(1),
        }])),
        counts,
        young_free,
        ..SiteCount::live(id, 0)
    }
}

/// The first step of a run read from a file (from an empty snapshot), with `sites`.
fn first_step(sites: Vec<SiteCount>) -> Delta {
    let mut before = Snapshot::zero();
    before.run = !crate::checkpoint::run_id();
    let mut after = before.clone();
    after.sites = SiteList::new(sites);
    after.since(&before)
}

/// A step with one site per `(function, blocks allocated, blocks freed)`, each block 8 bytes.
fn step_with_sites(sites: &[(&str, u64, u64)]) -> Delta {
    let unit = crate::stats::UNIT;
    first_step(
        sites
            .iter()
            .zip(1..)
            .map(|(&(function, allocs, frees), id)| {
                let counts = Counts {
                    alloc_blocks: allocs * unit,
                    alloc_bytes: 8 * allocs,
                    free_blocks: frees * unit,
                    free_bytes: 8 * frees,
                };
                site_named(function, id, counts, (0, 0))
            })
            .collect(),
    )
}

#[test]
fn a_site_that_fell_by_more_than_a_listed_one_grew_is_listed_in_a_step_that_rose() {
    // A user trial's cache: its new table grew, its old one was freed, small sites grew.
    let text = step_with_sites(&[("table", 100, 0), ("tiny", 2, 0), ("old", 0, 50)]).to_string();
    let listed: Vec<&str> = text.lines().filter(|l| l.contains(" blk ")).collect();
    assert_eq!(listed.len(), 3, "{text}");
    assert!(
        listed[2].contains("-400 B") && listed[2].contains("old"),
        "{text}"
    );
    let small = step_with_sites(&[("table", 100, 0), ("tiny", 2, 0), ("crumb", 0, 1)]);
    assert!(!small.to_string().contains("crumb ("), "{small}");
}

#[test]
fn a_measure_whose_sites_freed_all_they_allocated_names_the_busiest_first() {
    // A user trial's test that a loop allocates nothing after warm-up read only its summary line.
    let sites = [("once", 1, 1), ("quiet", 2, 2), ("parse", 1000, 1000)];
    let text = step_with_sites(&sites).thread_only().to_string();
    let lines: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(
        lines,
        [
            "   no site's live bytes changed; the sites that allocated most:",
            "         1,000 allocs  parse (src/main.rs:1)  [(unknown), ~8 B per alloc]",
            "             2 allocs  quiet (src/main.rs:1)  [(unknown), ~8 B per alloc]",
            "             1 alloc   once (src/main.rs:1)  [(unknown), ~8 B per alloc]",
        ],
        "{text}"
    );
}

#[test]
fn a_measure_with_a_site_that_grew_lists_it_and_not_the_busiest() {
    let step = step_with_sites(&[("grow", 3, 0), ("churn", 1000, 1000)]).thread_only();
    let text = step.to_string();
    assert!(!text.contains("allocated most"), "{text}");
    assert!(!text.contains("churn"), "{text}");
}

#[test]
fn a_measure_whose_only_change_is_a_fall_it_did_not_list_names_no_busiest() {
    // The sites' total is not the window's (here no size class changed, as when some blocks
    // have no site): a crumb freed while the rest churned is counted as a site that fell, and
    // no site is said to be unchanged (a review).
    let step = step_with_sites(&[("churn", 1000, 1000), ("crumb", 0, 1)]);
    let text = step.thread_only().to_string();
    assert!(!text.contains("allocated most"), "{text}");
}

#[test]
fn a_sampled_measure_names_no_busiest() {
    let mut step = step_with_sites(&[("parse", 1000, 1000)]).thread_only();
    step.sampled_mean = Some(1024);
    let text = step.to_string();
    assert!(!text.contains("allocated most"), "{text}");
}

#[test]
fn a_step_between_checkpoints_that_freed_all_it_allocated_lists_no_sites() {
    // A loop's steps would each list the same churn (the training example's `--fixed` run).
    let text = step_with_sites(&[("parse", 1000, 1000)]).to_string();
    assert!(!text.contains("allocated most"), "{text}");
}

#[test]
fn a_site_that_kept_blocks_larger_than_its_average_allocation_says_their_size() {
    // A string grown in steps (8, 16 then 32 bytes), 200 times: 600 allocations of 18.7 B on
    // average, of which the 200 last, of 32 B, are kept (a user trial read "~19 B per alloc"
    // as the size of what leaked).
    let unit = crate::stats::UNIT;
    let counts = Counts {
        alloc_blocks: 600 * unit,
        alloc_bytes: 200 * (8 + 16 + 32),
        free_blocks: 400 * unit,
        free_bytes: 200 * (8 + 16),
    };
    let young = (400 * unit, 200 * (8 + 16));
    let text = first_step(vec![site_named("grow", 1, counts, young)]).to_string();
    assert!(
        text.contains("[(unknown), ~19 B per alloc, kept 200 of 600 born (~32 B each)]"),
        "{text}"
    );
}

#[test]
fn class_names_are_exact_in_the_largest_unit_that_gives_them_in_two_decimals() {
    assert_eq!(class_name(16), "16 B");
    assert_eq!(class_name(640), "640 B");
    assert_eq!(class_name(1024), "1 KiB");
    assert_eq!(class_name(1280), "1.25 KiB");
    assert_eq!(class_name(2_621_440), "2.5 MiB");
    assert_eq!(class_name(1_000_000), "1,000,000 B");
}

#[test]
fn a_site_that_also_freed_older_blocks_says_how_many() {
    // A cache that replaced 4 older entries with 6 of the 10 born this step: +2 blocks, which
    // "kept 6" alone seemed to contradict (a user trial).
    let unit = crate::stats::UNIT;
    let counts = Counts {
        alloc_blocks: 10 * unit,
        alloc_bytes: 10 * 40,
        free_blocks: 8 * unit,
        free_bytes: 8 * 40,
    };
    let young = (4 * unit, 4 * 40);
    let text = first_step(vec![site_named("cache", 1, counts, young)]).to_string();
    assert!(
        text.contains("+2 blk") && text.contains("kept 6 of 10 born, 4 older freed]"),
        "{text}"
    );
}

#[test]
fn a_site_that_only_freed_older_blocks_says_only_that() {
    let unit = crate::stats::UNIT;
    let counts = Counts {
        alloc_blocks: 0,
        alloc_bytes: 0,
        free_blocks: 3 * unit,
        free_bytes: 3 * 64,
    };
    // A step that shrank, so that the sites that fell are listed.
    let mut before = Snapshot::zero();
    before.run = !crate::checkpoint::run_id();
    let class = |free_blocks, free_bytes| ClassCount {
        size: 64,
        counts: Counts {
            alloc_blocks: 3,
            alloc_bytes: 3 * 64,
            free_blocks,
            free_bytes,
        },
    };
    before.classes = vec![class(0, 0)].into();
    before.checkpoint = true;
    let mut after = before.clone();
    after.epoch = 1;
    after.classes = vec![class(3, 3 * 64)].into();
    after.sites = SiteList::new(vec![site_named("drop", 1, counts, (0, 0))]);
    let text = after.since(&before).to_string();
    assert!(text.contains("per blk, 3 older freed]"), "{text}");
    assert!(!text.contains("kept 0 of 0"), "{text}");
}

#[test]
fn one_kept_block_larger_than_the_average_allocation_gives_its_size() {
    // A map's table grown in steps: the last, largest table is the one kept.
    let unit = crate::stats::UNIT;
    let counts = Counts {
        alloc_blocks: 3 * unit,
        alloc_bytes: 1024 + 2048 + 4096,
        free_blocks: 2 * unit,
        free_bytes: 1024 + 2048,
    };
    let young = (2 * unit, 1024 + 2048);
    let text = first_step(vec![site_named("table", 1, counts, young)]).to_string();
    assert!(text.contains("kept 1 of 3 born (4.0 KiB)]"), "{text}");
}

#[test]
fn a_site_that_kept_blocks_of_its_average_size_says_it_once() {
    let unit = crate::stats::UNIT;
    let counts = Counts {
        alloc_blocks: 10 * unit,
        alloc_bytes: 400,
        free_blocks: 0,
        free_bytes: 0,
    };
    let text = first_step(vec![site_named("keep", 1, counts, (0, 0))]).to_string();
    assert!(
        text.contains("[(unknown), ~40 B per alloc, kept 10 of 10 born]"),
        "{text}"
    );
}

#[test]
fn kept_blocks_of_the_average_size_as_printed_are_not_said_twice() {
    // 2,070 B per allocation and 2,080 B per block kept both print as 2.0 KiB (a review).
    let unit = crate::stats::UNIT;
    let counts = Counts {
        alloc_blocks: 100 * unit,
        alloc_bytes: 50 * 2060 + 50 * 2080,
        free_blocks: 50 * unit,
        free_bytes: 50 * 2060,
    };
    let young = (50 * unit, 50 * 2060);
    let text = first_step(vec![site_named("grow", 1, counts, young)]).to_string();
    assert!(
        text.contains("[(unknown), ~2.0 KiB per alloc, kept 50 of 100 born]"),
        "{text}"
    );
}

#[test]
fn table_rows_that_left_nothing_are_counted_with_the_busiest_named() {
    // A user trial: the twenty rows of a table were half `+0 B` churn. An earlier one: its
    // churn site of a million allocations fell below the top 20, after quiet sites.
    let d = step_with_sites(&[("a_quiet", 3, 3), ("z_busy", 1_080_000, 1_080_000)]);
    let table = d.table(By::Site, 10);
    let lines: Vec<&str> = table.lines().map(str::trim).collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[1].starts_with(
            "(2 sites were allocated and freed alike: no change; the busiest, 1,080,000 \
             allocs: z_busy"
        ),
        "{table}"
    );
}

#[test]
fn table_columns_widen_to_their_widest_figure() {
    let d = step_with_sites(&[("many", 12_345_678, 0)]);
    let table = d.table(By::Site, 10);
    let mut lines = table.lines();
    assert_eq!(
        lines.next(),
        Some("  live bytes      blocks     allocs  site")
    );
    assert_eq!(
        lines.next(),
        Some("   +94.2 MiB +12,345,678 12,345,678  many (src/main.rs:1)  [(unknown)]")
    );
}

#[test]
fn a_comparison_of_two_runs_that_differ_nowhere_says_so() {
    let run = |flip| {
        let mut s = Snapshot::zero();
        s.run ^= flip;
        s.sites = SiteList::new(vec![SiteCount {
            site: Some(crate::Site::new(vec![crate::Frame {
                function: "app::load".to_string(),
                file: None,
                line: None,
            }])),
            ..SiteCount::live(1, 3)
        }]);
        s
    };
    let d = run(1).since(&run(2));
    assert!(d.is_comparison());
    let table = d.table(By::Site, 10);
    assert!(
        table.contains("(nothing counted by site differs between the two)"),
        "{table}"
    );
}

#[test]
fn averages_are_rounded_to_the_nearest_byte() {
    assert_eq!(rounded_div(9_999_920, 1_999_990), 5);
    assert_eq!(rounded_div(7, 2), 4);
    assert_eq!(rounded_div(5, 3), 2);
    assert_eq!(rounded_div(4, 3), 1);
    assert_eq!(rounded_div(u64::MAX, u64::MAX), 1);
}

#[test]
fn sites_that_add_up_to_the_step_get_no_note() {
    let text = step_with_one_site(24, 3);
    assert!(!text.contains("account for"), "{text}");
}

#[test]
fn sites_that_do_not_add_up_to_the_step_say_how_much_they_account_for() {
    let text = step_with_one_site(1024, 10);
    assert!(
        text.contains(
            "call sites account for +24 B in +3 blocks of this; the other +1000 B in +7 \
             blocks changed while the snapshots were read"
        ),
        "{text}"
    );
}

#[test]
fn reports_end_without_a_line_break_whatever_they_hold() {
    let empty = Snapshot::zero().since(&Snapshot::zero()).to_string();
    assert!(!empty.is_empty() && !empty.ends_with('\n'), "{empty:?}");
    let timeline = Timeline::new(vec![Snapshot::zero(), Snapshot::zero()]).to_string();
    assert!(!timeline.ends_with('\n'), "{timeline:?}");
    assert_eq!(timeline.lines().count(), 4, "{timeline:?}");
}

/// Checkpoints 0 to 5 of one run whose live bytes rise by 100 at each step, with `sites` as
/// every checkpoint's sites (a site whose live bytes stay the same) and `sampled_mean`.
fn rising_checkpoints(sites: bool, sampled_mean: Option<u64>) -> Timeline {
    let checkpoints = (0..6u32)
        .map(|epoch| {
            let mut s = Snapshot::zero();
            s.epoch = epoch;
            s.checkpoint = true;
            s.totals.live_bytes = 1000 + 100 * u64::from(epoch);
            s.sampled_mean = sampled_mean;
            if sites {
                s.sites = SiteList::new(vec![SiteCount::live(1, 3)]);
            }
            s
        })
        .collect();
    Timeline::new(checkpoints)
}

fn growing_line(t: &Timeline) -> String {
    t.to_string().lines().next().unwrap_or_default().to_string()
}

#[test]
fn no_growing_site_with_sites_off_says_that_none_was_recorded() {
    let line = growing_line(&rising_checkpoints(false, None));
    assert!(
        line.contains("rose in each of the last 5 steps (+500 B in all)"),
        "{line}"
    );
    assert!(line.contains("call sites off"), "{line}");
}

#[test]
fn no_growing_site_under_sparse_sampling_says_to_sample_more_often() {
    let line = growing_line(&rising_checkpoints(true, Some(512 * 1024)));
    assert!(line.contains("no sampled call site grew"), "{line}");
    assert!(line.contains("sample more often"), "{line}");
}

#[test]
fn no_growing_site_when_nothing_was_sampled_blames_the_sampling_not_sites_off() {
    let line = growing_line(&rising_checkpoints(false, Some(1 << 30)));
    assert!(line.contains("no sampled call site grew"), "{line}");
    assert!(!line.contains("call sites off"), "{line}");
}

#[test]
fn a_sampled_window_whose_sites_held_steady_does_not_say_none_was_sampled() {
    let t = rising_checkpoints(true, Some(4096));
    let (before, mut after) = (t.checkpoints[0].clone(), t.checkpoints[1].clone());
    // One more sampled block allocated and freed at the site: no change in live bytes.
    let mut churned = SiteCount::live(1, 3);
    churned.counts.alloc_blocks += crate::stats::UNIT;
    churned.counts.alloc_bytes += 8;
    churned.counts.free_blocks += crate::stats::UNIT;
    churned.counts.free_bytes += 8;
    after.sites = SiteList::new(vec![churned]);
    let step = after.since(&before).to_string();
    assert!(!step.contains("no call site sampled"), "{step}");
    assert!(
        step.contains("   no sampled call site's live bytes changed in this window (about one sample per 4.0 KiB)"),
        "{step}"
    );
}

#[test]
fn no_growing_site_while_the_total_held_steady_is_none() {
    let mut t = rising_checkpoints(true, None);
    t.checkpoints[5].totals.live_bytes = 1000;
    assert_eq!(growing_line(&t), "growing at every step: none");
}

#[test]
fn a_timeline_of_fewer_than_three_checkpoints_says_it_cannot_tell_what_grows() {
    let mut t = rising_checkpoints(true, None);
    t.checkpoints.truncate(2);
    assert_eq!(
        growing_line(&t),
        "growing at every step: too few checkpoints to tell (2; it compares the steps between \
         checkpoints, and takes three)"
    );
}

#[test]
fn too_few_checkpoints_after_dropped_ones_says_they_were_not_kept() {
    let mut t = rising_checkpoints(true, None);
    // The first and the last two kept, as `keep=3` does: epochs 1 to 4 dropped.
    let last = t.checkpoints.len() - 2;
    t.checkpoints.drain(1..last);
    assert_eq!(
        growing_line(&t),
        format!(
            "growing at every step: too few checkpoints to tell (2; it compares the steps \
             between checkpoints, and takes three; {} checkpoints before them not kept \
             (keep_checkpoints or HEAPDELTA=keep=), and no step is compared across them)",
            last - 1
        )
    );
}

/// Checkpoints `step 0`, `step 1`, … of one run with one site, `leak`, holding `live[i]` blocks
/// of 8 bytes at checkpoint `i`.
fn one_site_holding(live: &[u64]) -> Timeline {
    let points: Vec<(u64, bool)> = live.iter().map(|&blocks| (blocks, false)).collect();
    leak_timeline(&points)
}

/// Checkpoints of one run with one site, `leak`, holding `blocks` blocks of 8 bytes at each
/// `(blocks, by_clock)`: the program's labelled `step i`, the clock's `i.0s`.
fn leak_timeline(points: &[(u64, bool)]) -> Timeline {
    let leak = Site::new(vec![crate::callsite::Frame {
        function: "leak".to_string(),
        file: Some("src/main.rs".to_string()),
        line: Some(7),
    }]);
    let checkpoints = (0..)
        .zip(points)
        .map(|(epoch, &(blocks, by_clock))| {
            let mut s = Snapshot::zero();
            s.epoch = epoch;
            s.checkpoint = true;
            s.by_clock = by_clock;
            s.label = Some(match by_clock {
                true => format!("{epoch}.0s"),
                false => format!("step {epoch}"),
            });
            s.totals.live_bytes = 8 * blocks;
            s.sites = SiteList::new(vec![SiteCount {
                site: Some(leak.clone()),
                ..SiteCount::live(1, blocks)
            }]);
            s
        })
        .collect();
    Timeline::new(checkpoints)
}

/// Six checkpoints of sites of `function` in `src/main.rs`, one per `(line, blocks at each
/// checkpoint)` of 8-byte blocks; the live total is theirs plus `other` bytes at each.
fn timeline_of(function: &str, sites: &[(u32, [u64; 6])], other: [u64; 6]) -> Timeline {
    let checkpoints = (0..6u32)
        .map(|epoch| {
            let at = epoch as usize;
            let mut s = Snapshot::zero();
            s.epoch = epoch;
            s.checkpoint = true;
            s.totals.live_bytes = other[at] + sites.iter().map(|(_, b)| 8 * b[at]).sum::<u64>();
            let counts = sites.iter().map(|&(line, blocks)| SiteCount {
                site: Some(Site::new(vec![crate::callsite::Frame {
                    function: function.to_string(),
                    file: Some("src/main.rs".to_string()),
                    line: Some(line),
                }])),
                ..SiteCount::live(line, blocks[at])
            });
            s.sites = SiteList::new(counts.collect());
            s
        })
        .collect();
    Timeline::new(checkpoints)
}

#[test]
fn a_leaks_tables_grown_in_some_steps_are_listed_under_the_sites_grown_at_every_one() {
    // A user trial's interner: its strings grew at every step, its map by doubling.
    let strings = [0, 10, 20, 30, 40, 50];
    let map = [0, 0, 100, 100, 300, 300];
    let text = timeline_of("intern", &[(63, strings), (68, map)], [0; 6]).to_string();
    let lines: Vec<&str> = text.lines().take(4).collect();
    assert_eq!(
        lines,
        [
            "growing at every step (last 5 steps):",
            "        +400 B over 5 steps  intern (src/main.rs:63)  [(unknown)]",
            "   these hold +400 B of the +2.7 KiB the live total rose in those steps; grown in \
             some of them:",
            "      +2.3 KiB in 2 of 5 steps  intern (src/main.rs:68)  [(unknown)]",
        ],
        "{text}"
    );
}

#[test]
fn a_site_grown_by_a_tenth_of_the_rise_in_some_steps_is_listed_under_those_grown_at_every_one() {
    // A user trial's sessions: their histories grew at every step, the map of them by
    // doubling, 11% of the rise.
    let history = [0, 200, 400, 600, 800, 1000];
    let map = [0, 0, 0, 0, 120, 120];
    let text = timeline_of("record", &[(107, history), (105, map)], [0; 6]).to_string();
    let lines: Vec<&str> = text.lines().take(4).collect();
    assert!(
        lines[2].starts_with("   these hold +7.8 KiB of the +8.8 KiB"),
        "{text}"
    );
    assert!(
        lines[3].contains("in 1 of 5 steps  record (src/main.rs:105)"),
        "{text}"
    );
}

#[test]
fn with_no_site_grown_at_every_step_the_sites_grown_most_are_listed() {
    // A user trial's sampled run: its leak had no sample at one step, and no site was named.
    let memo = [0, 10, 20, 20, 30, 40];
    let table = [0, 0, 0, 16, 16, 16];
    let text = timeline_of("memoize", &[(122, memo), (127, table)], [0; 6]).to_string();
    let lines: Vec<&str> = text.lines().take(4).collect();
    assert!(
        lines[0].contains("no single call site grew at every step"),
        "{text}"
    );
    assert_eq!(
        lines[1..],
        [
            "   grown most in some of those 5 steps, of the +448 B the live total rose:",
            "        +320 B in 4 of 5 steps  memoize (src/main.rs:122)  [(unknown)]",
            "        +128 B in 1 of 5 steps  memoize (src/main.rs:127)  [(unknown)]",
        ],
        "{text}"
    );
}

#[test]
fn a_window_whose_live_total_fell_lists_nothing_grown_in_some_steps() {
    // A review: a leak, and a 1 MiB buffer freed in the window, read "-1018.6 KiB the live
    // total rose".
    let leak = [0, 10, 20, 30, 40, 50];
    let grown = [0, 0, 0, 50, 50, 50];
    let freed = [1 << 20, 1 << 20, 1 << 20, 0, 0, 0];
    let text = timeline_of("run", &[(7, leak), (9, grown)], freed).to_string();
    assert!(
        text.starts_with("growing at every step (last 5 steps):\n"),
        "{text}"
    );
    assert!(!text.contains("these hold"), "{text}");
}

#[test]
fn a_site_table_of_allocations_without_sites_says_none_was_recorded() {
    // Four blocks allocated, in the classes and the totals, at no site (sites off).
    let mut after = Snapshot::zero();
    after.totals.total_blocks = 4;
    after.totals.total_bytes = 110;
    after.totals.live_blocks = 4;
    after.totals.live_bytes = 110;
    after.classes = vec![ClassCount {
        size: 32,
        counts: Counts {
            alloc_blocks: 4,
            alloc_bytes: 110,
            free_blocks: 0,
            free_bytes: 0,
        },
    }]
    .into();
    let d = after.since(&Snapshot::zero());
    let table = d.table(By::Site, 10);
    assert!(
        table.contains("no call site was recorded: call sites are off"),
        "{table}"
    );
    after.sampled_mean = Some(512 * 1024);
    let table = after.since(&Snapshot::zero()).table(By::Site, 10);
    assert!(
        table.contains("no call site was recorded: sampling picked none"),
        "{table}"
    );
}

#[test]
fn a_site_table_cut_to_no_rows_does_not_say_nothing_was_recorded() {
    let text = {
        let mut s = Snapshot::zero();
        s.classes = vec![ClassCount {
            size: 16,
            counts: Counts {
                alloc_blocks: 3,
                alloc_bytes: 24,
                free_blocks: 0,
                free_bytes: 0,
            },
        }]
        .into();
        let mut site = SiteCount::live(1, 3);
        site.counts.alloc_blocks = 3 * crate::stats::UNIT;
        s.sites = SiteList::new(vec![site]);
        s.since(&Snapshot::zero()).table(By::Site, 0)
    };
    assert!(!text.contains("no call site was recorded"), "{text}");
    assert!(!text.contains("nothing was counted"), "{text}");
}

#[test]
fn a_step_that_starts_at_a_tick_of_the_clock_names_the_tick() {
    let t = leak_timeline(&[(1, false), (2, true), (3, false), (4, false)]);
    let after_tick = t.between("1.0s", "step 2").unwrap();
    assert!(
        after_tick.summary().starts_with("| 1.0s \u{2192} step 2 |"),
        "{}",
        after_tick.summary()
    );
    let plain = t.between("step 2", "step 3").unwrap();
    assert!(
        plain.summary().starts_with("| step 3 |"),
        "{}",
        plain.summary()
    );
}

/// The first line of the timeline text, and the second, of `leak_timeline(points)`.
fn growing_lines(points: &[(u64, bool)]) -> (String, String) {
    let text = leak_timeline(points).to_string();
    let mut lines = text.lines().map(str::to_string);
    (
        lines.next().unwrap_or_default(),
        lines.next().unwrap_or_default(),
    )
}

#[test]
fn a_leak_checkpointed_by_the_program_and_the_clock_is_found_at_one_kinds_steps() {
    // A user trial: a program checkpointing its batches, run with `HEAPDELTA=every=1`; each
    // clock checkpoint fell right after one of the program's, in a step where nothing grew.
    // The last checkpoint is the clock's, and each of its steps spans a batch.
    let mut points = Vec::new();
    for batch in 0..7 {
        points.push((10 * batch, false));
        points.push((10 * batch, true));
    }
    assert_eq!(
        growing_lines(&points),
        (
            "growing at every step (last 5 steps, between the clock's checkpoints (every=)):"
                .to_string(),
            "        +400 B over 5 steps  leak (src/main.rs:7)  [(unknown)]".to_string()
        )
    );
    points.push((70, false));
    assert_eq!(
        growing_lines(&points).0,
        "growing at every step (last 5 steps, between the program's checkpoints):"
    );
}

#[test]
fn a_leak_in_a_phase_the_clock_checkpointed_after_one_the_program_did_is_found() {
    // A review: eight checkpoints of the program's on a flat heap, then seven of the clock's
    // while the program leaked; following the kind that took more missed the leak.
    let mut points: Vec<(u64, bool)> = (0..8).map(|_| (5, false)).collect();
    points.extend((1..=7).map(|s| (5 + 10 * s, true)));
    let (first, second) = growing_lines(&points);
    assert_eq!(
        first,
        "growing at every step (last 5 steps, between the clock's checkpoints (every=)):"
    );
    assert!(second.contains("+400 B over 5 steps  leak"), "{second}");
}

#[test]
fn a_last_checkpoint_of_a_kind_too_few_for_two_steps_leaves_the_steps_to_the_other() {
    // A program's `done` after a run of the clock's checkpoints.
    let mut points: Vec<(u64, bool)> = (0..8).map(|s| (10 * s, true)).collect();
    points.push((80, false));
    assert_eq!(
        growing_lines(&points).0,
        "growing at every step (last 5 steps, between the clock's checkpoints (every=)):"
    );
}

#[test]
fn a_few_ticks_of_the_clock_among_many_of_the_programs_checkpoints_leave_the_steps_to_the_program()
{
    // A user trial's file, rewritten while the program ran (`rewrite=on`), ends at a tick: three
    // ticks so far, each after six of the program's checkpoints.
    let mut points = Vec::new();
    for step in 0..18 {
        points.push((10 * step, false));
        if step % 6 == 5 {
            points.push((10 * step, true));
        }
    }
    assert_eq!(
        growing_lines(&points).0,
        "growing at every step (last 5 steps, between the program's checkpoints):"
    );
}

#[test]
fn a_few_ticks_of_the_clock_after_the_programs_phase_keep_the_steps_to_the_clock() {
    // As in the phase case above, with the clock's phase still short: the program took none of
    // its checkpoints between the latest ticks.
    let mut points: Vec<(u64, bool)> = (0..8).map(|_| (5, false)).collect();
    points.extend((1..=4).map(|s| (5 + 10 * s, true)));
    assert_eq!(
        growing_lines(&points).0,
        "growing at every step (last 3 steps, between the clock's checkpoints (every=)):"
    );
}

#[test]
fn a_programs_done_between_the_last_ticks_of_a_leaking_phase_keeps_the_steps_to_the_clock() {
    // A review: eight of the program's checkpoints on a flat heap, then ticks while it leaked,
    // its `done` between the last two.
    let mut points: Vec<(u64, bool)> = (0..8).map(|_| (5, false)).collect();
    points.extend([
        (15, true),
        (25, true),
        (35, true),
        (45, true),
        (50, false),
        (55, true),
    ]);
    let (first, second) = growing_lines(&points);
    assert_eq!(
        first,
        "growing at every step (last 4 steps, between the clock's checkpoints (every=)):"
    );
    assert!(second.contains("leak"), "{second}");
}

#[test]
fn ticks_inside_each_of_a_few_batches_keep_the_steps_to_the_program() {
    // A review: four batches, each ended by the program's checkpoint, with four ticks inside
    // each while the heap held still; the batches leaked.
    let mut points = Vec::new();
    for batch in 0..4 {
        points.extend((0..4).map(|_| (10 * batch, true)));
        points.push((10 * (batch + 1), false));
    }
    let (first, second) = growing_lines(&points);
    assert_eq!(
        first,
        "growing at every step (last 3 steps, between the program's checkpoints):"
    );
    assert!(second.contains("leak"), "{second}");
}

#[test]
fn a_leak_the_clocks_steps_miss_is_named_from_the_programs_checkpoints() {
    // A user trial's file: the program leaked at each of its checkpoints, the clock's ticks
    // rose four times and then held after the loop, and the detector, following the clock, said
    // only `none`.
    let mut points = vec![(0, true)];
    let mut blocks = 0;
    for _ in 0..4 {
        for _ in 0..10 {
            blocks += 1;
            points.push((blocks, false));
        }
        points.push((blocks, true));
    }
    points.extend([(blocks, true), (blocks, true)]);
    let text = leak_timeline(&points).to_string();
    let lines: Vec<&str> = text.lines().take(3).collect();
    assert_eq!(
        lines,
        [
            "growing at every step, between the clock's checkpoints (every=): none",
            "growing at every step between the program's checkpoints (last 5 steps, up to \
             \"step 43\"; still held at the last checkpoint):",
            "         +40 B over 5 steps  leak (src/main.rs:7)  [(unknown)]",
        ],
        "{text}"
    );
}

#[test]
fn a_programs_few_start_up_checkpoints_are_not_named_as_growth_the_clocks_steps_miss() {
    // A review: a service checkpointed its start-up (start, loaded, ready), then left a steady
    // run to the clock.
    let mut points = vec![(10, false), (20, false), (30, false)];
    points.extend((0..20).map(|_| (30, true)));
    let (first, second) = growing_lines(&points);
    assert_eq!(
        first,
        "growing at every step, between the clock's checkpoints (every=): none"
    );
    assert_eq!(second, "", "nothing more is named");
}

#[test]
fn growth_between_the_programs_checkpoints_freed_since_is_not_named() {
    // A review: the program's checkpoints rose, then all of it was freed under the clock's.
    let mut points: Vec<(u64, bool)> = (1..=10).map(|b| (b, false)).collect();
    points.extend((0..10).map(|_| (0, true)));
    let (_, second) = growing_lines(&points);
    assert_eq!(second, "", "nothing more is named");
}

#[test]
fn no_growth_between_one_kinds_checkpoints_names_the_kind() {
    let mut points: Vec<(u64, bool)> = (0..4).map(|_| (5, false)).collect();
    points.extend((0..4).map(|_| (5, true)));
    assert_eq!(
        growing_lines(&points).0,
        "growing at every step, between the clock's checkpoints (every=): none"
    );
}

#[test]
fn sites_that_grew_up_to_a_fall_at_the_end_are_listed_with_where_it_began() {
    // The last checkpoint taken while the program freed on its way out (a user trial,
    // `HEAPDELTA=every=`: "growing at every step: none" under a leak of 45 MiB).
    let text = one_site_holding(&[0, 10, 20, 30, 40, 50, 5]).to_string();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("growing at every step to the last checkpoint: none")
    );
    assert_eq!(
        lines.next(),
        Some(
            "growing at every step up to \"step 5\" (last 5 steps to it; live bytes fell in \
             the 1 step after it):"
        )
    );
    assert_eq!(
        lines.next(),
        Some("        +400 B over 5 steps  leak (src/main.rs:7)  [(unknown)]")
    );
}

#[test]
fn sites_that_grew_up_to_a_quiet_end_are_listed_with_where_it_began() {
    // An operator trial: a service's file read after its traffic stopped named no site.
    let text = one_site_holding(&[0, 10, 20, 30, 40, 50, 50, 50]).to_string();
    let lines: Vec<&str> = text.lines().take(3).collect();
    assert_eq!(
        lines,
        [
            "growing at every step to the last checkpoint: none",
            "growing at every step up to \"step 5\" (last 5 steps to it; live bytes held in \
             the 2 steps after it):",
            "        +400 B over 5 steps  leak (src/main.rs:7)  [(unknown)]",
        ],
        "{text}"
    );
}

#[test]
fn a_warm_up_then_a_steady_run_lists_nothing() {
    let text = one_site_holding(&[0, 10, 20, 30, 30, 30, 30, 30]).to_string();
    assert!(text.starts_with("growing at every step: none\n"), "{text}");
}

#[test]
fn a_fall_at_the_end_after_no_steady_growth_lists_nothing() {
    let text = one_site_holding(&[0, 10, 20, 15, 40, 50, 5]).to_string();
    assert!(!text.contains("up to"), "{text}");
}

#[test]
fn a_site_that_fell_in_a_middle_step_is_not_listed() {
    let text = one_site_holding(&[0, 10, 20, 15, 40, 50, 60]).to_string();
    assert!(
        text.starts_with("growing at every step: none\n\n"),
        "{text}"
    );
}

#[test]
fn a_sampled_step_without_sites_says_none_was_sampled() {
    let t = rising_checkpoints(false, Some(4096));
    let step = t.checkpoints[1].since(&t.checkpoints[0]).to_string();
    assert!(
        step.contains("no call site sampled in this window (about one sample per 4.0 KiB)"),
        "{step}"
    );
}

#[test]
fn control_characters_in_a_name_are_escaped() {
    assert_eq!(
        OneLine("step\n2\u{1b}[31m").to_string(),
        "step\\n2\\u{1b}[31m"
    );
    assert_eq!(OneLine("plain étape").to_string(), "plain étape");
}

#[test]
fn line_separators_in_a_name_are_escaped() {
    assert_eq!(
        OneLine("a\u{2028}b\u{2029}c").to_string(),
        "a\\u{2028}b\\u{2029}c"
    );
}

#[test]
fn one_thing_is_named_in_the_singular() {
    assert_eq!(count(1, "block"), "1 block");
    assert_eq!(count(0, "block"), "0 blocks");
    assert_eq!(count(1024, "arena"), "1,024 arenas");
}

#[test]
fn thousands_are_separated_with_commas() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(6219), "6,219");
    assert_eq!(thousands(1_234_567), "1,234,567");
}

#[test]
fn bytes_use_binary_units() {
    assert_eq!(bytes(512), "512 B");
    assert_eq!(bytes(1536), "1.5 KiB");
    assert_eq!(bytes(112 * 1024 * 1024 + 400 * 1024), "112.4 MiB");
    assert_eq!(bytes(1_267_000_000), "1.18 GiB");
    assert_eq!(bytes(1_048_575), "1.0 MiB");
    assert_eq!(bytes(1_048_524), "1023.9 KiB");
    assert_eq!(signed_bytes(-2048), "-2.0 KiB");
}
