//! Builds `tests/fixtures/alloc_kinds` in configurations a test binary cannot have itself, runs
//! it, and checks what it reports: without frame pointers (the unwinder fallback) and with the
//! legacy symbol mangling, in a release build and in a debug build, and without debug info.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Workload figures (the fixture's `workload.rs`).
#[path = "fixtures/alloc_kinds/src/workload.rs"]
#[allow(dead_code)]
mod workload;

struct Run {
    stdout: String,
    stderr: String,
}

/// Builds the fixture in the release profile with `rustflags` and `debug` (its debug info).
fn build_and_run(name: &str, rustflags: &str, debug: &str) -> Run {
    build_and_run_in(name, rustflags, debug, true, None)
}

/// `build_and_run` in the release profile, or the dev profile when not `release`; the fixture
/// runs with `HEAPDELTA` set to `heapdelta` when given.
fn build_and_run_in(
    name: &str,
    rustflags: &str,
    debug: &str,
    release: bool,
    heapdelta: Option<&str>,
) -> Run {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(root)
        .args(["build", "--quiet", "-p", "alloc_kinds"])
        .env("CARGO_TARGET_DIR", &target)
        .env("RUSTFLAGS", rustflags);
    let dir = if release {
        build
            .arg("--release")
            .env("CARGO_PROFILE_RELEASE_DEBUG", debug);
        "release"
    } else {
        build.env("CARGO_PROFILE_DEV_DEBUG", debug);
        "debug"
    };
    let status = build.status().expect("cargo runs");
    assert!(status.success(), "building the fixture ({name}) failed");
    let mut fixture = Command::new(target.join(dir).join("alloc_kinds"));
    if let Some(settings) = heapdelta {
        fixture.env("HEAPDELTA", settings);
    }
    let out = fixture.output().expect("fixture runs");
    assert!(
        out.status.success(),
        "fixture ({name}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `(kind, blocks, name)` lines of the fixture's output.
fn rows<'a>(run: &'a Run, kind: &str) -> Vec<(i64, &'a str)> {
    run.stdout
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            (parts.next()? == kind).then_some(())?;
            Some((parts.next()?.parse().ok()?, parts.next()?))
        })
        .collect()
}

fn blocks(run: &Run, type_name: &str) -> i64 {
    rows(run, "type")
        .iter()
        .filter(|(_, n)| *n == type_name)
        .map(|(b, _)| b)
        .sum()
}

const ALL_BLOCKS: i64 =
    (workload::VECS + workload::FORMATTED + workload::ENTRIES + workload::BOXES + 1) as i64;

#[test]
fn without_frame_pointers_and_with_legacy_mangling_sites_and_types_are_still_right() {
    let run = build_and_run(
        "no-frame-pointers",
        "-C force-frame-pointers=no",
        "line-tables-only",
    );
    assert!(
        run.stderr.contains("force-frame-pointers"),
        "the user is told how to enable frame pointers: {}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("no debug information"),
        "line tables are there: {}",
        run.stderr
    );
    let sites = rows(&run, "site");
    assert!(
        !sites.is_empty() && sites.iter().all(|(_, f)| f.ends_with("allocate")),
        "{sites:?}"
    );
    assert_eq!(sites.iter().map(|(b, _)| b).sum::<i64>(), ALL_BLOCKS);
    assert_eq!(
        blocks(&run, "Vec<f32>"),
        workload::VECS as i64,
        "{}",
        run.stdout
    );
    assert_eq!(
        blocks(&run, "String"),
        (workload::FORMATTED + workload::ENTRIES) as i64,
        "{}",
        run.stdout
    );
    assert_eq!(
        blocks(&run, "Box<[u64; 4]>"),
        workload::BOXES as i64,
        "{}",
        run.stdout
    );
    assert_eq!(blocks(&run, "(unknown)"), 0, "{}", run.stdout);
    assert_every_capture_unwound_by_the_cached_walk(&run);
}

#[test]
fn without_frame_pointers_in_a_debug_build_sites_are_right_and_captures_stay_cached() {
    // heapdelta's own frames are larger in a debug build (the capture buffer's function keeps
    // several KiB of locals): the cached walk must pass them too.
    let run = build_and_run_in(
        "no-frame-pointers-dev",
        "-C force-frame-pointers=no",
        "line-tables-only",
        false,
        None,
    );
    let sites = rows(&run, "site");
    assert!(
        !sites.is_empty() && sites.iter().all(|(_, f)| f.ends_with("allocate")),
        "{sites:?}"
    );
    assert_eq!(sites.iter().map(|(b, _)| b).sum::<i64>(), ALL_BLOCKS);
    assert_every_capture_unwound_by_the_cached_walk(&run);
}

