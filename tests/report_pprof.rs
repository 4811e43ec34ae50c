//! pprof profiles: decoded with `prost` from a reading of pprof's `profile.proto` made here (only
//! the fields checked), they give back the snapshot's and the delta's figures; `go tool pprof`
//! reads them where Go is installed.
#![cfg(feature = "pprof")]

mod common;

use std::io::Read;

use heapdelta::{Snapshot, Timeline};
use prost::Message;

#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

fn decode(gzipped: &[u8]) -> Profile {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(gzipped)
        .read_to_end(&mut raw)
        .expect("the profile is gzipped");
    Profile::decode(&raw[..]).expect("the profile decodes")
}

impl Profile {
    fn str(&self, i: i64) -> &str {
        &self.string_table[i as usize]
    }

    /// The sum of one sample type's values over all samples.
    fn total(&self, sample_type: &str) -> i64 {
        let i = self
            .sample_type
            .iter()
            .position(|t| self.str(t.r#type) == sample_type)
            .unwrap_or_else(|| panic!("no sample type {sample_type}"));
        self.sample.iter().map(|s| s.value[i]).sum()
    }

    /// A sample's frames, innermost first, as `function (file:line)`.
    fn frames(&self, sample: &Sample) -> Vec<String> {
        sample
            .location_id
            .iter()
            .map(|id| {
                let loc = self
                    .location
                    .iter()
                    .find(|l| l.id == *id)
                    .expect("location");
                let line = &loc.line[0];
                let f = self
                    .function
                    .iter()
                    .find(|f| f.id == line.function_id)
                    .expect("function");
                format!(
                    "{} ({}:{})",
                    self.str(f.name),
                    self.str(f.filename),
                    line.line
                )
            })
            .collect()
    }
}

fn demo_snapshot() -> Snapshot {
    Snapshot::read_json_from(common::snapshot_file().as_bytes()).unwrap()
}

fn snapshot_profile() -> Profile {
    let mut out = Vec::new();
    demo_snapshot().write_pprof_to(&mut out).unwrap();
    decode(&out)
}

#[test]
fn sample_types_are_alloc_and_inuse_objects_and_space() {
    let p = snapshot_profile();
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (p.str(t.r#type), p.str(t.unit)))
        .collect();
    assert_eq!(
        types,
        [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes")
        ]
    );
    let period = p.period_type.clone().expect("a period type");
    assert_eq!(
        (p.str(period.r#type), p.str(period.unit)),
        ("space", "bytes")
    );
    assert_eq!(p.str(p.default_sample_type), "inuse_space");
    assert_eq!(p.string_table[0], "");
}

#[test]
fn a_snapshot_profile_decodes_to_the_snapshot_totals() {
    let s = demo_snapshot();
    let p = snapshot_profile();
    assert_eq!(p.total("inuse_space"), s.totals().live_bytes as i64);
    assert_eq!(p.total("inuse_objects"), s.totals().live_blocks as i64);
    assert_eq!(p.total("alloc_space"), s.totals().total_bytes as i64);
    assert_eq!(p.total("alloc_objects"), s.totals().total_blocks as i64);
}

/// Wall-clock time now, in nanoseconds since the Unix epoch.
fn now_nanos() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970");
    i64::try_from(since.as_nanos()).expect("before 2262")
}

fn profile_of(write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> Profile {
    let mut out = Vec::new();
    write(&mut out).unwrap();
    decode(&out)
}

#[test]
fn a_snapshot_profile_covers_the_time_from_the_start_to_the_snapshot() {
    let before = now_nanos();
    let s = heapdelta::snapshot();
    let after = now_nanos();
    let p = profile_of(|out| s.write_pprof_to(out));
    assert!(p.time_nanos > 0 && p.duration_nanos >= 0);
    let end = p.time_nanos + p.duration_nanos;
    assert!(
        before <= end && end <= after,
        "{before} <= {end} <= {after}"
    );
}

#[test]
fn a_delta_profile_starts_at_the_earlier_snapshot() {
    let before = now_nanos();
    let a = heapdelta::snapshot();
    let after = now_nanos();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let p = profile_of(|out| heapdelta::snapshot().since(&a).write_pprof_to(out));
    assert!(p.duration_nanos >= 20_000_000, "{}", p.duration_nanos);
    // The start is the later snapshot's wall-clock time less the window measured on the
    // monotonic clock: the earlier snapshot's time, to within the two clocks' drift.
    let slack = 1_000_000;
    assert!(
        before - slack <= p.time_nanos && p.time_nanos <= after + slack,
        "{before} <= {} <= {after}",
        p.time_nanos
    );
}

/// The file name of the profile's main mapping.
fn main_mapping(p: &Profile) -> &str {
    p.str(p.mapping[0].filename)
}

#[test]
fn the_main_mapping_is_the_program_that_counted_the_figures() {
    let exe = std::env::current_exe().unwrap();
    let snapshot = heapdelta::snapshot();
    let p = profile_of(|out| snapshot.write_pprof_to(out));
    assert_eq!(main_mapping(&p), exe.to_str().unwrap());
    let p = profile_of(|out| heapdelta::snapshot().since(&snapshot).write_pprof_to(out));
    assert_eq!(main_mapping(&p), exe.to_str().unwrap());
}

#[test]
fn a_snapshot_from_a_file_without_its_program_gives_a_mapping_without_a_name() {
    assert_eq!(main_mapping(&snapshot_profile()), "");
}

#[test]
fn a_snapshot_from_a_file_without_a_time_gives_a_profile_without_one() {
    assert_eq!(snapshot_profile().time_nanos, 0);
}

#[test]
fn functions_and_lines_come_from_the_resolved_frames_innermost_first() {
    let p = snapshot_profile();
    let stacks: Vec<Vec<String>> = p.sample.iter().map(|s| p.frames(s)).collect();
    assert!(
        stacks.contains(&vec![
            "service::cache::Cache::insert (src/cache.rs:42)".to_string(),
            "service::handle_request (src/main.rs:88)".to_string(),
            "service::main (src/main.rs:20)".to_string(),
        ]),
        "{stacks:?}"
    );
}

#[test]
fn functions_have_no_system_name_for_pprof_to_demangle() {
    let p = snapshot_profile();
    assert!(p
        .function
        .iter()
        .any(|f| p.str(f.name).starts_with("<[u8; 32] as ")));
    assert!(p.function.iter().all(|f| f.system_name == 0));
}

#[test]
fn functions_of_one_name_in_two_files_are_named_with_their_files() {
    let mut file = common::snapshot(4);
    for site in file["sites"].as_array_mut().unwrap() {
        site["site"]["frames"][0]["function"] = "build".into();
    }
    let s = Snapshot::read_json_from(common::snapshot_file_of(file).as_bytes()).unwrap();
    let mut out = Vec::new();
    s.write_pprof_to(&mut out).unwrap();
    let p = decode(&out);
    let names: std::collections::HashSet<&str> = p.function.iter().map(|f| p.str(f.name)).collect();
    assert!(names.contains("build (src/cache.rs)"), "{names:?}");
    assert!(names.contains("build (src/log.rs)"), "{names:?}");
    assert!(!names.contains("build"), "{names:?}");
    assert!(names.contains("service::main"), "one file: the name alone");
}

#[test]
fn closures_named_without_a_path_are_named_after_the_function_they_were_called_in() {
    // Debug information of line tables only names every closure `{closure#0}`: two functions'
    // closures in one file were one pprof function (a user trial).
    let frame = |function: &str, file: &str, line: u32| serde_json::json!({ "function": function, "file": file, "line": line });
    let mut file = common::snapshot(4);
    let sites = file["sites"].as_array_mut().unwrap();
    sites[0]["site"]["frames"] = serde_json::json!([
        frame("{closure#0}", "src/main.rs", 127),
        frame(
            "with<core::cell::RefCell<u8>>",
            "std/src/thread/local.rs",
            310
        ),
        frame("memoize", "src/main.rs", 127),
        frame("main", "src/main.rs", 20),
    ]);
    sites[1]["site"]["frames"] = serde_json::json!([
        frame("{closure#0}", "src/main.rs", 152),
        frame("{closure#1}", "src/main.rs", 150),
        frame("cache_summary", "src/main.rs", 150),
        frame("main", "src/main.rs", 21),
    ]);
    let s = Snapshot::read_json_from(common::snapshot_file_of(file).as_bytes()).unwrap();
    let mut out = Vec::new();
    s.write_pprof_to(&mut out).unwrap();
    let p = decode(&out);
    assert_eq!(
        p.frames(&p.sample[0]),
        [
            "{closure#0} in memoize (src/main.rs:127)",
            "with<core::cell::RefCell<u8>> (std/src/thread/local.rs:310)",
            "memoize (src/main.rs:127)",
            "main (src/main.rs:20)",
        ]
    );
    assert_eq!(
        p.frames(&p.sample[1])[..3],
        [
            "{closure#0} in cache_summary (src/main.rs:152)",
            "{closure#1} in cache_summary (src/main.rs:150)",
            "cache_summary (src/main.rs:150)",
        ]
    );
}

#[test]
fn shared_frames_are_one_location_and_one_function() {
    let p = snapshot_profile();
    let main = p
        .function
        .iter()
        .filter(|f| p.str(f.name) == "service::main")
        .count();
    assert_eq!(
        main, 1,
        "service::main is called at two lines: still one function"
    );
    let main_lines = p
        .location
        .iter()
        .filter(|l| {
            l.line[0].function_id
                == p.function
                    .iter()
                    .find(|f| p.str(f.name) == "service::main")
                    .unwrap()
                    .id
        })
        .count();
    assert_eq!(main_lines, 2, "one location per line");
    let ids: std::collections::HashSet<u64> = p.location.iter().map(|l| l.id).collect();
    assert_eq!(ids.len(), p.location.len());
}

#[test]
fn a_delta_profile_gives_the_growth_and_the_window_allocations() {
    let t = Timeline::read_json_from(common::timeline_file().as_bytes()).unwrap();
    let d = t.between("step 1", "step 4").unwrap();
    let mut out = Vec::new();
    d.write_pprof_to(&mut out).unwrap();
    let p = decode(&out);
    assert_eq!(p.total("inuse_space"), d.live_bytes());
    assert_eq!(p.total("inuse_objects"), d.live_blocks());
    assert_eq!(p.total("alloc_space"), d.allocated_bytes() as i64);
    assert_eq!(p.total("alloc_objects"), d.allocated_blocks() as i64);
}

#[test]
fn a_delta_profile_shows_by_default_the_growth_of_the_sites_that_grew() {
    let t = Timeline::read_json_from(common::timeline_file().as_bytes()).unwrap();
    // From "step 1" to "step 4" the sites grew; back from "step 4" to "step 1" they shrank.
    let cps = t.checkpoints();
    for (window, grew) in [
        (cps[3].since(&cps[0]), true),
        (cps[0].since(&cps[3]), false),
    ] {
        let mut out = Vec::new();
        window.write_pprof_to(&mut out).unwrap();
        let p = decode(&out);
        assert_eq!(p.str(p.default_sample_type), "grown_space");
        let last = p.sample_type.last().map(|t| p.str(t.r#type));
        assert_eq!(last, Some("grown_space"), "the last type, for speedscope");
        let grown: i64 = window.sites().iter().map(|s| s.live_bytes.max(0)).sum();
        assert_eq!(p.total("grown_space"), grown);
        assert!(p.sample.iter().all(|s| s.value[4] >= 0 && s.value[5] >= 0));
        assert_eq!(grown > 0, grew);
    }
}

#[test]
fn go_tool_pprof_reads_the_profile() {
    let go = std::process::Command::new("go").arg("version").output();
    if !go.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: Go is not installed, so `go tool pprof` cannot be tried");
        return;
    }
    let dir = common::temp_dir("go_pprof");
    let path = dir.join("demo.pb.gz");
    demo_snapshot().write_pprof(&path).unwrap();
    let out = std::process::Command::new("go")
        .args(["tool", "pprof", "-top", "-sample_index=inuse_space"])
        .arg(&path)
        .output()
        .expect("go tool pprof runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("service::cache::Cache::insert"), "{text}");
}
