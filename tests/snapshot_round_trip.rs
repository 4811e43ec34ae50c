//! A snapshot of this process, with call sites, reads back from its JSON file equal to itself.

use heapdelta::{checkpoint, snapshot, timeline, Snapshot, Timeline};

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[inline(never)]
fn keep_rows(rows: &mut Vec<Vec<u8>>, n: usize) {
    for i in 0..n {
        rows.push(vec![7u8; 64 + i]);
    }
}

#[test]
fn a_live_snapshot_reads_back_equal_to_itself() {
    let mut rows = Vec::new();
    keep_rows(&mut rows, 50);
    let s = snapshot();
    let mut out = Vec::new();
    s.write_json_to(&mut out).unwrap();
    assert_eq!(Snapshot::read_json_from(&out[..]).unwrap(), s);
    drop(rows);
}

#[test]
fn a_live_timeline_reads_back_equal_to_itself() {
    let mut rows = Vec::new();
    for step in 0..3 {
        keep_rows(&mut rows, 20);
        checkpoint(format!("step {step}"));
    }
    let t = timeline();
    let mut out = Vec::new();
    t.write_json_to(&mut out).unwrap();
    assert_eq!(Timeline::read_json_from(&out[..]).unwrap(), t);
    drop(rows);
}