/// The fixture's captures all used an unwinder, and on x86_64 Linux none went to the general one.
fn assert_every_capture_unwound_by_the_cached_walk(run: &Run) {
    let unwound = rows(run, "unwound");
    let [(captures, general)] = unwound[..] else {
        panic!("no unwound line: {}", run.stdout)
    };
    assert!(captures > 0, "{}", run.stdout);
    if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        assert_eq!(
            general, "0",
            "the cached unwinder makes every capture: {}",
            run.stdout
        );
    }
}

#[test]
fn without_debug_info_types_are_unknown_rather_than_wrong() {
    let run = build_and_run("no-debug-info", "-C force-frame-pointers=yes", "false");
    assert!(
        run.stderr.contains("debug = \"line-tables-only\""),
        "the user is told how to get file:line and types: {}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("has no symbols"),
        "a build without debug info keeps its symbols: {}",
        run.stderr
    );
    let expected = [
        ("Vec<f32>", workload::VECS as i64),
        ("String", (workload::FORMATTED + workload::ENTRIES) as i64),
        ("Box<[u64; 4]>", workload::BOXES as i64),
        ("HashMap<String, u32>", 1),
    ];
    let types = rows(&run, "type");
    for (count, name) in &types {
        if *name != "(unknown)" {
            let right = expected.iter().any(|(n, c)| n == name && c >= count);
            assert!(
                right,
                "wrong type reported: {name} × {count}\n{}",
                run.stdout
            );
        }
    }
    assert!(blocks(&run, "(unknown)") > 0, "{}", run.stdout);
    assert_eq!(types.iter().map(|(b, _)| b).sum::<i64>(), ALL_BLOCKS);
}

#[test]
fn stripped_of_symbols_every_site_is_unknown_and_the_user_is_told_why() {
    let run = build_and_run(
        "stripped",
        "-C force-frame-pointers=yes -C strip=symbols",
        "false",
    );
    assert!(
        run.stderr.contains("has no symbols") && run.stderr.contains("strip = false"),
        "the user is told why no site is named: {}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("has no symbols").count(),
        1,
        "{}",
        run.stderr
    );
    assert_eq!(rows(&run, "site"), [(ALL_BLOCKS, "(unknown)")]);
}

#[test]
fn a_program_whose_file_was_deleted_is_not_told_it_has_no_symbols() {
    // The build of `without_debug_info_…`, which has its symbols, run under a second name that it
    // deletes before its sites are named.
    build_and_run("no-debug-info", "-C force-frame-pointers=yes", "false");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-debug-info");
    let copy = target.join("alloc_kinds-deleted");
    // A second name for the file, not a copy: a copy's write handle, inherited by a process
    // another test starts meanwhile, can make running it fail (ETXTBSY; a review).
    let _ = std::fs::remove_file(&copy);
    std::fs::hard_link(target.join("release").join("alloc_kinds"), &copy).expect("linked");
    let out = Command::new(&copy)
        .env("ALLOC_KINDS_DELETE_SELF", "1")
        .output()
        .expect("fixture runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!copy.exists(), "the copy deleted itself");
    assert!(
        stderr.contains("was deleted or replaced since it started"),
        "{stderr}"
    );
    assert!(!stderr.contains("has no symbols"), "{stderr}");
}

/// The release fixture without frame pointers, run under `HEAPDELTA=settings`, which must print
/// no frame-pointer hint (`why` says why).
fn run_without_frame_pointers_and_no_hint(settings: &str, why: &str) -> Run {
    let run = build_and_run_in(
        "no-frame-pointers",
        "-C force-frame-pointers=no",
        "line-tables-only",
        true,
        Some(settings),
    );
    assert!(
        !run.stderr.contains("force-frame-pointers"),
        "no hint {why}: {}",
        run.stderr
    );
    run
}

#[test]
fn without_frame_pointers_sampled_sites_get_no_hint() {
    let run = run_without_frame_pointers_and_no_hint("sites=sampled:4096", "for sampled sites");
    assert!(!rows(&run, "site").is_empty(), "{}", run.stdout);
}

#[test]
fn without_frame_pointers_and_a_depth_of_zero_nothing_is_walked_or_hinted() {
    let run = run_without_frame_pointers_and_no_hint("depth=0", "when no frame is kept");
    assert_eq!(rows(&run, "site"), [(ALL_BLOCKS, "(unknown)")]);
    assert_eq!(rows(&run, "unwound"), [(0, "0")]);
}
