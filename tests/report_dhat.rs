//! DHAT files pass the checks Valgrind's `dh_view.js` makes before it draws anything: the
//! top-level and per-program-point fields, version 2, `[root]` as frame 0, and no two program
//! points with the same frames.

mod common;

use std::collections::HashSet;

use heapdelta::{Site, Snapshot, Timeline};
use serde_json::{json, Value};

/// The viewer's checks, in the order it makes them; `Err` is the message it would show.
fn dh_view_checks(data: &Value) -> Result<(), String> {
    let has = |obj: &Value, fields: &[&str]| -> Result<(), String> {
        for f in fields {
            if obj.get(f).is_none() {
                return Err(format!("data file is missing a field: {f}"));
            }
        }
        Ok(())
    };
    has(
        data,
        &[
            "dhatFileVersion",
            "mode",
            "verb",
            "bklt",
            "bkacc",
            "tu",
            "Mtu",
            "cmd",
            "pid",
            "te",
            "pps",
            "ftbl",
        ],
    )?;
    if data["dhatFileVersion"] != 2 {
        return Err(format!("version {}, expected 2", data["dhatFileVersion"]));
    }
    let bklt = data["bklt"].as_bool().ok_or("bklt is not a boolean")?;
    let bkacc = data["bkacc"].as_bool().ok_or("bkacc is not a boolean")?;
    if bklt {
        has(data, &["tg", "tuth"])?;
    }
    let ftbl = data["ftbl"].as_array().ok_or("ftbl is not an array")?;
    if ftbl.first().and_then(Value::as_str) != Some("[root]") {
        return Err("ftbl[0] is not \"[root]\"".to_string());
    }
    let mut seen = HashSet::new();
    for pp in data["pps"].as_array().ok_or("pps is not an array")? {
        has(pp, &["tb", "tbk", "fs"])?;
        if bklt {
            has(pp, &["mb", "mbk", "gb", "gbk", "eb", "ebk"])?;
        }
        if bkacc {
            has(pp, &["rb", "wb"])?;
        }
        let fs: Vec<u64> = pp["fs"]
            .as_array()
            .ok_or("fs is not an array")?
            .iter()
            .map(|f| f.as_u64().ok_or("a frame index is not a number"))
            .collect::<Result<_, _>>()?;
        if fs.iter().any(|&f| f == 0 || f as usize >= ftbl.len()) {
            return Err(format!("fs {fs:?} points at [root] or past ftbl"));
        }
        if !seen.insert(fs.clone()) {
            return Err(format!("data file contains a repeated location: {fs:?}"));
        }
    }
    Ok(())
}

fn demo_snapshot() -> Snapshot {
    Snapshot::read_json_from(common::snapshot_file().as_bytes()).unwrap()
}

