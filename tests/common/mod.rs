//! A demo run written in heapdelta's JSON format (version 1), with call-site frames, so the
//! report tests do not depend on call-site capture: a service whose cache and log grow at every
//! step while its parser's and digest's allocations are freed within the step.
#![allow(dead_code)] // each test file uses part of it

use heapdelta::{Frame, Site};
use serde_json::{json, Value};

/// Units per block in a site's block counts (heapdelta's fixed point, `1 << 16`).
pub const UNIT: u64 = 1 << 16;

/// Steps after the `start` checkpoint.
pub const STEPS: u64 = 4;

/// Bytes live at the last checkpoint: the cache (4 steps × 8 × 4096), the log (4 × 20 × 32)
/// and the configuration (2048).
pub const LAST_LIVE_BYTES: u64 = 4 * 8 * 4096 + 4 * 20 * 32 + 2048;
/// Blocks live at the last checkpoint.
pub const LAST_LIVE_BLOCKS: u64 = 4 * 8 + 4 * 20 + 1;

fn frame(function: &str, file: &str, line: u32) -> Frame {
    Frame {
        function: function.to_string(),
        file: Some(file.to_string()),
        line: Some(line),
    }
}

fn main_frame(line: u32) -> Frame {
    frame("service::main", "src/main.rs", line)
}

fn request_frame(line: u32) -> Frame {
    frame("service::handle_request", "src/main.rs", line)
}

/// One call site of the demo: its frames, and what it allocates per step.
pub struct DemoSite {
    pub site: Site,
    /// Blocks allocated per step (or once, at start).
    pub blocks: u64,
    /// Bytes of each block.
    pub size: u64,
    /// Whether the blocks are freed within their step.
    pub freed: bool,
    /// Whether it allocates once, before the first checkpoint, rather than at every step.
    pub once: bool,
    pub tag: Option<&'static str>,
}

pub fn sites() -> Vec<DemoSite> {
    let site = |frames: Vec<Frame>, type_name: &str| {
        Site::from_frames(frames, Some(type_name.to_string()))
    };
    vec![
        DemoSite {
            site: site(
                vec![
                    frame("service::cache::Cache::insert", "src/cache.rs", 42),
                    request_frame(88),
                    main_frame(20),
                ],
                "Vec<u8>",
            ),
            blocks: 8,
            size: 4096,
            freed: false,
            once: false,
            tag: Some("cache"),
        },
        DemoSite {
            site: site(
                vec![
                    frame("service::log::Log::push", "src/log.rs", 17),
                    request_frame(91),
                    main_frame(20),
                ],
                "String",
            ),
            blocks: 20,
            size: 32,
            freed: false,
            once: false,
            tag: Some("log"),
        },
        DemoSite {
            site: site(
                vec![
                    frame("service::parse::tokenize", "src/parse.rs", 9),
                    request_frame(80),
                    main_frame(20),
                ],
                "String",
            ),
            blocks: 200,
            size: 24,
            freed: true,
            once: false,
            tag: Some("parse"),
        },
        DemoSite {
            site: site(
                vec![
                    frame("<[u8; 32] as service::Digest>::digest", "src/digest.rs", 3),
                    request_frame(95),
                    main_frame(20),
                ],
                "[u8; 32]",
            ),
            blocks: 10,
            size: 32,
            freed: true,
            once: false,
            tag: None,
        },
        DemoSite {
            site: site(
                vec![
                    frame("service::config::load", "src/config.rs", 5),
                    main_frame(12),
                ],
                "HashMap<String, String>",
            ),
            blocks: 1,
            size: 2048,
            freed: false,
            once: true,
            tag: None,
        },
    ]
}

/// heapdelta's size class for a request of `size` bytes (enough of it for the demo's sizes).
fn class_of(size: u64) -> u64 {
    if size <= 512 {
        size.div_ceil(16) * 16
    } else {
        size.next_power_of_two()
    }
}

#[derive(Default, Clone, Copy)]
struct Counts {
    alloc_blocks: u64,
    alloc_bytes: u64,
    free_blocks: u64,
    free_bytes: u64,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.alloc_blocks += o.alloc_blocks;
        self.alloc_bytes += o.alloc_bytes;
        self.free_blocks += o.free_blocks;
        self.free_bytes += o.free_bytes;
    }
    fn json(self) -> Value {
        json!({
            "alloc_blocks": self.alloc_blocks,
            "alloc_bytes": self.alloc_bytes,
            "free_blocks": self.free_blocks,
            "free_bytes": self.free_bytes,
        })
    }
}

/// A site's counts (whole blocks) after `steps` steps.
fn counts_after(s: &DemoSite, steps: u64) -> Counts {
    let times = if s.once { 1 } else { steps };
    let blocks = s.blocks * times;
    let bytes = blocks * s.size;
    Counts {
        alloc_blocks: blocks,
        alloc_bytes: bytes,
        free_blocks: if s.freed { blocks } else { 0 },
        free_bytes: if s.freed { bytes } else { 0 },
    }
}

