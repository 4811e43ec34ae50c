//! A delta that compares two snapshots (the later given first here) counts the fall of every
//! site, size class and tag, including those the later snapshot no longer lists.

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// A block from a call site of its own, under a scope tag of its own.
#[inline(never)]
fn new_site_and_tag() -> Vec<u8> {
    let _g = heapdelta::scope("comparisons-new-tag");
    vec![7u8; 3 << 20]
}

#[test]
fn a_comparison_counts_the_fall_of_sites_classes_and_tags_only_the_first_snapshot_holds() {
    let before = heapdelta::snapshot();
    let kept = new_site_and_tag();
    let after = heapdelta::snapshot();
    // Given the later snapshot first: what `kept` holds falls away.
    let back = before.since(&after);
    assert!(back.is_comparison());
    // Other tests of this binary may allocate meanwhile: a little either way.
    assert!(back.live_bytes() <= -(3 << 20) + (64 << 10), "{back}");
    let classes: i64 = back.size_classes().iter().map(|c| c.live_bytes).sum();
    assert_eq!(classes, back.live_bytes(), "{back}");
    let tag = back.tags().iter().find(|t| t.tag == "comparisons-new-tag");
    assert_eq!(tag.map(|t| t.live_bytes), Some(-(3 << 20)), "{back}");
    let site = back
        .sites()
        .iter()
        .find(|s| s.site.to_string().contains("new_site_and_tag"));
    assert_eq!(site.map(|s| s.live_bytes), Some(-(3 << 20)), "{back}");
    drop(kept);
}

// Reports are made inside heapdelta's guard but written into the program's own buffers outside
// it: what the program keeps of a report is the program's memory, counted as such.
#[test]
fn reports_the_program_keeps_are_counted_as_the_programs() {
    use std::fmt::Write as _;
    let start = heapdelta::snapshot();
    let d = heapdelta::snapshot().since(&start);
    let (text, m) = heapdelta::measure(|| d.to_string());
    assert_eq!(m.live_bytes(), text.capacity() as i64);
    let (line, m) = heapdelta::measure(|| d.summary());
    assert_eq!(m.live_bytes(), line.capacity() as i64);
    let mut log = String::with_capacity(16);
    let ((), m) = heapdelta::measure(|| write!(log, "{d}").expect("a String takes any text"));
    assert_eq!(m.live_bytes(), log.capacity() as i64 - 16);
    let (file, m) = heapdelta::measure(|| {
        let mut out = Vec::new();
        start.write_json_to(&mut out).expect("written to memory");
        out
    });
    assert_eq!(m.live_bytes(), file.capacity() as i64);
}

// Reading a report file is heapdelta's own work, the file's buffer included: none of it is
// counted as the program's.
#[test]
fn reading_a_report_file_counts_nothing_as_the_programs() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("snapshot.json");
    heapdelta::snapshot()
        .write_json(&path)
        .expect("written to a temporary file");
    let (read, m) = heapdelta::measure(|| heapdelta::Snapshot::read_json(&path));
    assert!(read.is_ok());
    assert_eq!(m.allocated_bytes(), 0, "{m}");
    let (read, m) = heapdelta::measure(|| heapdelta::Timeline::read_json(&path));
    assert!(read.is_err(), "a snapshot file is not a timeline");
    assert_eq!(m.allocated_bytes(), 0, "{m}");
}
