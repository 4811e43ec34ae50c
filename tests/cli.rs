//! The `heapdelta` command on the demo files: each subcommand does its job, and a bad file or
//! bad arguments give one line on stderr and a non-zero exit code.
#![cfg(feature = "cli")]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn heapdelta<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = Command::new(env!("CARGO_BIN_EXE_heapdelta"))
        .args(args)
        .output()
        .expect("the heapdelta binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Writes the demo files into a fresh directory: `step1.json` and `step4.json` (snapshots) and
/// `timeline.json`.
fn demo(test: &str) -> common::TempDir {
    let dir = common::temp_dir(test);
    std::fs::write(dir.join("step1.json"), common::snapshot_file_at(1)).unwrap();
    std::fs::write(dir.join("step4.json"), common::snapshot_file()).unwrap();
    std::fs::write(dir.join("timeline.json"), common::timeline_file()).unwrap();
    dir
}

/// `heapdelta flamegraph TIMELINE -o OUT --from FROM --to TO`.
fn flamegraph_between(timeline: &Path, out: &Path, from: &str, to: &str) -> Run {
    heapdelta([
        "flamegraph",
        arg(timeline),
        "-o",
        arg(out),
        "--from",
        from,
        "--to",
        to,
    ])
}

/// The output of `heapdelta diff dir/a dir/b`, which must succeed.
fn diff_ok(dir: &Path, a: &str, b: &str) -> String {
    let run = heapdelta(["diff", arg(&dir.join(a)), arg(&dir.join(b))]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

fn assert_one_line_failure(run: &Run, code: i32, needle: &str) {
    assert_eq!(run.code, code, "stderr: {}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{:?}", run.stderr);
    assert!(run.stderr.starts_with("heapdelta: "), "{}", run.stderr);
    assert!(
        run.stderr.contains(needle),
        "{:?} lacks {needle:?}",
        run.stderr
    );
}

#[test]
fn show_prints_a_snapshots_totals_and_top_sites() {
    let dir = demo("show_snapshot");
    let run = heapdelta(["show", arg(&dir.join("step4.json"))]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let first = run.stdout.lines().next().unwrap();
    assert!(
        first.starts_with("| step 4 | live 132.5 KiB | blocks 113 |"),
        "{first}"
    );
    let top_site = run.stdout.lines().nth(2).unwrap();
    assert!(top_site.contains("128.0 KiB"), "{top_site}");
    assert!(
        top_site.contains("service::cache::Cache::insert"),
        "{top_site}"
    );
}

/// A snapshot file in `dir` holding two sites of 8 EiB each (a coverage-guided fuzz run), each within the
/// reader's bounds; the second names its frame `b`, the first the same frame or none.
fn two_huge_sites(dir: &Path, same_frames: bool) -> PathBuf {
    let site = |id: u32, frames: &str| {
        format!(
            r#"{{"id":{id},"alloc_blocks":65536,"alloc_bytes":9223372036854775807,"free_blocks":0,"free_bytes":0,"young_free":[0,0]{frames}}}"#
        )
    };
    let frames = r#","site":{"frames":[{"function":"b"}]}"#;
    let file = format!(
        r#"{{"heapdelta_format":1,"kind":"snapshot","snapshot":{{"run":1,"seconds":0,"epoch":0,"checkpoint":true,"young_free":[0,0],"tags":[],"totals":{{"live_bytes":0,"live_blocks":0,"peak_bytes":0,"peak_blocks":0,"total_bytes":0,"total_blocks":0}},"classes":[],"sites":[{},{}]}}}}"#,
        site(1, if same_frames { frames } else { "" }),
        site(2, frames)
    );
    let path = dir.join("huge.json");
    std::fs::write(&path, file).unwrap();
    path
}

#[test]
fn show_top_adds_up_the_sites_it_cuts_without_overflow() {
    // Their sum wrapped to a negative number, shown as 0 B, and overflowed in a debug build.
    let dir = common::temp_dir("show_top_overflow");
    let path = two_huge_sites(&dir, false);
    let run = heapdelta(["show", "--top", "0", arg(&path)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let last = run.stdout.lines().last().unwrap();
    assert_eq!(
        last.trim(),
        "(and 2 more sites holding 8.00 EiB)",
        "{}",
        run.stdout
    );
}

#[test]
fn show_adds_up_the_entries_of_one_site_without_overflow() {
    // Merged into one site, their live bytes wrapped to a fall and the site was not listed.
    let dir = common::temp_dir("show_merge_overflow");
    let path = two_huge_sites(&dir, true);
    let run = heapdelta(["show", arg(&path)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("8.00 EiB") && l.contains(" b")),
        "{}",
        run.stdout
    );
}

/// `heapdelta show`'s output for the snapshot `file` (see `common::snapshot`), written to a
/// directory of its own, `name`.
fn show_of(name: &str, file: serde_json::Value) -> String {
    let dir = common::temp_dir(name);
    let path = dir.join("snapshot.json");
    std::fs::write(&path, common::snapshot_file_of(file)).unwrap();
    let run = heapdelta(["show", arg(&path)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

#[test]
fn show_says_why_a_snapshot_without_call_sites_lists_none() {
    let mut file = common::snapshot(4);
    file["sites"] = serde_json::json!([]);
    let out = show_of("show_no_sites", file);
    assert!(
        out.contains("no call site was recorded (the run had HEAPDELTA=sites=off"),
        "{out}"
    );
}

#[test]
fn show_says_when_sampling_picked_none_of_a_snapshots_live_blocks() {
    let mut file = common::snapshot(4);
    file["sampled_mean"] = (512 * 1024).into();
    for site in file["sites"].as_array_mut().unwrap() {
        site["free_blocks"] = site["alloc_blocks"].clone();
        site["free_bytes"] = site["alloc_bytes"].clone();
    }
    let out = show_of("show_sampled_none_live", file);
    assert!(
        out.contains(
            "no sampled call site holds live bytes: sampling, about once per 512.0 KiB, picked \
             none of the live blocks"
        ),
        "{out}"
    );
}

#[test]
fn show_top_counts_the_snapshots_sites_it_cuts() {
    let dir = demo("show_snapshot_top");
    let run = heapdelta(["show", arg(&dir.join("step4.json")), "--top", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let last = run.stdout.lines().last().unwrap();
    assert_eq!(
        last.trim(),
        "(and 2 more sites holding 4.5 KiB)",
        "{}",
        run.stdout
    );
}

#[test]
fn show_top_limits_a_timelines_growing_sites() {
    let dir = demo("show_timeline_top");
    let run = heapdelta(["show", arg(&dir.join("timeline.json")), "--top", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let growing: Vec<&str> = run.stdout.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(growing.len(), 3, "{}", run.stdout);
    assert!(
        growing[1].contains("+128.0 KiB over 4 steps"),
        "{}",
        run.stdout
    );
    assert_eq!(growing[2], "   … and 1 more site", "{}", run.stdout);
}

#[test]
fn show_prints_a_timeline_line_per_checkpoint_and_the_growing_sites() {
    let dir = demo("show_timeline");
    let run = heapdelta(["show", arg(&dir.join("timeline.json"))]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("growing at every step (last 4 steps):"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("+128.0 KiB over 4 steps"),
        "{}",
        run.stdout
    );
    for step in ["| start |", "| step 1 |", "| step 4 |"] {
        assert!(
            run.stdout.contains(step),
            "{step} missing in {}",
            run.stdout
        );
    }
}

#[test]
fn diff_by_site_lists_the_largest_growth_first() {
    let dir = demo("diff_site");
    let out = diff_ok(&dir, "step1.json", "step4.json");
    let lines: Vec<&str> = out.lines().collect();
    // Three steps: the line names where the window starts.
    assert!(
        lines[0].starts_with("| step 1 \u{2192} step 4 |"),
        "{}",
        lines[0]
    );
    assert!(lines[1].ends_with("site"), "{}", lines[1]);
    assert!(
        lines[2].contains("+96.0 KiB") && lines[2].contains("Cache::insert"),
        "{}",
        lines[2]
    );
    assert!(
        lines[3].contains("+1.9 KiB") && lines[3].contains("Log::push"),
        "{}",
        lines[3]
    );
}

#[test]
fn diff_between_two_checkpoints_of_a_timeline_is_the_diff_of_their_snapshots() {
    let dir = demo("diff_window");
    let timeline = dir.join("timeline.json");
    let run = heapdelta(["diff", arg(&timeline), "--from", "step 1", "--to", "step 4"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, diff_ok(&dir, "step1.json", "step4.json"));
}

#[test]
fn either_end_of_a_window_left_out_is_the_timelines_first_or_last_checkpoint() {
    // A user trial's `--from` alone was a usage error.
    let dir = demo("diff_one_end");
    let timeline = dir.join("timeline.json");
    let diff = |args: &[&str]| {
        let mut all = vec!["diff", arg(&timeline)];
        all.extend(args);
        let run = heapdelta(all);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
    };
    assert_eq!(
        diff(&["--from", "step 2"]),
        diff(&["--from", "step 2", "--to", "step 4"])
    );
    assert_eq!(
        diff(&["--to", "step 3"]),
        diff(&["--from", "start", "--to", "step 3"])
    );
}

#[test]
fn diff_takes_either_new_or_a_window_but_not_both() {
    let dir = demo("diff_new_or_window");
    let (old, new) = (dir.join("timeline.json"), dir.join("step4.json"));
    let both = heapdelta([
        "diff",
        arg(&old),
        arg(&new),
        "--from",
        "step 1",
        "--to",
        "step 4",
    ]);
    assert_one_line_failure(&both, 2, "cannot be used with");
}

#[test]
fn diff_of_a_timeline_alone_is_the_growth_from_its_first_checkpoint_to_its_last() {
    let dir = demo("diff_whole_timeline");
    let timeline = dir.join("timeline.json");
    let whole = heapdelta(["diff", arg(&timeline)]);
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    let window = heapdelta(["diff", arg(&timeline), "--from", "start", "--to", "step 4"]);
    assert_eq!(whole.stdout, window.stdout);
    assert!(
        whole.stdout.starts_with("| start → step 4 |"),
        "{}",
        whole.stdout
    );
}

#[test]
fn diff_of_a_snapshot_alone_asks_for_a_second_file() {
    let dir = demo("diff_snapshot_alone");
    let run = heapdelta(["diff", arg(&dir.join("step4.json"))]);
    assert_one_line_failure(&run, 1, "give a second file to compare it with");
}

#[test]
fn checkpoints_sharing_a_label_are_picked_by_their_number() {
    let dir = common::temp_dir("diff_shared_label");
    let checkpoints = (0..=4)
        .map(|steps| {
            let mut c = common::snapshot(steps);
            c["label"] = "tick".into();
            c
        })
        .collect();
    let timeline = dir.join("ticks.json");
    std::fs::write(&timeline, common::timeline_file_of(checkpoints)).unwrap();
    let window =
        |from: &str, to: &str| heapdelta(["diff", arg(&timeline), "--from", from, "--to", to]);
    let ambiguous = window("tick", "tick#5");
    assert_one_line_failure(&ambiguous, 1, "pick one as \"tick#1\" to \"tick#5\"");
    let picked = window("tick#2", "tick#5");
    assert_eq!(picked.code, 0, "{}", picked.stderr);
    assert!(picked.stdout.contains("+96.0 KiB"), "{}", picked.stdout);
    // One past the count says how many share the label.
    assert_one_line_failure(
        &window("tick#2", "tick#6"),
        1,
        "5 checkpoints are labelled \"tick\"",
    );
}

#[test]
fn diff_groups_by_class_tag_and_type() {
    let dir = demo("diff_by");
    let (old, new) = (dir.join("step1.json"), dir.join("step4.json"));
    for (by, first_row) in [("class", "4 KiB"), ("tag", "cache"), ("type", "Vec<u8>")] {
        let run = heapdelta(["diff", arg(&old), arg(&new), "--by", by]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let row = run.stdout.lines().nth(2).unwrap_or_default();
        assert!(
            row.contains("+96.0 KiB") && row.ends_with(first_row),
            "--by {by}: {row}"
        );
    }
}

#[test]
fn diff_of_a_later_snapshot_given_first_shows_the_fall_in_live_bytes() {
    let dir = demo("diff_reversed");
    let out = diff_ok(&dir, "step4.json", "step1.json");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("| step 1 | live 34.6 KiB | added -97.9 KiB | blocks 29 (-84) |"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("compared with step 4: not a window of one run"),
        "{}",
        lines[1]
    );
    let insert = lines.iter().find(|l| l.contains("Cache::insert")).unwrap();
    assert!(insert.contains("-96.0 KiB"), "{insert}");
    assert!(
        insert.contains(" ?  "),
        "allocations between the two are unknown: {insert}"
    );
}

#[test]
fn diff_of_snapshots_from_two_runs_compares_what_was_live() {
    let dir = common::temp_dir("diff_two_runs");
    // The earlier run ran longer: its running counts are above the later run's.
    for (name, steps, run) in [("long.json", 4, 1), ("short.json", 1, 2)] {
        let mut snapshot = common::snapshot(steps);
        snapshot["run"] = run.into();
        std::fs::write(dir.join(name), common::snapshot_file_of(snapshot)).unwrap();
    }
    let out = diff_ok(&dir, "long.json", "short.json");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].contains("| added -97.9 KiB |"), "{}", lines[0]);
    assert!(lines[1].starts_with("compared with step 4"), "{}", lines[1]);
    let log = lines.iter().find(|l| l.contains("Log::push")).unwrap();
    assert!(log.contains("-1.9 KiB") && log.contains("-60"), "{log}");
}

/// Writes the last demo snapshot with control characters in its top site's function and type
/// names, as a damaged or hostile file may have them, into `dir/ctrl.json`.
fn snapshot_with_control_characters(dir: &Path) -> PathBuf {
    let mut snapshot = common::snapshot(4);
    let site = &mut snapshot["sites"][0]["site"];
    site["frames"][0]["function"] = "f\u{1b}[31m;x\ny".into();
    site["type_name"] = "Vec<u8>\u{1b}[2J\nfake line".into();
    let path = dir.join("ctrl.json");
    std::fs::write(&path, common::snapshot_file_of(snapshot)).unwrap();
    path
}

#[test]
fn show_lists_call_paths_to_one_frame_as_one_site() {
    let dir = common::temp_dir("show_leaf");
    let mut snapshot = common::snapshot(4);
    // The top site's 32 blocks of 4 KiB, split between two paths to its frame.
    let mut other = common::split_top_site(&mut snapshot);
    other["id"] = 99.into();
    other["site"]["frames"][1]["function"] = "service::warm_up".into();
    snapshot["sites"].as_array_mut().unwrap().push(other);
    let path = dir.join("two_paths.json");
    std::fs::write(&path, common::snapshot_file_of(snapshot)).unwrap();
    let run = heapdelta(["show", arg(&path)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("Cache::insert"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    assert!(lines[0].contains("128.0 KiB"), "{}", run.stdout);
}

#[test]
fn show_escapes_control_characters_from_the_file() {
    let dir = common::temp_dir("show_control");
    let run = heapdelta(["show", arg(&snapshot_with_control_characters(&dir))]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains('\u{1b}'), "{}", run.stdout);
    assert!(
        run.stdout.contains("[Vec<u8>\\u{1b}[2J\\nfake line]"),
        "{}",
        run.stdout
    );
}

#[test]
fn folded_stacks_hold_no_control_characters_from_the_file() {
    let dir = common::temp_dir("folded_control");
    let out = dir.join("live.folded");
    let ctrl = snapshot_with_control_characters(&dir);
    let run = heapdelta(["flamegraph", arg(&ctrl), "--folded", "-o", arg(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let folded = std::fs::read_to_string(&out).unwrap();
    assert!(
        !folded.contains(|c: char| c.is_control() && c != '\n'),
        "{folded:?}"
    );
}

/// The demo timeline followed by the snapshot `HEAPDELTA=report=` adds at exit: not a
/// checkpoint, taken once the program has freed everything.
fn timeline_with_exit_snapshot(dir: &Path) -> PathBuf {
    let mut exit = common::snapshot(4);
    exit["label"] = "exit".into();
    exit["checkpoint"] = false.into();
    exit["seconds"] = 10.0.into();
    exit["totals"]["live_bytes"] = 0.into();
    exit["totals"]["live_blocks"] = 0.into();
    for group in ["sites", "classes", "tags"] {
        for c in exit[group].as_array_mut().unwrap() {
            c["free_blocks"] = c["alloc_blocks"].clone();
            c["free_bytes"] = c["alloc_bytes"].clone();
        }
    }
    let mut checkpoints: Vec<serde_json::Value> = (0..=4).map(common::snapshot).collect();
    checkpoints.push(exit);
    let path = dir.join("report.json");
    std::fs::write(&path, common::timeline_file_of(checkpoints)).unwrap();
    path
}

#[test]
fn an_exit_snapshot_does_not_hide_the_sites_that_grew_at_every_step() {
    let dir = common::temp_dir("exit_snapshot");
    let run = heapdelta(["show", arg(&timeline_with_exit_snapshot(&dir))]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("growing at every step (last 4 steps):"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("| exit | live 0 B |"), "{}", run.stdout);
}

#[test]
fn a_flamegraph_of_a_timeline_with_an_exit_snapshot_draws_its_last_checkpoint() {
    let dir = common::temp_dir("exit_flamegraph");
    let out = dir.join("live.folded");
    let report = timeline_with_exit_snapshot(&dir);
    let run = heapdelta(["flamegraph", arg(&report), "--folded", "-o", arg(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let folded = std::fs::read_to_string(&out).unwrap();
    assert!(
        folded.contains("Cache::insert;src/cache.rs:42;[Vec<u8>] 131072"),
        "{folded}"
    );
}

#[test]
fn show_and_diff_say_when_site_figures_are_sampled_estimates() {
    const NOTE: &str = "call sites sampled about once per 512.0 KiB: their figures are estimates";
    let dir = common::temp_dir("sampled_note");
    for (name, steps) in [("step1.json", 1), ("step4.json", 4)] {
        let mut file = common::snapshot(steps);
        file["sampled_mean"] = (512 * 1024).into();
        std::fs::write(dir.join(name), common::snapshot_file_of(file)).unwrap();
    }
    let (old, new) = (dir.join("step1.json"), dir.join("step4.json"));
    let show = heapdelta(["show", arg(&new)]);
    assert!(show.stdout.contains(NOTE), "{}", show.stdout);
    for (by, noted) in [
        ("site", true),
        ("type", true),
        ("class", false),
        ("tag", false),
    ] {
        let run = heapdelta(["diff", arg(&old), arg(&new), "--by", by]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(
            run.stdout.contains(NOTE),
            noted,
            "--by {by}: {}",
            run.stdout
        );
    }
    let checkpoints: Vec<serde_json::Value> = (0..=4)
        .map(|steps| {
            let mut c = common::snapshot(steps);
            c["sampled_mean"] = (512 * 1024).into();
            c
        })
        .collect();
    std::fs::write(
        dir.join("timeline.json"),
        common::timeline_file_of(checkpoints),
    )
    .unwrap();
    let show = heapdelta(["show", arg(&dir.join("timeline.json"))]);
    assert_eq!(
        show.stdout.lines().nth(1),
        Some(&*format!("   {NOTE}")),
        "{}",
        show.stdout
    );
    let exact_dir = demo("sampled_note_exact");
    let svg = dir.join("live.svg");
    let drawn = heapdelta(["flamegraph", arg(&new), "-o", arg(&svg)]);
    assert_eq!(drawn.code, 0, "{}", drawn.stderr);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.contains("(estimated: call sites sampled"),
        "no mark in the title"
    );
    // One side sampled is enough for the difference to be an estimate.
    let mixed = heapdelta(["diff", arg(&old), arg(&exact_dir.join("step4.json"))]);
    assert!(mixed.stdout.contains(NOTE), "{}", mixed.stdout);
    for file in ["step4.json", "timeline.json"] {
        let exact = heapdelta(["show", arg(&exact_dir.join(file))]);
        assert!(!exact.stdout.contains("estimates"), "{}", exact.stdout);
    }
}

#[test]
fn exports_of_sampled_figures_say_so_beside_the_exact_totals() {
    const NOTE: &str = "call sites sampled about once per 512.0 KiB: their figures are estimates; \
                        exact: 132.5 KiB live in 113 blocks, 152.5 KiB allocated in 953 blocks";
    let dir = common::temp_dir("sampled_exports");
    let mut file = common::snapshot(4);
    file["sampled_mean"] = (512 * 1024).into();
    let input = dir.join("step4.json");
    std::fs::write(&input, common::snapshot_file_of(file)).unwrap();
    let (dhat, pprof) = (dir.join("out.dhat.json"), dir.join("out.pb.gz"));
    for (format, out) in [("dhat", &dhat), ("pprof", &pprof)] {
        let run = heapdelta(["export", "--format", format, arg(&input), "-o", arg(out)]);
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let dhat = std::fs::read_to_string(&dhat).unwrap();
    assert!(dhat.contains(NOTE), "{dhat}");
    let mut profile = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::GzDecoder::new(&std::fs::read(&pprof).unwrap()[..]),
        &mut profile,
    )
    .unwrap();
    let profile = String::from_utf8_lossy(&profile);
    assert!(profile.contains(NOTE), "no note in the profile's strings");
}

#[test]
fn diff_top_limits_the_rows() {
    let dir = demo("diff_top");
    let run = heapdelta([
        "diff",
        arg(&dir.join("step1.json")),
        arg(&dir.join("step4.json")),
        "--top",
        "1",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The summary, the header and one row; then the count of the other sites that changed, and
    // the note on those that did not.
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", run.stdout);
    assert_eq!(
        lines[3].trim(),
        "(and 1 more site that changed)",
        "{}",
        run.stdout
    );
    assert!(lines[4].contains("alike: no change"), "{}", run.stdout);
}

#[test]
fn flamegraph_draws_live_bytes_of_a_snapshot() {
    let dir = demo("flamegraph_live");
    let out = dir.join("live.svg");
    let run = heapdelta(["flamegraph", arg(&dir.join("step4.json")), "-o", arg(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("<svg") && svg.contains("service::cache::Cache::insert"));
}

#[test]
fn flamegraph_draws_the_growth_between_two_checkpoints() {
    let dir = demo("flamegraph_growth");
    let out = dir.join("growth.svg");
    let timeline = dir.join("timeline.json");
    let run = flamegraph_between(&timeline, &out, "step 1", "step 4");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("Heap growth"), "the title names the window");
    assert!(
        !svg.contains("config::load"),
        "the configuration did not grow"
    );
}

#[test]
fn flamegraph_folded_writes_stacks_outermost_first() {
    let dir = demo("flamegraph_folded");
    let out = dir.join("live.folded");
    let run = heapdelta([
        "flamegraph",
        arg(&dir.join("step4.json")),
        "-o",
        arg(&out),
        "--folded",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let folded = std::fs::read_to_string(&out).unwrap();
    assert!(folded.contains(
        "service::main;service::handle_request;service::cache::Cache::insert;src/cache.rs:42;\
         [Vec<u8>] 131072\n"
    ));
}

#[test]
fn folded_stacks_of_a_window_without_growth_are_an_error_not_an_empty_file() {
    let dir = common::temp_dir("folded_empty");
    // A step in which nothing changed: `step 1` again, one checkpoint later.
    let mut again = common::snapshot(1);
    again["label"] = serde_json::json!("step 1 again");
    again["epoch"] = serde_json::json!(2);
    again["seconds"] = serde_json::json!(1.25);
    let timeline = dir.join("timeline.json");
    std::fs::write(
        &timeline,
        common::timeline_file_of(vec![common::snapshot(0), common::snapshot(1), again]),
    )
    .unwrap();
    let out = dir.join("none.folded");
    let run = heapdelta([
        "flamegraph",
        arg(&timeline),
        "--from",
        "step 1",
        "--to",
        "step 1 again",
        "--folded",
        "-o",
        arg(&out),
    ]);
    assert_one_line_failure(&run, 1, "nothing to write");
    assert!(!out.exists());
}

#[test]
fn a_window_from_a_checkpoint_to_itself_is_refused() {
    let dir = demo("window_to_itself");
    let out = dir.join("none.svg");
    let run = flamegraph_between(&dir.join("timeline.json"), &out, "step 1", "step 1");
    assert_one_line_failure(&run, 1, "holds no step");
    assert!(!out.exists());
}

#[test]
fn plot_draws_a_timeline() {
    let dir = demo("plot");
    let out = dir.join("timeline.svg");
    let run = heapdelta(["plot", arg(&dir.join("timeline.json")), "-o", arg(&out)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("<svg") && svg.contains("step 4") && svg.contains("peak"));
}

#[test]
fn an_output_that_cannot_be_written_is_named_once() {
    let dir = demo("unwritable");
    let out = dir.join("no-such-dir").join("out.pb.gz");
    let input = dir.join("step4.json");
    let run = heapdelta(["export", "--format", "pprof", arg(&input), "-o", arg(&out)]);
    assert_one_line_failure(&run, 1, "No such file");
    // The library's error names the file already; the command does not say it again.
    assert_eq!(run.stderr.matches("out.pb.gz").count(), 1, "{}", run.stderr);
}

#[test]
fn export_writes_pprof_and_dhat() {
    let dir = demo("export");
    let (pprof, dhat) = (dir.join("out.pb.gz"), dir.join("out.dhat.json"));
    let input = dir.join("step4.json");
    let run = heapdelta([
        "export",
        "--format",
        "pprof",
        arg(&input),
        "-o",
        arg(&pprof),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(&std::fs::read(&pprof).unwrap()[..2], &[0x1f, 0x8b], "gzip");
    let run = heapdelta(["export", "--format", "dhat", arg(&input), "-o", arg(&dhat)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(std::fs::read_to_string(&dhat)
        .unwrap()
        .contains("\"dhatFileVersion\":2"));
}

#[test]
fn export_of_a_window_writes_its_growth() {
    let dir = demo("export_window");
    let dhat = dir.join("growth.dhat.json");
    let timeline = dir.join("timeline.json");
    let run = heapdelta([
        "export",
        "--format",
        "dhat",
        arg(&timeline),
        "-o",
        arg(&dhat),
        "--from",
        "step 3",
        "--to",
        "step 4",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(std::fs::read_to_string(&dhat)
        .unwrap()
        .contains("heapdelta growth"));
}

/// Writes the demo snapshot without its call sites (a run with sites off) to `dir/no_sites.json`.
fn snapshot_without_call_sites(dir: &Path) -> PathBuf {
    let mut file: serde_json::Value = serde_json::from_str(&common::snapshot_file()).unwrap();
    file["snapshot"]["sites"] = serde_json::json!([]);
    let input = dir.join("no_sites.json");
    std::fs::write(&input, file.to_string()).unwrap();
    input
}

#[test]
fn export_of_a_snapshot_without_call_sites_fails_with_one_line() {
    let dir = demo("export_no_sites");
    let input = snapshot_without_call_sites(&dir);
    for format in ["pprof", "dhat"] {
        let out = dir.join(format!("out.{format}"));
        let run = heapdelta(["export", "--format", format, arg(&input), "-o", arg(&out)]);
        assert_one_line_failure(&run, 1, "sites=off or CallSites::Off");
        assert!(!out.exists());
    }
}

#[test]
fn a_flamegraph_of_a_snapshot_without_call_sites_names_the_file_read_and_why() {
    let dir = demo("flamegraph_no_sites");
    let input = snapshot_without_call_sites(&dir);
    let out = dir.join("out.svg");
    for folded in [&[][..], &["--folded"]] {
        let mut args = vec!["flamegraph", arg(&input), "-o", arg(&out)];
        args.extend_from_slice(folded);
        let run = heapdelta(args);
        assert_one_line_failure(&run, 1, "sites=off or CallSites::Off");
        assert!(run.stderr.contains("no_sites.json"), "{}", run.stderr);
        assert!(!out.exists());
    }
}

#[test]
fn a_truncated_file_fails_with_one_line_naming_it() {
    let dir = demo("bad_truncated");
    let bad = dir.join("cut.json");
    std::fs::write(&bad, &common::snapshot_file()[..100]).unwrap();
    for sub in [
        vec!["show", arg(&bad)],
        vec!["diff", arg(&bad), arg(&bad)],
        vec!["flamegraph", arg(&bad), "-o", "x.svg"],
        vec!["plot", arg(&bad), "-o", "x.svg"],
        vec!["export", "--format", "pprof", arg(&bad), "-o", "x.pb.gz"],
    ] {
        let run = heapdelta(&sub);
        assert_one_line_failure(&run, 1, "truncated");
        assert!(run.stderr.contains("cut.json"), "{sub:?}: {}", run.stderr);
    }
}

#[test]
fn a_missing_file_fails_with_one_line() {
    let run = heapdelta(["show", "no/such/heapdelta.json"]);
    assert_one_line_failure(&run, 1, "no/such/heapdelta.json");
}

#[test]
fn a_newer_file_asks_for_an_upgrade() {
    let dir = demo("bad_version");
    let newer = dir.join("newer.json");
    std::fs::write(&newer, r#"{"heapdelta_format": 6, "kind": "snapshot"}"#).unwrap();
    assert_one_line_failure(&heapdelta(["show", arg(&newer)]), 1, "upgrade heapdelta");
}

#[test]
fn plot_of_a_snapshot_file_says_it_needs_a_timeline() {
    let dir = demo("bad_plot");
    let run = heapdelta([
        "plot",
        arg(&dir.join("step4.json")),
        "-o",
        arg(&dir.join("x.svg")),
    ]);
    assert_one_line_failure(&run, 1, "needs a timeline");
}

#[test]
fn plot_of_a_timeline_without_checkpoints_names_the_file_it_read() {
    let dir = demo("empty_plot");
    let empty = dir.join("empty.json");
    std::fs::write(&empty, common::timeline_file_of(Vec::new())).unwrap();
    let out = dir.join("x.svg");
    let run = heapdelta(["plot", arg(&empty), "-o", arg(&out)]);
    assert_one_line_failure(&run, 1, "nothing to plot");
    let named = format!("heapdelta: {}: nothing to plot", empty.display());
    assert!(run.stderr.starts_with(&named), "{}", run.stderr);
    assert!(!out.exists());
}

#[test]
fn an_unknown_checkpoint_label_lists_the_known_ones() {
    let dir = demo("bad_label");
    let timeline = dir.join("timeline.json");
    let out = dir.join("x.svg");
    let run = flamegraph_between(&timeline, &out, "step 1", "step 9");
    assert_one_line_failure(&run, 1, r#"known labels: "start", "step 1""#);
}

#[test]
fn a_label_several_checkpoints_share_is_an_error_not_a_guess() {
    let dir = demo("shared_label");
    let timeline = dir.join("timeline.json");
    let text = std::fs::read_to_string(&timeline)
        .unwrap()
        .replace(r#""label":"step 2""#, r#""label":"step 1""#);
    std::fs::write(&timeline, text).unwrap();
    let out = dir.join("x.svg");
    let run = flamegraph_between(&timeline, &out, "start", "step 1");
    assert_one_line_failure(&run, 1, "2 checkpoints are labelled \"step 1\"");
}

#[test]
fn bad_arguments_are_a_usage_error() {
    assert_one_line_failure(&heapdelta(["frobnicate"]), 2, "frobnicate");
    assert_one_line_failure(
        &heapdelta(["diff", "x.json", "y.json", "--to", "a"]),
        2,
        "cannot be used with",
    );
    assert_one_line_failure(
        &heapdelta(["export", "--format", "svg", "a.json", "-o", "b"]),
        2,
        "svg",
    );
}

#[test]
fn help_succeeds_and_lists_the_subcommands() {
    let run = heapdelta(["--help"]);
    assert_eq!(run.code, 0);
    for sub in ["show", "diff", "flamegraph", "plot", "export"] {
        assert!(run.stdout.contains(sub), "{sub} missing in {}", run.stdout);
    }
}

#[test]
fn output_that_cannot_be_written_fails_with_one_line() {
    let dir = demo("output_that_cannot_be_written");
    let full = std::fs::File::create("/dev/full").expect("/dev/full exists on Linux");
    let out = Command::new(env!("CARGO_BIN_EXE_heapdelta"))
        .args(["show", arg(&dir.join("timeline.json"))])
        .stdout(full)
        .output()
        .expect("the heapdelta binary runs");
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::new(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_one_line_failure(&run, 1, "writing to standard output");
}

#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    let dir = demo("a_reader_that_stops_early");
    let mut child = Command::new(env!("CARGO_BIN_EXE_heapdelta"))
        .args(["show", arg(&dir.join("timeline.json"))])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the heapdelta binary runs");
    // Close the reading end before the command writes, as `| head` does once it has enough.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("the command ends");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn an_output_of_dash_is_refused_rather_than_written_as_a_file_named_dash() {
    let dir = demo("output_dash");
    let run = heapdelta(["plot", arg(&dir.join("timeline.json")), "-o", "-"]);
    assert_one_line_failure(&run, 2, "this SVG is written to a file only");
    assert!(!Path::new("-").exists());
}

/// `export --format FORMAT` of the demo's last snapshot to standard output (a pipe) and to a
/// file: both outputs' bytes.
fn export_to_dash_and_to_a_file(test: &str, format: &str) -> (Vec<u8>, Vec<u8>) {
    let dir = demo(test);
    let snapshot = dir.join("step4.json");
    let to_file = dir.join("export.out");
    let run = heapdelta([
        "export",
        "--format",
        format,
        arg(&snapshot),
        "-o",
        arg(&to_file),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = Command::new(env!("CARGO_BIN_EXE_heapdelta"))
        .args(["export", "--format", format, arg(&snapshot), "-o", "-"])
        .output()
        .expect("the heapdelta binary runs");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(!Path::new("-").exists());
    (out.stdout, std::fs::read(&to_file).unwrap())
}

#[test]
fn a_dhat_export_to_dash_goes_to_standard_output() {
    let (piped, file) = export_to_dash_and_to_a_file("dhat_stdout", "dhat");
    assert!(!piped.is_empty());
    assert_eq!(piped, file);
}

#[test]
fn a_pprof_export_to_dash_goes_to_standard_output_when_it_is_not_a_terminal() {
    let (piped, file) = export_to_dash_and_to_a_file("pprof_stdout", "pprof");
    // A gzip stream, as in the file.
    assert_eq!(piped.get(..2), Some(&[0x1f, 0x8b][..]));
    assert_eq!(piped, file);
}

#[test]
fn folded_stacks_to_dash_go_to_standard_output() {
    let dir = demo("folded_stdout");
    let to_file = dir.join("stacks.folded");
    let snapshot = dir.join("step4.json");
    let run = heapdelta([
        "flamegraph",
        arg(&snapshot),
        "--folded",
        "-o",
        arg(&to_file),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = heapdelta(["flamegraph", arg(&snapshot), "--folded", "-o", "-"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, std::fs::read_to_string(&to_file).unwrap());
    assert!(!Path::new("-").exists());
}

/// Exports the demo's last snapshot as DHAT to the output `name_output` gives for it (in the
/// test's directory), which is the snapshot itself: the export is refused and the snapshot kept.
fn export_onto_the_snapshot_is_refused(test: &str, name_output: impl Fn(&Path) -> PathBuf) {
    let dir = demo(test);
    let snapshot = dir.join("step4.json");
    let before = std::fs::read(&snapshot).unwrap();
    let output = name_output(&snapshot);
    let run = heapdelta([
        "export",
        "--format",
        "dhat",
        arg(&snapshot),
        "-o",
        arg(&output),
    ]);
    assert_one_line_failure(&run, 2, "that is the file read");
    assert_eq!(std::fs::read(&snapshot).unwrap(), before);
}

#[test]
fn an_output_that_is_the_file_read_is_refused_and_the_file_kept() {
    // Spelled differently from the input, as the same file.
    export_onto_the_snapshot_is_refused("output_is_input", |snapshot| {
        snapshot.parent().unwrap().join(".").join("step4.json")
    });
}

#[test]
fn an_output_that_is_a_hard_link_to_the_file_read_is_refused() {
    export_onto_the_snapshot_is_refused("output_is_linked_input", |snapshot| {
        let link = snapshot.with_file_name("linked.json");
        std::fs::hard_link(snapshot, &link).unwrap();
        link
    });
}

#[test]
fn a_path_with_a_line_break_is_named_on_one_line() {
    let dir = demo("path_line_break");
    let run = heapdelta(["show", arg(&dir.join("no\nsuch.json"))]);
    assert_one_line_failure(&run, 1, "no\\nsuch.json");
}

#[test]
fn an_output_path_need_not_be_utf8() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let dir = demo("output_not_utf8");
    let out = dir.join(OsStr::from_bytes(b"plot-\xff.svg"));
    let timeline = dir.join("timeline.json");
    let run = heapdelta([
        OsStr::new("plot"),
        timeline.as_os_str(),
        OsStr::new("-o"),
        out.as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(out.exists());
}

#[test]
fn run_without_arguments_it_lists_its_commands() {
    let run = heapdelta(std::iter::empty::<&str>());
    assert_eq!(run.code, 2);
    for command in ["show", "diff", "flamegraph", "export"] {
        assert!(run.stderr.contains(command), "{}", run.stderr);
    }
}

#[test]
fn a_diff_of_two_unlabelled_snapshot_files_is_headed_by_their_names() {
    let dir = common::temp_dir("diff_unlabelled");
    let unlabelled = |steps: u64| {
        let text = common::snapshot_file_at(steps);
        let labelled = format!("\"label\":\"step {steps}\"");
        assert!(text.contains(&labelled), "{text}");
        text.replace(&labelled, "\"label\":null")
    };
    let (old, new) = (dir.join("before.json"), dir.join("after.json"));
    std::fs::write(&old, unlabelled(1)).unwrap();
    std::fs::write(&new, unlabelled(4)).unwrap();
    let run = heapdelta(["diff", arg(&old), arg(&new)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("| before.json \u{2192} after.json |"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_diff_of_two_unlabelled_files_of_one_name_is_headed_by_their_paths() {
    let dir = common::temp_dir("diff_one_name");
    let unlabelled = |steps: u64| {
        let text = common::snapshot_file_at(steps);
        text.replace(&format!("\"label\":\"step {steps}\""), "\"label\":null")
    };
    let (old, new) = (dir.join("a/snapshot.json"), dir.join("b/snapshot.json"));
    for (path, steps) in [(&old, 1), (&new, 4)] {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, unlabelled(steps)).unwrap();
    }
    let run = heapdelta(["diff", arg(&old), arg(&new)]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let head = format!("| {} \u{2192} {} |", old.display(), new.display());
    assert!(run.stdout.starts_with(&head), "{}", run.stdout);
}