/// The snapshot taken at the checkpoint after `steps` steps (0: `start`).
pub fn snapshot(steps: u64) -> Value {
    let sites = sites();
    let mut all = Counts::default();
    let mut young = (0, 0);
    let mut classes: Vec<(u64, Counts)> = Vec::new();
    let mut tags: Vec<(&str, Counts)> = Vec::new();
    let mut site_values = Vec::new();
    for (i, s) in sites.iter().enumerate() {
        let c = counts_after(s, steps);
        all.add(c);
        young.0 += c.free_blocks;
        young.1 += c.free_bytes;
        let class = class_of(s.size);
        match classes.iter_mut().find(|(size, _)| *size == class) {
            Some((_, k)) => k.add(c),
            None => classes.push((class, c)),
        }
        if let Some(tag) = s.tag {
            tags.push((tag, c));
        }
        let mut v = Counts {
            alloc_blocks: c.alloc_blocks * UNIT,
            free_blocks: c.free_blocks * UNIT,
            ..c
        }
        .json();
        v["id"] = json!(i + 1);
        v["site"] = serde_json::to_value(&s.site).expect("a Site serialises");
        v["young_free"] = json!([c.free_blocks * UNIT, c.free_bytes]);
        site_values.push(v);
    }
    classes.sort_by_key(|(size, _)| *size);
    let live_bytes = all.alloc_bytes - all.free_bytes;
    let live_blocks = all.alloc_blocks - all.free_blocks;
    let transient = if steps > 0 {
        (210, 200 * 24 + 10 * 32)
    } else {
        (0, 0)
    };
    let label = if steps == 0 {
        "start".to_string()
    } else {
        format!("step {steps}")
    };
    json!({
        "label": label,
        "epoch": steps,
        "checkpoint": true,
        "run": 12345,
        "seconds": 0.25 + steps as f64 * 0.5,
        "totals": {
            "live_bytes": live_bytes,
            "live_blocks": live_blocks,
            "peak_bytes": live_bytes + transient.1,
            "peak_blocks": live_blocks + transient.0,
            "total_bytes": all.alloc_bytes,
            "total_blocks": all.alloc_blocks,
        },
        "young_free": [young.0, young.1],
        "classes": classes.iter().map(|(size, c)| {
            let mut v = c.json();
            v["size"] = json!(size);
            v
        }).collect::<Vec<_>>(),
        "tags": tags.iter().map(|(tag, c)| {
            let mut v = c.json();
            v["tag"] = json!(tag);
            v
        }).collect::<Vec<_>>(),
        "sites": site_values,
        "pool": null,
    })
}

/// The last checkpoint as a snapshot file.
pub fn snapshot_file() -> String {
    snapshot_file_at(STEPS)
}

/// The checkpoint after `steps` steps as a snapshot file.
pub fn snapshot_file_at(steps: u64) -> String {
    snapshot_file_of(snapshot(steps))
}

/// Every checkpoint (`start`, `step 1` … `step 4`) as a timeline file.
pub fn timeline_file() -> String {
    timeline_file_of((0..=STEPS).map(snapshot).collect())
}

/// Halves the counts of the top site of `snapshot` (as `snapshot` gives it) and returns a copy
/// of it with those halves, for a test to give other frames (or another type) and add: the sites
/// then still count what the totals do, as two paths to one allocation would.
pub fn split_top_site(snapshot: &mut Value) -> Value {
    let top = &mut snapshot["sites"][0];
    let half = |v: &Value| {
        let n = v.as_u64().expect("a count");
        assert_eq!(n % 2, 0, "the top site's counts are even");
        json!(n / 2)
    };
    for field in ["alloc_blocks", "alloc_bytes", "free_blocks", "free_bytes"] {
        top[field] = half(&top[field]);
    }
    for i in 0..2 {
        top["young_free"][i] = half(&top["young_free"][i]);
    }
    top.clone()
}

/// A snapshot (as `snapshot` gives, perhaps edited) as a snapshot file.
pub fn snapshot_file_of(snapshot: Value) -> String {
    json!({"heapdelta_format": 1, "kind": "snapshot", "snapshot": snapshot}).to_string()
}

/// Checkpoints (as `snapshot` gives them, perhaps edited) as a timeline file.
pub fn timeline_file_of(checkpoints: Vec<Value>) -> String {
    json!({"heapdelta_format": 1, "kind": "timeline", "checkpoints": checkpoints}).to_string()
}

/// A fresh directory for one test's files, removed with everything in it when dropped.
pub struct TempDir(tempfile::TempDir);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        self.0.path()
    }
}

/// A fresh directory for one test's files (named after the test, for when one is kept by a crash).
pub fn temp_dir(test: &str) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("heapdelta-{test}-"))
        .tempdir()
        .expect("create a temporary directory");
    TempDir(dir)
}