fn dhat_of_snapshot(s: &Snapshot) -> Value {
    let mut out = Vec::new();
    s.write_dhat_to(&mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn frames_of(data: &Value, pp: &Value) -> Vec<String> {
    pp["fs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            data["ftbl"][i.as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn a_snapshot_passes_the_viewer_checks() {
    dh_view_checks(&dhat_of_snapshot(&demo_snapshot())).unwrap();
}

#[test]
fn the_header_says_rust_heap_with_block_lifetimes() {
    let d = dhat_of_snapshot(&demo_snapshot());
    assert_eq!(d["mode"], "rust-heap");
    assert_eq!(d["bklt"], true);
    assert_eq!(d["bkacc"], false);
    assert!(d["cmd"].as_str().unwrap().contains("step 4"));
}

#[test]
fn the_command_line_names_the_program_that_counted_the_figures() {
    let exe = std::env::current_exe().unwrap();
    let d = dhat_of_snapshot(&heapdelta::snapshot());
    let cmd = d["cmd"].as_str().unwrap();
    assert!(cmd.contains(exe.to_str().unwrap()), "{cmd}");
}

#[test]
fn the_file_names_the_process_that_took_the_snapshot() {
    let d = dhat_of_snapshot(&heapdelta::snapshot());
    assert_eq!(d["pid"], std::process::id());
}

#[test]
fn the_process_id_survives_a_json_round_trip() {
    let mut json = Vec::new();
    heapdelta::snapshot().write_json_to(&mut json).unwrap();
    let read = Snapshot::read_json_from(&json[..]).unwrap();
    assert_eq!(dhat_of_snapshot(&read)["pid"], std::process::id());
}

#[test]
fn a_snapshot_from_a_file_without_a_process_id_gives_pid_0() {
    // The demo file was written before snapshots kept the process id.
    assert_eq!(dhat_of_snapshot(&demo_snapshot())["pid"], 0);
}

#[test]
fn the_command_line_says_which_figures_are_not_recorded() {
    let d = dhat_of_snapshot(&demo_snapshot());
    let cmd = d["cmd"].as_str().unwrap();
    assert!(cmd.contains("live at the snapshot"), "{cmd}");
    assert!(cmd.contains("lifetimes"), "{cmd}");
    assert!(cmd.contains("not recorded"), "{cmd}");
}

#[test]
fn frames_are_listed_innermost_first() {
    let d = dhat_of_snapshot(&demo_snapshot());
    let cache = d["pps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|pp| pp["eb"] == 4 * 8 * 4096)
        .expect("the cache's program point");
    assert_eq!(
        frames_of(&d, cache),
        [
            "service::cache::Cache::insert (src/cache.rs:42) [Vec<u8>]",
            "service::handle_request (src/main.rs:88)",
            "service::main (src/main.rs:20)"
        ]
    );
}

#[test]
fn program_point_totals_add_up_to_the_snapshot() {
    let s = demo_snapshot();
    let d = dhat_of_snapshot(&s);
    let sum = |field: &str| -> u64 {
        d["pps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pp| pp[field].as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum("tb"), s.totals().total_bytes);
    assert_eq!(sum("tbk"), s.totals().total_blocks);
    assert_eq!(sum("eb"), s.totals().live_bytes);
    assert_eq!(sum("ebk"), s.totals().live_blocks);
}

/// The DHAT file of the demo snapshot with one more site: the cache's frames again, allocating
/// `type_name`, with half of the cache's allocations.
fn dhat_with_a_twin_of_the_cache(type_name: Option<&str>) -> Value {
    let mut snapshot = common::snapshot(common::STEPS);
    let mut twin = common::split_top_site(&mut snapshot);
    let frames = common::sites()[0].site.frames().to_vec();
    twin["id"] = json!(99);
    twin["site"] =
        serde_json::to_value(Site::from_frames(frames, type_name.map(str::to_string))).unwrap();
    snapshot["sites"].as_array_mut().unwrap().push(twin);
    let file = common::snapshot_file_of(snapshot);
    let d = dhat_of_snapshot(&Snapshot::read_json_from(file.as_bytes()).unwrap());
    dh_view_checks(&d).unwrap();
    d
}

#[test]
fn sites_with_the_same_frames_and_type_become_one_program_point() {
    let d = dhat_with_a_twin_of_the_cache(Some(common::sites()[0].site.type_name()));
    assert_eq!(d["pps"].as_array().unwrap().len(), common::sites().len());
}

#[test]
fn sites_of_one_location_that_allocate_two_types_are_two_program_points() {
    let d = dhat_with_a_twin_of_the_cache(Some("Box<[u8]>"));
    assert_eq!(
        d["pps"].as_array().unwrap().len(),
        common::sites().len() + 1
    );
    let innermost: Vec<String> = d["pps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pp| frames_of(&d, pp)[0].clone())
        .collect();
    assert!(innermost
        .contains(&"service::cache::Cache::insert (src/cache.rs:42) [Box<[u8]>]".to_string()));
}

#[test]
fn sites_without_frames_become_one_unknown_program_point() {
    let mut v: Value = serde_json::from_str(&common::snapshot_file()).unwrap();
    for site in v["snapshot"]["sites"].as_array_mut().unwrap() {
        site.as_object_mut().unwrap().remove("site");
    }
    let d = dhat_of_snapshot(&Snapshot::read_json_from(v.to_string().as_bytes()).unwrap());
    dh_view_checks(&d).unwrap();
    assert_eq!(d["pps"].as_array().unwrap().len(), 1);
}

#[test]
fn a_step_delta_passes_the_viewer_checks_and_shows_growth_at_t_end() {
    let t = Timeline::read_json_from(common::timeline_file().as_bytes()).unwrap();
    let step = t.between("step 3", "step 4").unwrap();
    let mut out = Vec::new();
    step.write_dhat_to(&mut out).unwrap();
    let d: Value = serde_json::from_slice(&out).unwrap();
    dh_view_checks(&d).unwrap();
    let eb: u64 = d["pps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pp| pp["eb"].as_u64().unwrap())
        .sum();
    assert_eq!(eb, 8 * 4096 + 20 * 32);
    let tb: u64 = d["pps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pp| pp["tb"].as_u64().unwrap())
        .sum();
    assert_eq!(tb, step.allocated_bytes());
}

#[test]
fn the_checks_catch_a_repeated_location() {
    let mut d = dhat_of_snapshot(&demo_snapshot());
    let first = d["pps"][0].clone();
    d["pps"].as_array_mut().unwrap().push(first);
    assert!(dh_view_checks(&d)
        .unwrap_err()
        .contains("repeated location"));
}
