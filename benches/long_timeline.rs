//! What a long run's timeline file costs to read and to look at: 5,000 call sites over 2,000
//! checkpoints, each checkpoint listing only the ten sites that changed in its step, as
//! `HEAPDELTA=report=` writes such a run (about 2 MB). Reading it, the growth detector over all
//! its steps (`growing_in(1, usize::MAX)`), and its plot: each should cost what changed in the
//! file, not its checkpoints times its sites.

use criterion::{criterion_group, criterion_main, Criterion};
use std::fmt::Write;
use std::hint::black_box;

const SITES: u64 = 5_000;
const CHECKPOINTS: u64 = 2_000;
const CHANGED_PER_STEP: u64 = 10;
/// Blocks count in units of this in a file (see `stats::UNIT`).
const UNIT: u64 = 65_536;

/// A site's counters: `blocks` blocks of 16 bytes allocated, none freed.
fn site(id: u64, blocks: u64) -> String {
    format!(
        r#"{{"id":{id},"alloc_blocks":{},"alloc_bytes":{},"free_blocks":0,"free_bytes":0,"young_free":[0,0]}}"#,
        blocks * UNIT,
        blocks * 16
    )
}

/// The timeline file: at checkpoint `i`, sites `10 i` to `10 i + 9` (modulo their number) have
/// allocated one more block.
fn long_timeline() -> String {
    let mut blocks = vec![1u64; SITES as usize];
    let mut out = String::from(r#"{"heapdelta_format":5,"kind":"timeline","frames":["#);
    for i in 0..SITES {
        let comma = if i > 0 { "," } else { "" };
        write!(
            out,
            r#"{comma}{{"function":"f{i}","file":"src/main.rs","line":{i}}}"#
        )
        .unwrap();
    }
    out.push_str(r#"],"sites":["#);
    for i in 0..SITES {
        let comma = if i > 0 { "," } else { "" };
        write!(out, r#"{comma}{{"id":{},"frames":[{i}]}}"#, i + 1).unwrap();
    }
    out.push_str(r#"],"checkpoints":["#);
    let totals = format!(
        r#"{{"live_bytes":{0},"live_blocks":{1},"peak_bytes":{0},"peak_blocks":{1},"total_bytes":{0},"total_blocks":{1}}}"#,
        16 * SITES,
        SITES
    );
    for i in 0..CHECKPOINTS {
        let (classes, sites) = if i == 0 {
            let all: Vec<String> = (0..SITES)
                .map(|k| site(k + 1, blocks[k as usize]))
                .collect();
            (
                format!(
                    r#"[{{"size":16,"alloc_blocks":{SITES},"alloc_bytes":{},"free_blocks":0,"free_bytes":0}}]"#,
                    16 * SITES
                ),
                format!("[{}]", all.join(",")),
            )
        } else {
            let changed: Vec<String> = (0..CHANGED_PER_STEP)
                .map(|k| (i * CHANGED_PER_STEP + k) % SITES)
                .map(|k| {
                    blocks[k as usize] += 1;
                    site(k + 1, blocks[k as usize])
                })
                .collect();
            (
                r#"{"changed":[]}"#.to_string(),
                format!(r#"{{"changed":[{}]}}"#, changed.join(",")),
            )
        };
        let comma = if i > 0 { "," } else { "" };
        write!(
            out,
            r#"{comma}{{"label":"c{i}","epoch":{i},"checkpoint":true,"run":7,"seconds":{i}.0,"unix_nanos":{i},"program":"p","pid":1,"totals":{totals},"young_free":[0,0],"classes":{classes},"tags":[],"sites":{sites},"pool":null}}"#
        )
        .unwrap();
    }
    out.push_str("]}");
    out
}

fn benches(c: &mut Criterion) {
    let file = long_timeline();
    let timeline = heapdelta::Timeline::read_json_from(file.as_bytes()).expect("a valid file");
    let mut group = c.benchmark_group("long timeline (5,000 sites, 2,000 checkpoints)");
    group.sample_size(10);
    group.bench_function("read", |b| {
        b.iter(|| black_box(heapdelta::Timeline::read_json_from(file.as_bytes()).unwrap()))
    });
    group.bench_function("growing_in over every step", |b| {
        b.iter(|| black_box(timeline.growing_in(1, usize::MAX)))
    });
    let plot = std::env::temp_dir().join(format!("heapdelta-bench-{}.svg", std::process::id()));
    group.bench_function("plot", |b| {
        b.iter(|| timeline.write_plot(&plot).expect("the plot is written"))
    });
    let _ = std::fs::remove_file(&plot);
    group.finish();
}

criterion_group!(long_timelines, benches);
criterion_main!(long_timelines);
