//! heapdelta's JSON files: what is written reads back equal, and every kind of bad file is a
//! clear `Error`, never a panic.

mod common;

use heapdelta::{Error, Snapshot, Timeline};

fn demo_snapshot() -> Snapshot {
    Snapshot::read_json_from(common::snapshot_file().as_bytes()).expect("the demo snapshot reads")
}

fn demo_timeline() -> Timeline {
    Timeline::read_json_from(common::timeline_file().as_bytes()).expect("the demo timeline reads")
}

fn format_error(text: &str) -> String {
    match Snapshot::read_json_from(text.as_bytes()) {
        Err(Error::Format(msg)) => msg,
        other => panic!("expected a format error for {text:?}, got {other:?}"),
    }
}

#[test]
fn snapshot_round_trips_equal() {
    let s = demo_snapshot();
    let mut out = Vec::new();
    s.write_json_to(&mut out).unwrap();
    assert_eq!(Snapshot::read_json_from(&out[..]).unwrap(), s);
}

#[test]
fn a_snapshot_file_keeps_the_program_that_took_it() {
    let exe = std::env::current_exe().unwrap();
    let s = heapdelta::snapshot();
    let mut out = Vec::new();
    s.write_json_to(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let quoted = serde_json::to_string(exe.to_str().unwrap()).unwrap();
    assert!(text.contains(&format!("\"program\":{quoted}")), "{text}");
    assert_eq!(Snapshot::read_json_from(text.as_bytes()).unwrap(), s);
}

#[test]
fn snapshot_round_trips_through_a_file() {
    let dir = common::temp_dir("snapshot_file");
    let path = dir.join("s.json");
    let s = demo_snapshot();
    s.write_json(&path).unwrap();
    assert_eq!(Snapshot::read_json(&path).unwrap(), s);
}

#[test]
fn timeline_round_trips_equal() {
    let t = demo_timeline();
    let mut out = Vec::new();
    t.write_json_to(&mut out).unwrap();
    assert_eq!(Timeline::read_json_from(&out[..]).unwrap(), t);
}

#[test]
fn a_timeline_file_gives_each_site_its_frames_once() {
    let t = demo_timeline();
    let mut out = Vec::new();
    t.write_json_to(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    // Five checkpoints name the cache's site; its frames are written once, in the site table.
    assert_eq!(common::timeline_file().matches("Cache::insert").count(), 5);
    assert_eq!(text.matches("Cache::insert").count(), 1, "{text}");
    assert!(text.contains(r#""heapdelta_format":5"#));
}

/// The demo timeline as this build writes it, parsed.
fn written_demo_timeline() -> serde_json::Value {
    let mut out = Vec::new();
    demo_timeline().write_json_to(&mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn a_timeline_file_gives_each_frame_once_to_the_sites_that_share_it() {
    // Four of the demo's five sites are called from `main` at line 20, the fifth at line 12.
    let text = written_demo_timeline().to_string();
    assert_eq!(
        text.matches(r#""function":"service::main""#).count(),
        2,
        "{text}"
    );
    let v = written_demo_timeline();
    let main_20 = v["frames"]
        .as_array()
        .unwrap()
        .iter()
        .position(|f| f["function"] == "service::main" && f["line"] == 20)
        .unwrap();
    let naming_it = v["sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["frames"].as_array().unwrap().contains(&main_20.into()))
        .count();
    assert_eq!(naming_it, 4);
}

#[test]
fn a_version_4_timeline_with_frames_in_its_site_table_still_reads() {
    let mut v = written_demo_timeline();
    let frames = v["frames"].as_array().unwrap().clone();
    let table: Vec<serde_json::Value> = (v["sites"].as_array().unwrap().iter())
        .map(|row| {
            let site_frames: Vec<serde_json::Value> = (row["frames"].as_array().unwrap().iter())
                .map(|place| frames[place.as_u64().unwrap() as usize].clone())
                .collect();
            serde_json::json!({
                "id": row["id"],
                "site": {"frames": site_frames, "type_name": row["type_name"]},
            })
        })
        .collect();
    v["sites"] = table.into();
    v.as_object_mut().unwrap().remove("frames");
    v["heapdelta_format"] = 4.into();
    let back = Timeline::read_json_from(v.to_string().as_bytes()).unwrap();
    assert_eq!(back, demo_timeline());
}

/// The format error reading the timeline `v` gives.
fn timeline_format_error(v: &serde_json::Value) -> String {
    match Timeline::read_json_from(v.to_string().as_bytes()) {
        Err(Error::Format(msg)) => msg,
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn a_site_naming_a_frame_the_frame_table_lacks_is_rejected() {
    let mut v = written_demo_timeline();
    v["sites"][0]["frames"][0] = 999.into();
    let msg = timeline_format_error(&v);
    assert!(msg.contains("names frame 999"), "{msg}");
}

#[test]
fn a_site_table_naming_one_long_frame_thousands_of_times_is_refused_before_it_is_read() {
    // A review: 115 KB of file took 491 MB to read, each site holding its own copy of its frames.
    let mut v = written_demo_timeline();
    v["frames"][0]["function"] = "f".repeat(100_000).into();
    v["sites"][0]["frames"] = serde_json::json!(vec![0; 5_000]);
    let msg = timeline_format_error(&v);
    assert!(msg.contains("name 477.2 MiB of frames"), "{msg}");
}

#[test]
fn a_site_of_a_version_5_table_without_frames_is_rejected() {
    let mut v = written_demo_timeline();
    v["sites"][0].as_object_mut().unwrap().remove("frames");
    let msg = timeline_format_error(&v);
    assert!(msg.contains("has no \"frames\""), "{msg}");
}

#[test]
fn a_version_1_timeline_with_frames_in_every_checkpoint_still_reads() {
    assert!(common::timeline_file().contains(r#""heapdelta_format":1"#));
    let d = demo_timeline().between("step 1", "step 4").unwrap();
    assert!(d
        .sites()
        .iter()
        .any(|s| s.site.to_string().contains("Cache::insert")));
}

#[test]
fn sites_of_two_runs_under_one_id_keep_their_own_frames() {
    let mut checkpoints: Vec<serde_json::Value> = (0..=1).map(common::snapshot).collect();
    checkpoints[1]["sites"][0]["site"]["frames"][0]["function"] = "other::run::site".into();
    let t = Timeline::read_json_from(common::timeline_file_of(checkpoints).as_bytes()).unwrap();
    let mut out = Vec::new();
    t.write_json_to(&mut out).unwrap();
    let back = Timeline::read_json_from(&out[..]).unwrap();
    assert_eq!(back, t);
    assert!(String::from_utf8(out).unwrap().contains("other::run::site"));
}

#[test]
fn a_site_table_listing_an_id_twice_is_rejected() {
    let site = serde_json::to_value(&common::snapshot(1)["sites"][0]["site"]).unwrap();
    let text = serde_json::json!({
        "heapdelta_format": 2,
        "kind": "timeline",
        "sites": [{"id": 1, "site": site}, {"id": 1, "site": site}],
        "checkpoints": [common::snapshot(1)],
    })
    .to_string();
    match Timeline::read_json_from(text.as_bytes()) {
        Err(Error::Format(msg)) => assert!(msg.contains("listed twice"), "{msg}"),
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn a_read_snapshot_keeps_label_totals_and_sites_with_frames() {
    let s = demo_snapshot();
    assert_eq!(s.label(), Some("step 4"));
    assert_eq!(s.totals().live_bytes, common::LAST_LIVE_BYTES);
    assert_eq!(s.totals().live_blocks, common::LAST_LIVE_BLOCKS);
    let growth = s.since(&Snapshot::read_json_from(common::snapshot_file().as_bytes()).unwrap());
    assert_eq!(growth.live_bytes(), 0);
    let t = demo_timeline();
    let d = t.between("start", "step 4").unwrap();
    let cache = &d.sites()[0];
    assert_eq!(
        cache.site.frames()[0].function,
        "service::cache::Cache::insert"
    );
    assert_eq!(cache.site.frames()[0].line, Some(42));
    assert_eq!(cache.site.type_name(), "Vec<u8>");
}

#[test]
fn a_step_that_shrank_lists_the_sites_that_fell_most() {
    let tl = demo_timeline();
    let cps = tl.checkpoints();
    // From "step 4" back to "step 1": everything the steps added falls away.
    let shrank = cps[0].since(&cps[3]);
    assert!(shrank.live_bytes() < 0);
    let text = shrank.to_string();
    let fell = format!("-{} blk  service::cache::Cache::insert", 3 * 8);
    let line = text.lines().find(|l| l.contains(&fell));
    let line = line.unwrap_or_else(|| panic!("no line for the site that fell most:\n{text}"));
    // A comparison knows no allocations: the average is that of the blocks lost.
    assert!(line.contains("~4.0 KiB per blk"), "{line}");
}

#[test]
fn a_delta_between_read_checkpoints_has_sites_classes_tags_and_types() {
    let d = demo_timeline().between("step 1", "step 4").unwrap();
    assert_eq!(d.live_bytes(), 3 * (8 * 4096 + 20 * 32));
    assert_eq!(d.sites()[0].live_bytes, 3 * 8 * 4096);
    assert_eq!(d.sites()[0].live_blocks, 3 * 8);
    assert_eq!(d.sites()[1].live_bytes, 3 * 20 * 32);
    assert_eq!(d.size_classes()[0].size, 4096);
    assert_eq!(d.tags()[0].tag, "cache");
    assert_eq!(d.types()[0].type_name, "Vec<u8>");
    assert_eq!(d.label(), Some("step 4"));
}

#[test]
fn an_empty_file_is_empty_not_truncated() {
    for text in ["", " \n"] {
        assert!(
            format_error(text).ends_with("the file is empty"),
            "{text:?}"
        );
    }
}

#[test]
fn a_cut_off_file_is_truncated() {
    let full = common::snapshot_file();
    let msg = format_error(&full[..full.len() / 2]);
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn a_gzipped_file_is_named_as_such() {
    let gzipped: &[u8] = &[0x1f, 0x8b, 8, 0];
    match Snapshot::read_json_from(gzipped) {
        Err(Error::Format(msg)) => assert!(msg.contains("gzip-compressed"), "{msg}"),
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn a_file_that_is_not_json_is_malformed() {
    assert!(format_error("heap: 12 MiB").contains("malformed JSON"));
}

/// Counts the bytes read through it.
struct Counted<R> {
    inner: R,
    read: usize,
}

impl<R: std::io::Read> std::io::Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n;
        Ok(n)
    }
}

#[test]
fn binary_input_is_malformed_from_its_first_bytes_without_reading_the_rest() {
    use std::io::Read;
    // As `/dev/zero`, which never ends; 16 MiB of it here.
    let mut zeros = Counted {
        inner: std::io::repeat(0).take(16 << 20),
        read: 0,
    };
    let msg = match Snapshot::read_json_from(&mut zeros) {
        Err(Error::Format(msg)) => msg,
        other => panic!("expected a format error, got {other:?}"),
    };
    assert!(msg.contains("malformed JSON"), "{msg}");
    assert!(zeros.read <= 1 << 16, "read {} bytes", zeros.read);
}

#[test]
fn json_without_the_version_field_is_not_a_heapdelta_file() {
    assert!(format_error(r#"{"label": "x"}"#).contains("heapdelta_format"));
    assert!(format_error("[1, 2]").contains("heapdelta_format"));
}

#[test]
fn a_newer_format_version_is_a_version_error() {
    let newer =
        common::snapshot_file().replace(r#""heapdelta_format":1"#, r#""heapdelta_format":6"#);
    match Snapshot::read_json_from(newer.as_bytes()) {
        Err(
            e @ Error::Version {
                found: 6,
                supported: 5,
            },
        ) => {
            assert!(e.to_string().contains("upgrade heapdelta"))
        }
        other => panic!("expected a version error, got {other:?}"),
    }
}

#[test]
fn a_newer_version_is_reported_even_when_the_contents_changed_shape() {
    let r = Snapshot::read_json_from(&br#"{"heapdelta_format": 7, "kind": "heap", "blob": 1}"#[..]);
    assert!(matches!(r, Err(Error::Version { found: 7, .. })));
}

#[test]
fn a_version_that_is_not_a_number_is_malformed() {
    assert!(
        format_error(r#"{"heapdelta_format": "1", "kind": "snapshot"}"#).contains("whole number")
    );
}

#[test]
fn a_field_of_the_wrong_type_names_the_problem() {
    let wrong = common::snapshot_file().replace(r#""epoch":4"#, r#""epoch":"four""#);
    let msg = format_error(&wrong);
    assert!(msg.contains("unexpected content"), "{msg}");
}

#[test]
fn a_negative_count_is_rejected() {
    let wrong = common::snapshot_file().replace(r#""live_bytes":135680"#, r#""live_bytes":-1"#);
    assert_ne!(wrong, common::snapshot_file(), "the replacement must hit");
    assert!(format_error(&wrong).contains("unexpected content"));
}

#[test]
fn a_missing_field_is_rejected() {
    let wrong = common::snapshot_file().replace(r#""totals":"#, r#""totalz":"#);
    assert!(format_error(&wrong).contains("totals"));
}

#[test]
fn a_timeline_file_is_not_read_as_a_snapshot() {
    let msg = format_error(&common::timeline_file());
    assert!(msg.contains("timeline"), "{msg}");
}

#[test]
fn a_snapshot_file_is_not_read_as_a_timeline() {
    let r = Timeline::read_json_from(common::snapshot_file().as_bytes());
    assert!(matches!(r, Err(Error::Format(msg)) if msg.contains("snapshot")));
}

#[test]
fn an_unknown_kind_is_rejected() {
    let msg = format_error(r#"{"heapdelta_format": 1, "kind": "histogram"}"#);
    assert!(msg.contains("histogram"), "{msg}");
}

#[test]
fn a_missing_file_is_an_io_error() {
    let dir = common::temp_dir("missing");
    let r = Snapshot::read_json(dir.join("nothing.json"));
    assert!(matches!(r, Err(Error::Io(_))));
}

#[test]
fn a_site_damaged_in_a_later_checkpoint_of_a_changes_only_timeline_is_refused() {
    // Sites a checkpoint shares with the one before are checked once; one that changed is
    // checked where it changed.
    let t = Timeline::read_json_from(common::timeline_file().as_bytes()).unwrap();
    let mut out = Vec::new();
    t.write_json_to(&mut out).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let last = v["checkpoints"].as_array_mut().unwrap().last_mut().unwrap();
    let changed = &mut last["sites"]["changed"][0];
    changed["free_blocks"] = changed["alloc_blocks"]
        .as_u64()
        .unwrap()
        .wrapping_add(1)
        .into();
    let e = Timeline::read_json_from(v.to_string().as_bytes()).unwrap_err();
    assert!(
        e.to_string()
            .contains("checkpoint 5 (\"step 4\"): inconsistent counters: site "),
        "{e}"
    );
}

#[test]
fn a_file_that_is_not_heapdeltas_is_named_in_the_error() {
    let dir = common::temp_dir("not_heapdeltas");
    let path = dir.join("Cargo.toml");
    std::fs::write(&path, "[package]\nname = \"x\"\n").unwrap();
    for msg in [
        Snapshot::read_json(&path).unwrap_err().to_string(),
        Timeline::read_json(&path).unwrap_err().to_string(),
    ] {
        assert!(
            msg.starts_with(&format!("not a valid heapdelta file: {}: ", path.display())),
            "{msg}"
        );
    }
}

#[test]
fn the_first_step_of_a_read_timeline_counts_its_allocations() {
    let t = demo_timeline();
    let first = &t.steps()[0];
    assert!(!first.is_comparison());
    let start = t.checkpoints()[0].totals();
    assert!(start.total_blocks > 0);
    assert_eq!(first.allocated_blocks(), start.total_blocks);
}

#[test]
fn a_directory_is_an_io_error() {
    let dir = common::temp_dir("directory");
    let r = Snapshot::read_json(&*dir);
    assert!(matches!(r, Err(Error::Io(_))), "{r:?}");
}

#[test]
fn extreme_counts_in_a_file_do_not_panic_when_diffed() {
    // The last checkpoint's cache (its 4 KiB class and its site) near the largest count a file
    // may hold, in 4 KiB blocks, the totals with it, and its epoch the largest.
    let extreme = (i64::MAX as u64 - (1 << 20)) / 4096 * 4096;
    let mut checkpoints: Vec<serde_json::Value> =
        (0..=common::STEPS).map(common::snapshot).collect();
    let last = checkpoints.last_mut().unwrap();
    let class = &mut last["classes"][2];
    assert_eq!(class["size"], 4096);
    let grown = extreme - class["alloc_bytes"].as_u64().unwrap();
    let more = grown / 4096;
    assert_eq!(grown % 4096, 0, "the class counts whole 4 KiB blocks");
    class["alloc_bytes"] = extreme.into();
    class["alloc_blocks"] = (class["alloc_blocks"].as_u64().unwrap() + more).into();
    last["sites"][0]["alloc_bytes"] = extreme.into();
    for field in ["total_bytes", "live_bytes", "peak_bytes"] {
        let t = &mut last["totals"][field];
        *t = (t.as_u64().unwrap() + grown).into();
    }
    for field in ["total_blocks", "live_blocks", "peak_blocks"] {
        let t = &mut last["totals"][field];
        *t = (t.as_u64().unwrap() + more).into();
    }
    last["epoch"] = u32::MAX.into();
    let wild = common::timeline_file_of(checkpoints);
    let t = Timeline::read_json_from(wild.as_bytes()).unwrap();
    for step in t.steps() {
        let _ = step.to_string();
        let _ = step.types().len();
    }
    let _ = t.growing();
    let _ = t.to_string();
}

/// The message of the format error `edit` makes of the snapshot file of the shared fixture.
fn error_after(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut snapshot = common::snapshot(common::STEPS);
    edit(&mut snapshot);
    format_error(&common::snapshot_file_of(snapshot))
}

#[test]
fn a_size_that_is_no_size_class_is_rejected() {
    for size in [0, 20, u64::MAX] {
        let msg = error_after(|s| s["classes"][0]["size"] = size.into());
        assert!(
            msg.contains(&format!("{size} B is not a size class")),
            "{msg}"
        );
    }
}

#[test]
fn time_before_the_start_is_rejected() {
    for seconds in [-5.0, -1e300] {
        let msg = error_after(|s| s["seconds"] = seconds.into());
        assert!(msg.contains("seconds since the start"), "{msg}");
    }
}

#[test]
fn every_committed_fixture_reads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports");
    let snapshot = Snapshot::read_json(dir.join("snapshot.json")).unwrap();
    let timeline = Timeline::read_json(dir.join("timeline.json")).unwrap();
    assert_eq!(
        timeline.checkpoints().last().map(|c| c.label()),
        Some(snapshot.label())
    );
}

/// The demo files committed for the README's pictures are the ones the tests use
/// (`HEAPDELTA_BLESS=1 cargo test --test report_json` rewrites them).
#[test]
fn committed_demo_files_match_the_generator() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reports");
    for (name, text) in [
        ("demo_snapshot.json", common::snapshot_file()),
        ("demo_step1.json", common::snapshot_file_at(1)),
        ("demo_timeline.json", common::timeline_file()),
    ] {
        let path = dir.join(name);
        if std::env::var_os("HEAPDELTA_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "{name} is stale: rerun with HEAPDELTA_BLESS=1"
        );
    }
}

/// The demo timeline with the cache's site reached by a second call path too (another caller,
/// the same first frame and type), growing as much.
fn timeline_with_two_paths_to_the_cache() -> Timeline {
    let checkpoints: Vec<serde_json::Value> = (0..=4)
        .map(|steps| {
            let mut s = common::snapshot(steps);
            let sites = s["sites"].as_array_mut().unwrap();
            let mut other = sites[0].clone();
            other["id"] = 99.into();
            other["site"]["frames"][1]["function"] = "service::warm_up".into();
            sites.push(other);
            s
        })
        .collect();
    Timeline::read_json_from(common::timeline_file_of(checkpoints).as_bytes())
        .expect("the timeline reads")
}

#[test]
fn call_paths_to_one_frame_grow_as_one_site() {
    let growing = timeline_with_two_paths_to_the_cache().growing();
    let cache: Vec<_> = growing
        .iter()
        .filter(|g| g.site.to_string().contains("Cache::insert"))
        .collect();
    assert_eq!(cache.len(), 1, "{growing:?}");
    assert_eq!(cache[0].live_bytes, 2 * 4 * 8 * 4096);
}

#[test]
fn a_steps_report_lists_call_paths_to_one_frame_as_one_line() {
    let steps = timeline_with_two_paths_to_the_cache().steps();
    let text = steps[4].to_string();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("Cache::insert"))
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("+64.0 KiB"), "{text}");
    let paths = steps[4]
        .sites()
        .iter()
        .filter(|s| s.site.to_string().contains("Cache::insert"))
        .count();
    assert_eq!(paths, 2, "the delta itself keeps both paths");
}

#[test]
fn sites_that_grew_alike_are_listed_by_name() {
    // A twin of the cache's site under a name that sorts first: same counts, so the same growth.
    let checkpoints: Vec<serde_json::Value> = (0..=common::STEPS)
        .map(|steps| {
            let mut c = common::snapshot(steps);
            let sites = c["sites"].as_array_mut().unwrap();
            let mut twin = sites[0].clone();
            twin["id"] = 99.into();
            let frame = heapdelta::Frame {
                function: "aaa::first".to_string(),
                file: Some("src/a.rs".to_string()),
                line: Some(1),
            };
            let site = heapdelta::Site::from_frames(vec![frame], Some("Vec<u8>".to_string()));
            twin["site"] = serde_json::to_value(site).unwrap();
            sites.push(twin);
            c
        })
        .collect();
    let timeline = Timeline::read_json_from(common::timeline_file_of(checkpoints).as_bytes())
        .expect("the timeline reads");
    let growing: Vec<String> = timeline
        .growing()
        .iter()
        .map(|g| g.site.to_string())
        .collect();
    let first = growing.iter().position(|s| s.starts_with("aaa::first"));
    let cache = growing.iter().position(|s| s.contains("Cache::insert"));
    assert!(first.is_some() && first < cache, "{growing:?}");
}

#[test]
fn the_types_line_counts_blocks_of_unknown_type() {
    // The log's site, its type not known.
    let checkpoints: Vec<serde_json::Value> = (0..=common::STEPS)
        .map(|steps| {
            let mut c = common::snapshot(steps);
            let log = common::sites()[1].site.frames().to_vec();
            let untyped = heapdelta::Site::from_frames(log, None);
            c["sites"][1]["site"] = serde_json::to_value(untyped).unwrap();
            c
        })
        .collect();
    let timeline = Timeline::read_json_from(common::timeline_file_of(checkpoints).as_bytes())
        .expect("the timeline reads");
    let text = timeline.between("step 1", "step 4").unwrap().to_string();
    let types = text.lines().find(|l| l.trim_start().starts_with("types:"));
    assert!(
        types.is_some_and(|l| l.contains("(unknown) +1.9 KiB (+60 blk)")),
        "{text}"
    );
}

/// The demo timeline with each checkpoint's sites (JSON) changed by `edit(steps, sites)`.
fn demo_timeline_with(edit: impl Fn(u64, &mut Vec<serde_json::Value>)) -> Timeline {
    let checkpoints: Vec<serde_json::Value> = (0..=common::STEPS)
        .map(|steps| {
            let mut c = common::snapshot(steps);
            edit(steps, c["sites"].as_array_mut().unwrap());
            c
        })
        .collect();
    Timeline::read_json_from(common::timeline_file_of(checkpoints).as_bytes())
        .expect("the timeline reads")
}

/// The demo timeline with `n` more sites like the cache's (other functions, growing as much).
fn timeline_with_more_cache_like_sites(n: usize) -> Timeline {
    demo_timeline_with(|_, sites| {
        for k in 0..n {
            let mut other = sites[0].clone();
            other["id"] = (100 + k).into();
            other["site"]["frames"][0]["function"] = format!("service::copy_{k}").into();
            sites.push(other);
        }
    })
}

#[test]
fn a_step_says_how_many_growing_sites_it_did_not_list() {
    let text = timeline_with_more_cache_like_sites(5)
        .between("step 1", "step 4")
        .unwrap()
        .to_string();
    // Seven sites grew (the cache's, its five copies, the log's); five are listed.
    assert_eq!(text.matches("  service::").count(), 5, "{text}");
    assert!(text.contains("… and 2 more sites that grew"), "{text}");
}

#[test]
fn the_types_line_shows_a_type_that_grew_by_reallocation_alone() {
    let d = demo_timeline_with(|steps, sites| {
        // The config's site: one block, reallocated to 1,000 bytes more at every step.
        let config = sites
            .iter_mut()
            .find(|s| s["site"]["frames"][0]["function"] == "service::config::load")
            .unwrap();
        let grown = 2048 + 1000 * steps;
        config["alloc_blocks"] = (65536 * (1 + steps)).into();
        config["free_blocks"] = (65536 * steps).into();
        config["alloc_bytes"] = (2048 * (1 + steps) + 1000 * steps * (steps + 1) / 2).into();
        config["free_bytes"] = (2048 * (1 + steps) + 1000 * steps * (steps + 1) / 2 - grown).into();
        config["young_free"] = serde_json::json!([0, 0]);
    })
    .between("step 3", "step 4")
    .unwrap();
    let types = d.to_string();
    let types = types.lines().find(|l| l.trim_start().starts_with("types:"));
    assert!(
        types.is_some_and(|l| l.contains("HashMap<String, String> +1000 B (+0 blk)")),
        "{}",
        d
    );
}

#[test]
fn a_version_2_timeline_naming_a_site_missing_from_its_table_is_rejected() {
    let mut out = Vec::new();
    demo_timeline().write_json_to(&mut out).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    v["sites"] = serde_json::json!([]);
    match Timeline::read_json_from(v.to_string().as_bytes()) {
        Err(Error::Format(msg)) => {
            assert!(msg.contains("not in the site table"), "{msg}")
        }
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn snapshot_files_keep_the_format_version_of_their_unchanged_shape() {
    let mut out = Vec::new();
    demo_snapshot().write_json_to(&mut out).unwrap();
    assert!(out.starts_with(br#"{"heapdelta_format":1,"kind":"snapshot""#));
}

#[test]
fn a_growing_step_counts_the_sites_that_fell_among_those_it_did_not_list() {
    let text = demo_timeline_with(|steps, sites| {
        // A site holding 10 blocks of 100 B at step 1, freed by step 4.
        let mut gone = sites[0].clone();
        gone["id"] = 300.into();
        gone["site"]["frames"][0]["function"] = "service::scratch".into();
        let (allocated, freed) = match steps {
            0 => (0, 0),
            1..=3 => (10, 0),
            _ => (10, 10),
        };
        gone["alloc_blocks"] = (allocated * 65536).into();
        gone["alloc_bytes"] = (allocated * 100).into();
        gone["free_blocks"] = (freed * 65536).into();
        gone["free_bytes"] = (freed * 100).into();
        gone["young_free"] = serde_json::json!([0, 0]);
        sites.push(gone);
    })
    .between("step 1", "step 4")
    .unwrap()
    .to_string();
    assert!(!text.contains("service::scratch"), "{text}");
    assert!(text.contains("… and 1 more site that fell"), "{text}");
}

#[test]
fn a_file_that_cannot_be_read_is_named_in_the_error() {
    let path = std::env::temp_dir().join("heapdelta-no-such-dir/run.json");
    for err in [
        Snapshot::read_json(&path).unwrap_err(),
        Timeline::read_json(&path).unwrap_err(),
    ] {
        let Error::Io(io) = &err else {
            panic!("expected an I/O error, got {err:?}");
        };
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert!(
            err.to_string()
                .starts_with(&format!("{}: ", path.display())),
            "{err}"
        );
    }
}

#[test]
fn a_file_that_cannot_be_written_is_named_in_the_error() {
    let path = std::env::temp_dir().join("heapdelta-no-such-dir/run.json");
    let err = demo_timeline().write_json(&path).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    // Said once, not again by a source (a chain printed one by one would repeat it).
    assert!(std::error::Error::source(err.get_ref().unwrap()).is_none());
    assert!(
        err.to_string()
            .starts_with(&format!("{}: ", path.display())),
        "{err}"
    );
}

#[test]
fn input_that_opens_like_json_and_then_is_not_is_refused_without_reading_it_all() {
    use std::io::Read;
    // `{` and then zero bytes, as from a FIFO fed `/dev/zero`; 256 MiB of them here.
    let mut input = Counted {
        inner: (&b"{"[..]).chain(std::io::repeat(0).take(256 << 20)),
        read: 0,
    };
    let err = Timeline::read_json_from(&mut input).unwrap_err();
    assert!(matches!(err, Error::Format(_)), "{err:?}");
    assert!(input.read <= 1 << 20, "read {} bytes: {err}", input.read);
}

#[test]
fn a_valid_file_reads_whatever_byte_of_a_number_its_reading_round_ends_on() {
    // The first reading round ends at 256 KiB: put the end of `2.`, `2.5e` or `2.5e-` of the
    // first checkpoint's `"seconds"` (written 0.25, and 2.5e-1 is the same) right there.
    const ROUND_END: usize = 256 << 10;
    let file = common::timeline_file();
    let at = file.find("\"seconds\":0.25").expect("the demo has it") + "\"seconds\":".len();
    for cut in ["2.", "2.5e", "2.5e-"] {
        let padding = " ".repeat(ROUND_END - at - cut.len());
        let text = format!(
            "{}{padding}2.5e-1{}",
            &file[..at],
            &file[at + "0.25".len()..]
        );
        assert_eq!(
            &text.as_bytes()[ROUND_END - cut.len()..ROUND_END],
            cut.as_bytes()
        );
        let t = Timeline::read_json_from(text.as_bytes())
            .unwrap_or_else(|e| panic!("cut after {cut:?}: {e}"));
        assert_eq!(t.checkpoints().len(), demo_timeline().checkpoints().len());
    }
}
