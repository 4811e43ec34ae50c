//! The CPython 3.11 test vectors (see `tests/data/pymalloc/README.md`): replaying each trace through a fresh `Pool` with
//! `PoolConfig::CPYTHON` must give CPython's counters exactly, at every snapshot and at the end.

use heapdelta::replay::{self, Outcome};
use heapdelta::{Pool, PoolConfig};
use serde_json::Value;
use std::io::Read;
use std::path::Path;

fn load(name: &str) -> (Vec<replay::Op>, Value) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pymalloc");
    let gz = std::fs::File::open(dir.join(format!("{name}.trace.gz"))).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .unwrap();
    let expected = std::fs::read_to_string(dir.join(format!("{name}.expected.json"))).unwrap();
    (
        replay::parse(&text).unwrap(),
        serde_json::from_str(&expected).unwrap(),
    )
}

fn replay_matches_cpython(name: &str) {
    let (ops, expected) = load(name);
    let pool = Pool::with_config(std::alloc::System, PoolConfig::CPYTHON);
    let outcome: Outcome = replay::run(&pool, &ops).unwrap();
    let got = replay::outcome_json(&pool, &outcome);

    let want_snaps = expected["snapshots"].as_array().unwrap();
    let got_snaps = got["snapshots"].as_array().unwrap();
    assert_eq!(got_snaps.len(), want_snaps.len(), "{name}: snapshot count");
    for (g, w) in got_snaps.iter().zip(want_snaps) {
        assert_eq!(g, w, "{name}: snapshot {}", w["label"]);
    }
    for key in ["after", "after_cleanup"] {
        assert_eq!(got[key], expected[key], "{name}: {key}");
    }
    assert_eq!(
        outcome.after.large_blocks,
        expected["trace"]["live_raw"].as_u64().unwrap(),
        "{name}: blocks outside the pools"
    );
}

#[test]
fn allfree_trace_keeps_one_arena_like_cpython() {
    replay_matches_cpython("allfree");
}

#[test]
fn compact_trace_releases_arenas_like_cpython() {
    replay_matches_cpython("compact");
}

#[test]
fn training_trace_matches_cpython_at_every_step() {
    replay_matches_cpython("training");
}

#[test]
fn fuzz_trace_with_reallocs_and_large_blocks_matches_cpython() {
    replay_matches_cpython("fuzz");
}

#[test]
fn arenas_ordered_by_use_through_phases_of_growth_and_release_match_cpython() {
    replay_matches_cpython("stress");
}
