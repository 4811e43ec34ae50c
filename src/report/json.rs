//! heapdelta's own JSON files: a snapshot or a timeline in a versioned envelope.
//!
//! ```text
//! {"heapdelta_format": 1, "kind": "snapshot", "snapshot": {...}}
//! {"heapdelta_format": 5, "kind": "timeline",
//!  "frames": [{"function": ..., "file": ..., "line": ...}, ...],
//!  "sites": [{"id": 1, "frames": [0, 4, 5], "type_name": ...}, ...],
//!  "checkpoints": [{..., "classes": [...], "sites": [...]},
//!                  {..., "classes": {"changed": [...]}, "sites": {"changed": [...]}}, ...]}
//! ```
//!
//! Sites are written with their resolved frames, so a file read back by another process diffs by
//! call site, not by the writing process's interned ids. A timeline lists each frame once, in
//! `frames`, and each site once, in `sites`, as the places of its frames in that list; its
//! checkpoints name the sites by id. A checkpoint's site keeps its frames inline only when another
//! site already holds its id in the table (checkpoints of another run). Version 4 timelines, still
//! read, wrote each site's frames in the site table, `{"id": 1, "site": {"frames": [...], ...}}`,
//! so the outer frames that call paths share (a runtime's, a thread pool's) were repeated in
//! each. A
//! checkpoint of the same run as the one before it lists only the sites whose entries changed since
//! (`SiteList::changes_since`); reading puts the others back from the checkpoint before
//! (`SiteList::overlay_on`), sharing their chunks with it; its size classes likewise
//! (`ClassList`). Version 1 timelines, still read, had no table: every checkpoint carried every
//! site's frames, so a long run's timeline repeated them thousands of times; version 2 ones listed
//! every site at every checkpoint, and version 3 ones every size class. Snapshot files are
//! unchanged since version 1 and are still written as such, so older heapdelta releases read them.

use std::collections::btree_map::{BTreeMap, Entry};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;

use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::callsite::{self, Frame, Site, SiteId};
use crate::diff::Timeline;
use crate::error::Error;
use crate::report::write_file;
use crate::sizeclass;
use crate::snapshot::{ChunkMemo, ClassList, SiteCount, SiteList, Snapshot};
use crate::stats::{self, Counts};
use crate::PoolStats;

/// The newest file format version: this build writes timelines in it and reads every version up
/// to it.
pub(crate) const FORMAT_VERSION: u64 = 5;
/// The first version whose timelines list each frame once, in a table of their own.
const FRAME_TABLE_FORMAT: u64 = 5;
/// The version snapshot files are written in: their shape has not changed since.
const SNAPSHOT_FORMAT: u64 = 1;

const SNAPSHOT: &str = "snapshot";
const TIMELINE: &str = "timeline";

#[derive(Serialize)]
struct SnapshotFile<'a> {
    heapdelta_format: u64,
    kind: &'static str,
    snapshot: &'a Snapshot,
}

#[derive(Serialize)]
struct TimelineFile<'a> {
    heapdelta_format: u64,
    kind: &'static str,
    frames: Vec<&'a Frame>,
    sites: Vec<SiteRow<'a>>,
    checkpoints: &'a [Snapshot],
}

/// One call site of a timeline's table, as `site_table` makes it.
struct SiteEntry {
    id: SiteId,
    site: Site,
}

/// One call site of a timeline file's table: the places of its frames in the file's `frames`,
/// innermost first, and its type when known.
#[derive(Serialize)]
struct SiteRow<'a> {
    id: SiteId,
    frames: Vec<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    type_name: Option<&'a str>,
}

/// One call site of a timeline file's table as read: `site`, with its frames, in versions 2 to
/// 4; `frames`, places in the file's frame table, and `type_name` from version 5 on.
#[derive(Deserialize)]
struct TableEntry {
    id: SiteId,
    #[serde(default)]
    site: Option<Site>,
    #[serde(default)]
    frames: Option<Vec<u32>>,
    #[serde(default)]
    type_name: Option<String>,
}

#[derive(Deserialize)]
struct SnapshotBody {
    snapshot: Snapshot,
}

#[derive(Deserialize)]
struct TimelineBody {
    #[serde(default)]
    frames: Vec<Frame>,
    #[serde(default)]
    sites: Vec<TableEntry>,
    #[serde(deserialize_with = "shared_checkpoints")]
    checkpoints: Vec<Snapshot>,
}

/// A timeline's checkpoints, each sharing with the one before it the chunks of sites that did not
/// change between them as it is read, so that reading a long timeline never holds it unshared.
fn shared_checkpoints<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Snapshot>, D::Error> {
    struct Checkpoints;
    impl<'de> Visitor<'de> for Checkpoints {
        type Value = Vec<Snapshot>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of checkpoints")
        }
        fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Vec<Snapshot>, S::Error> {
            let mut checkpoints: Vec<Snapshot> = Vec::new();
            while let Some(mut s) = seq.next_element::<Snapshot>()? {
                for (what, changes_only) in [
                    ("sites", s.sites.is_changes_only()),
                    ("size classes", s.classes.is_changes_only()),
                ] {
                    match checkpoints.last() {
                        Some(prev) if changes_only && prev.run != s.run => {
                            return Err(de::Error::custom(format_args!(
                                "{} lists only the {what} that changed since the one before, \
                                 which is of another run",
                                checkpoint_named(checkpoints.len(), &s)
                            )))
                        }
                        None if changes_only => {
                            return Err(de::Error::custom(format_args!(
                                "the first checkpoint lists only the {what} that changed, since \
                                 none"
                            )))
                        }
                        _ => {}
                    }
                }
                // Before the merge: a file that named a new bogus class at each checkpoint made
                // each hold one more, the whole timeline quadratic in them (a review: 1.29 GB
                // for a 4 MB file), before any check.
                check_classes(&s.classes).map_err(|e| {
                    let named = checkpoint_named(checkpoints.len(), &s);
                    de::Error::custom(format_args!("{named}: {e}"))
                })?;
                if let Some(prev) = checkpoints.last() {
                    if s.sites.is_changes_only() {
                        s.sites = std::mem::take(&mut s.sites).overlay_on(&prev.sites);
                    } else {
                        s.sites.share_with(&prev.sites);
                    }
                    s.classes = std::mem::take(&mut s.classes).overlay_on(&prev.classes);
                    s.classes.share_with(&prev.classes);
                }
                checkpoints.push(s);
            }
            Ok(checkpoints)
        }
    }
    deserializer.deserialize_seq(Checkpoints)
}

/// The contents of a heapdelta JSON file of either kind.
#[derive(Debug)]
pub(crate) enum Contents {
    Snapshot(Box<Snapshot>),
    Timeline(Timeline),
}

fn to_io(e: serde_json::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn format_error(e: serde_json::Error) -> Error {
    use serde_json::error::Category;
    let what = match e.classify() {
        Category::Eof => "the file is truncated",
        Category::Syntax => "malformed JSON",
        Category::Data => "unexpected content",
        Category::Io => return Error::Io(e.into()),
    };
    Error::Format(format!("{what} ({e})"))
}

/// A file's envelope: its format version and kind, whatever else it holds (skipped unread).
#[derive(Default)]
struct Envelope {
    version: Option<Value>,
    kind: Option<Value>,
}

impl<'de> Deserialize<'de> for Envelope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Envelope, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Envelope;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object with a \"heapdelta_format\" field")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Envelope, M::Error> {
                let mut e = Envelope::default();
                while let Some(key) = map.next_key::<String>()? {
                    let field = match key.as_str() {
                        "heapdelta_format" => &mut e.version,
                        "kind" => &mut e.kind,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    // As the body's fields are read: a field given twice is an error.
                    if field.replace(map.next_value()?).is_some() {
                        return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                    }
                }
                Ok(e)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// Reads any heapdelta JSON file: checks the envelope first, so a file from a newer heapdelta is
/// reported as such even when its contents changed shape. The file is read twice, as text, never
/// as a tree of JSON values (a long timeline's tree would take several times its size).
pub(crate) fn read_contents(mut r: impl Read) -> Result<Contents, Error> {
    crate::thread::untracked(|| {
        let mut text = Vec::new();
        // Up to the first byte that is not whitespace, then the rest only if it can open a JSON
        // value: binary input (`/dev/zero`, which never ends) is told from its first byte.
        let first = loop {
            let start = text.len();
            let n = r.by_ref().take(1 << 16).read_to_end(&mut text)?;
            if let Some(b) = text[start..].iter().find(|b| !b.is_ascii_whitespace()) {
                break Some(*b);
            }
            if n == 0 {
                break None;
            }
        };
        let opens_a_value = |b: u8| b"{[\"-tfn".contains(&b) || b.is_ascii_digit();
        if first.is_some_and(opens_a_value) {
            read_one_value(&mut text, r)?;
        }
        if text.starts_with(&[0x1f, 0x8b]) {
            return Err(Error::Format(
                "a gzip-compressed file (a pprof profile?), not heapdelta JSON: heapdelta reads \
                 the files `write_json` and `HEAPDELTA=report=` write"
                    .to_string(),
            ));
        }
        if text.iter().all(u8::is_ascii_whitespace) {
            // Not "truncated": nothing was written at all (a run that crashed before its report,
            // a file made by a shell's redirection).
            return Err(Error::Format("the file is empty".to_string()));
        }
        let envelope: Envelope = serde_json::from_slice(&text).map_err(|e| {
            let first = text.iter().find(|b| !b.is_ascii_whitespace());
            match (e.classify(), first) {
                (serde_json::error::Category::Data, Some(b)) if *b != b'{' => Error::Format(
                    "expected a JSON object with a \"heapdelta_format\" field".to_string(),
                ),
                _ => format_error(e),
            }
        })?;
        let version = match envelope.version {
            None => {
                return Err(Error::Format(
                    "no \"heapdelta_format\" field: not a heapdelta JSON file".to_string(),
                ))
            }
            Some(v) => v.as_u64().ok_or_else(|| {
                Error::Format(format!(
                    "\"heapdelta_format\" must be a whole number, found {v}"
                ))
            })?,
        };
        if version > FORMAT_VERSION {
            return Err(Error::Version {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if version == 0 {
            return Err(Error::Format(
                "\"heapdelta_format\" 0 does not exist".to_string(),
            ));
        }
        match envelope.kind.as_ref().and_then(Value::as_str) {
            Some(SNAPSHOT) => {
                let body: SnapshotBody = serde_json::from_slice(&text).map_err(format_error)?;
                for (what, changes_only) in [
                    ("sites", body.snapshot.sites.is_changes_only()),
                    ("size classes", body.snapshot.classes.is_changes_only()),
                ] {
                    if changes_only {
                        return Err(Error::Format(format!(
                            "a snapshot lists only the {what} that changed, since none"
                        )));
                    }
                }
                check_snapshot(&body.snapshot).map_err(Error::Format)?;
                Ok(Contents::Snapshot(Box::new(body.snapshot)))
            }
            Some(TIMELINE) => {
                let body: TimelineBody = serde_json::from_slice(&text).map_err(format_error)?;
                let checkpoints = with_site_table(body, version).map_err(Error::Format)?;
                check_timeline(&checkpoints).map_err(Error::Format)?;
                Ok(Contents::Timeline(Timeline::new(checkpoints)))
            }
            Some(other) => Err(Error::Format(format!(
                "unknown kind {other:?} (expected \"snapshot\" or \"timeline\")"
            ))),
            None => Err(Error::Format(
                "no \"kind\" field (expected \"snapshot\" or \"timeline\")".to_string(),
            )),
        }
    })
}

/// Reads from `r` the rest of the JSON text `text` begins, and stops soon after its syntax breaks:
/// input that opens like JSON and then is not (`{` and then `/dev/zero`, or a stream that never
/// ends) is refused once it is not, where it was read whole first (a user trial's FIFO took
/// 2.9 GB to be told that column 2 was wrong). It reads in rounds, each three times all read
/// before (so at most about four times what the broken part needs), and checks the syntax of all
/// of it after each. An error in the last bytes read is not a break: a number cut after its `.`,
/// `e` or `-` reads as invalid, not as cut (a review: a valid file was refused when a round ended
/// there). Only an I/O error is returned: what is wrong with the text is the parse's to say.
/// Endless whitespace after a value, or an endless string, is still read for as long as it comes.
fn read_one_value(text: &mut Vec<u8>, mut r: impl Read) -> io::Result<()> {
    /// Bytes at the end of a round whose error may be the cut's.
    const CUT_MARGIN: usize = 64;
    loop {
        let round = (3 * text.len()).max(1 << 16) as u64;
        if r.by_ref().take(round).read_to_end(text)? < round as usize {
            return Ok(());
        }
        let mut json = serde_json::Deserializer::from_slice(text);
        if let Err(e) = IgnoredAny::deserialize(&mut json).and_then(|_| json.end()) {
            let at = error_offset(text, e.line(), e.column());
            // Broken before the end of what was read: nothing further mends it.
            if !e.is_eof() && at + CUT_MARGIN < text.len() {
                return Ok(());
            }
        }
    }
}

/// The byte offset in `text` of serde_json's `line` and `column` (both counted from 1).
fn error_offset(text: &[u8], line: usize, column: usize) -> usize {
    let line_start = match line {
        0 | 1 => 0,
        n => text
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(n - 2)
            .map_or(text.len(), |(i, _)| i + 1),
    };
    line_start + column.saturating_sub(1)
}

/// Checks what heapdelta's counters guarantee of any snapshot it wrote: nothing frees more than
/// it allocated, and the live figures are within the totals and the peak. A file that breaks this
/// was edited or damaged, and its figures (differences of counters) would be nonsense.
fn check_snapshot(s: &Snapshot) -> Result<(), String> {
    check_snapshot_with(s, &s.sites.iter().collect::<Vec<_>>())
}

/// `check_snapshot`, of the sites `sites` only (all of them, or those of a checkpoint that the
/// one before it did not share).
fn check_snapshot_with(s: &Snapshot, sites: &[&SiteCount]) -> Result<(), String> {
    let t = &s.totals;
    if t.live_bytes > t.total_bytes || t.live_blocks > t.total_blocks {
        return Err(format!(
            "inconsistent totals: {} live bytes in {} blocks, of {} bytes in {} blocks ever allocated",
            t.live_bytes, t.live_blocks, t.total_bytes, t.total_blocks
        ));
    }
    if t.live_bytes > t.peak_bytes {
        return Err(format!(
            "inconsistent totals: {} live bytes above the peak of {}",
            t.live_bytes, t.peak_bytes
        ));
    }
    // (Name, counters, and the count of one block in them: sites count in `UNIT`s.) Named only
    // when an error says it.
    let groups = s
        .classes
        .iter()
        .map(|c| (Group::Class(c.size), &c.counts, 1))
        .chain(s.tags.iter().map(|t| (Group::Tag(&t.tag), &t.counts, 1)))
        .chain(
            sites
                .iter()
                .map(|c| (Group::Site(c.id), &c.counts, stats::UNIT)),
        );
    for (name, c, unit) in groups {
        if c.free_blocks > c.alloc_blocks || c.free_bytes > c.alloc_bytes {
            return Err(format!(
                "inconsistent counters: {name} frees {} blocks ({} bytes) of {} allocated ({} bytes)",
                in_blocks(c.free_blocks, unit),
                c.free_bytes,
                in_blocks(c.alloc_blocks, unit),
                c.alloc_bytes
            ));
        }
        if c.alloc_blocks > MAX_COUNT || c.alloc_bytes > MAX_COUNT {
            return Err(format!(
                "{name} counts more than {MAX_COUNT} allocations or bytes"
            ));
        }
    }
    if [t.total_bytes, t.total_blocks, t.peak_bytes, t.peak_blocks]
        .iter()
        .any(|&n| n > MAX_COUNT)
    {
        return Err(format!("totals above {MAX_COUNT}"));
    }
    for c in sites {
        if c.young_free.0 > c.counts.free_blocks || c.young_free.1 > c.counts.free_bytes {
            return Err(format!(
                "inconsistent counters: site {} has more young frees than frees",
                c.id
            ));
        }
    }
    if !(s.seconds.is_finite() && s.seconds >= 0.0) {
        return Err(format!("{} seconds since the start", s.seconds));
    }
    check_classes(&s.classes)?;
    if let Some(p) = &s.pool {
        check_pool(p)?;
    }
    repeated(s.tags.iter().map(|t| t.tag.as_str()), "tag")?;
    repeated(sites.iter().map(|c| c.id), "site")?;
    check_sums(s)
}

/// A group of counters a check names: a size class, a scope tag or a call site.
enum Group<'a> {
    Class(u64),
    Tag(&'a str),
    Site(SiteId),
}

impl fmt::Display for Group<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Group::Class(size) => write!(f, "size class {size} B"),
            Group::Tag(tag) => write!(f, "tag {tag:?}"),
            Group::Site(id) => write!(f, "site {id}"),
        }
    }
}

/// Allocations, bytes allocated, frees and bytes freed added up over `counts`, without overflow.
fn sums<'a>(counts: impl Iterator<Item = &'a Counts>) -> [u128; 4] {
    counts.fold([0; 4], |[a, b, c, d], n| {
        [
            a + u128::from(n.alloc_blocks),
            b + u128::from(n.alloc_bytes),
            c + u128::from(n.free_blocks),
            d + u128::from(n.free_bytes),
        ]
    })
}

/// Checks that the totals are the size classes' sums, which is how a snapshot takes them. (The
/// other groups are read after the classes, a few loads apart, so with other threads allocating
/// meanwhile, the call sites, the scope tags and the frees of young blocks can count a little more
/// than the classes: they are not checked against them. Each group's counts are at most
/// `MAX_COUNT`, checked first, so the sums of a few billion classes fit.)
fn check_sums(s: &Snapshot) -> Result<(), String> {
    let t = &s.totals;
    let [allocs, bytes, frees, freed] = sums(s.classes.iter().map(|c| &c.counts));
    let totals = [t.total_blocks, t.total_bytes, t.live_blocks, t.live_bytes].map(u128::from);
    if totals != [allocs, bytes, allocs - frees, bytes - freed] {
        return Err(format!(
            "inconsistent totals: {} blocks ({} bytes) allocated, {} ({} bytes) live, but the \
             size classes add up to {allocs} blocks ({bytes} bytes) allocated, {} ({} bytes) live",
            t.total_blocks,
            t.total_bytes,
            t.live_blocks,
            t.live_bytes,
            allocs - frees,
            bytes - freed
        ));
    }
    Ok(())
}

/// Checks that a list of classes, whole or of changes, names each size class at most once: so a
/// list of changes merged onto the checkpoint before (as a timeline is read) holds at most every
/// class, whatever the file.
fn check_classes(classes: &ClassList) -> Result<(), String> {
    for c in classes.iter() {
        check_class(c.size)?;
    }
    repeated(classes.iter().map(|c| c.size), "size class")
}

/// Checks that `size` names a size class. (Not that its counts are of requests in it: above
/// 4 KiB a class's blocks and bytes are two counters, read a moment apart, so a snapshot taken
/// while other threads allocate can hold one more block than its bytes (a review saw 1,366 of
/// 20,000 such snapshots); for the same reason, call sites and tags are not bounded by the totals,
/// which are read before them.)
fn check_class(size: u64) -> Result<(), String> {
    if (0..sizeclass::NUM_CLASSES).any(|i| sizeclass::class_size(i) == size) {
        Ok(())
    } else {
        Err(format!("{size} B is not a size class"))
    }
}

/// Checks what a pool's statistics guarantee however they were read: the bytes in use are those of
/// the classes' blocks, and the bytes reserved are whole arenas.
fn check_pool(p: &PoolStats) -> Result<(), String> {
    let in_classes = p.classes.iter().try_fold(0u64, |sum, c| {
        c.blocks_in_use
            .checked_mul(c.size as u64)
            .and_then(|b| sum.checked_add(b))
    });
    if in_classes != Some(p.bytes_in_use) {
        return Err(format!(
            "inconsistent pool statistics: {} bytes in use, but the size classes hold {}",
            p.bytes_in_use,
            in_classes.map_or_else(|| "more than 2^64".to_string(), |b| b.to_string())
        ));
    }
    let counts = [
        p.arenas_allocated_total,
        p.arenas_highwater,
        p.unused_pools,
        p.large_blocks,
        p.large_bytes,
    ];
    if counts.iter().any(|&n| n > MAX_COUNT) {
        return Err(format!("pool statistics above {MAX_COUNT}"));
    }
    // (Taken so, each read after the live count and at least it.)
    if p.arenas_highwater < p.arenas_current
        || p.arenas_allocated_total.checked_sub(p.arenas_current) != Some(p.arenas_reclaimed)
    {
        return Err(format!(
            "inconsistent pool statistics: {} arenas live, {} at most, {} ever allocated and {} \
             given back",
            p.arenas_current, p.arenas_highwater, p.arenas_allocated_total, p.arenas_reclaimed
        ));
    }
    // (`PoolConfig` arenas are powers of two from 64 KiB to 2 GiB.)
    let arena_size = |size: u64| size.is_power_of_two() && (1 << 16..=1 << 31).contains(&size);
    let whole_arenas = match p.arenas_current {
        0 => p.bytes_reserved == 0,
        n => p.bytes_reserved.is_multiple_of(n) && arena_size(p.bytes_reserved / n),
    };
    if !whole_arenas {
        return Err(format!(
            "inconsistent pool statistics: {} bytes reserved in {} arenas, which are not whole \
             arenas of a pool's size",
            p.bytes_reserved, p.arenas_current
        ));
    }
    Ok(())
}

/// A block count in `unit`s as whole blocks, with a fraction where there is one (sampled sites).
fn in_blocks(count: u64, unit: u64) -> String {
    match count % unit {
        0 => (count / unit).to_string(),
        _ => format!("{:.2}", count as f64 / unit as f64),
    }
}

/// The largest count a file may hold: live figures are differences of counts, as `i64`.
const MAX_COUNT: u64 = i64::MAX as u64;

/// An error naming the first key that `keys` holds twice (each group is listed once per key).
fn repeated<K: Eq + std::hash::Hash + std::fmt::Debug>(
    keys: impl Iterator<Item = K>,
    what: &str,
) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for k in keys {
        if let Some(k) = seen.replace(k) {
            return Err(format!("{what} {k:?} is listed twice"));
        }
    }
    Ok(())
}

/// The table of every site's frames (see the module docs), each site once, by id, and the
/// checkpoints as they are written: a site whose frames the table holds under its id is written
/// by id alone. Checkpoints that share a chunk of sites share it here too, so writing a long
/// timeline copies only its chunks that change.
fn site_table(checkpoints: &[Snapshot]) -> (Vec<SiteEntry>, Vec<Snapshot>) {
    let here = crate::checkpoint::run_id();
    let mut table: BTreeMap<SiteId, Site> = BTreeMap::new();
    // The ids whose table entry is this run's own site: its sites not yet resolved match them.
    let mut resolved_here: HashSet<SiteId> = HashSet::new();
    let mut memo = ChunkMemo::new();
    let written = crate::thread::untracked(|| {
        checkpoints
            .iter()
            .map(|s| {
                let this_run = s.run == here;
                let sites = s.sites.map_chunks(&mut memo, this_run, |chunk| {
                    let mut out: Option<Vec<SiteCount>> = None;
                    for (i, c) in chunk.iter().enumerate() {
                        let inline = match (&c.site, this_run) {
                            (None, true) if resolved_here.contains(&c.id) => None,
                            (given, _) => {
                                let site = match (given, this_run) {
                                    (Some(site), _) => site.clone(),
                                    (None, true) => callsite::resolve(c.id),
                                    // Another run's site without frames (from a version 1
                                    // file): the unknown site, which is what reports make of
                                    // it, so that the file says so and reads back.
                                    (None, false) => Site::unknown(),
                                };
                                match table.entry(c.id) {
                                    Entry::Occupied(e) if *e.get() != site => Some(site),
                                    entry => {
                                        entry.or_insert(site);
                                        if given.is_none() && this_run {
                                            resolved_here.insert(c.id);
                                        }
                                        None
                                    }
                                }
                            }
                        };
                        if inline != c.site {
                            out.get_or_insert_with(|| chunk.to_vec())[i].site = inline;
                        }
                    }
                    out
                });
                // A copy of the list costs a count per chunk.
                let mut written = s.clone();
                written.sites = sites;
                written
            })
            .collect::<Vec<Snapshot>>()
    });
    let written = changes_only(written);
    let table = table
        .into_iter()
        .map(|(id, site)| SiteEntry { id, site })
        .collect();
    (table, written)
}

/// The checkpoints as a timeline file holds them: each of the same run as the one before it
/// lists only the sites whose entries changed since (sites are never dropped within a run, but
/// one that was is listed whole).
fn changes_only(mut written: Vec<Snapshot>) -> Vec<Snapshot> {
    type Changes = (Option<SiteList>, Option<ClassList>);
    let changes: Vec<Changes> = crate::thread::untracked(|| {
        written
            .windows(2)
            .map(|w| match w[0].run == w[1].run {
                true => (
                    w[1].sites.changes_since(&w[0].sites),
                    w[1].classes.changes_since(&w[0].classes),
                ),
                false => (None, None),
            })
            .collect()
    });
    for (s, (sites, classes)) in written.iter_mut().skip(1).zip(changes) {
        if let Some(sites) = sites {
            s.sites = sites;
        }
        if let Some(classes) = classes {
            s.classes = classes;
        }
    }
    written
}

/// A timeline file's checkpoints with the frames of the table's sites put back in (a version 1
/// file has no table and every frame inline); an error if the table lists an id twice, or, from
/// version 2 on, if a site has neither frames of its own nor an entry in the table (a damaged
/// file, whose sites would otherwise all read as unknown). Checkpoints that share a chunk of sites
/// (see `shared_checkpoints`) share it filled in too.
fn with_site_table(body: TimelineBody, version: u64) -> Result<Vec<Snapshot>, String> {
    repeated(body.sites.iter().map(|e| e.id), "the site table's site")?;
    let frames = body.frames;
    check_frames_named(&body.sites, &frames)?;
    let table = body
        .sites
        .into_iter()
        .map(|e| table_site(e, &frames, version))
        .collect::<Result<BTreeMap<SiteId, Site>, String>>()?;
    let mut checkpoints = body.checkpoints;
    let mut memo = ChunkMemo::new();
    let mut missing = None;
    for (i, s) in checkpoints.iter_mut().enumerate() {
        s.sites = s.sites.map_chunks(&mut memo, false, |chunk| {
            let mut out: Option<Vec<SiteCount>> = None;
            for (j, c) in chunk.iter().enumerate() {
                if c.site.is_some() {
                    continue;
                }
                match table.get(&c.id) {
                    Some(site) => {
                        out.get_or_insert_with(|| chunk.to_vec())[j].site = Some(site.clone());
                    }
                    None => {
                        missing.get_or_insert(c.id);
                    }
                }
            }
            out
        });
        if let (Some(id), 2..) = (missing, version) {
            return Err(format!(
                "{}: site {id} has no frames and is not in the site table",
                checkpoint_named(i, s)
            ));
        }
    }
    Ok(checkpoints)
}

/// A site of a timeline file's table with its frames: given whole up to version 4, as places in
/// the file's frame table (`frames`) from version 5 on; an error when the entry lacks them, or a
/// place is not in the table.
fn table_site(e: TableEntry, frames: &[Frame], version: u64) -> Result<(SiteId, Site), String> {
    let id = e.id;
    if version < FRAME_TABLE_FORMAT {
        let site = e.site.ok_or_else(|| {
            format!(
                "site {id} of the site table has no \"site\" (format {version} gives each \
                 site its frames there; format {FRAME_TABLE_FORMAT} on, places in \"frames\")"
            )
        })?;
        return Ok((id, site));
    }
    let places = e.frames.ok_or_else(|| {
        format!(
            "site {id} of the site table has no \"frames\" (format {version} gives each site \
             the places of its frames in the file's \"frames\" table)"
        )
    })?;
    let site_frames = places
        .iter()
        .map(|&place| {
            frames.get(place as usize).cloned().ok_or_else(|| {
                format!(
                    "site {id} names frame {place}, and the frame table holds {}",
                    frames.len()
                )
            })
        })
        .collect::<Result<Vec<Frame>, String>>()?;
    Ok((id, Site::with_type(site_frames, e.type_name)))
}

/// At most this many times the bytes of a file's frame table and of its sites' places in it may
/// the frames its sites name take once read (each site holds its own copy of its frames): far
/// above what files heapdelta writes ask for (a rayon program's, about 50 times), far below what
/// a hostile file could (a review: a 115 KB file naming one 100 KB frame 5,000 times took 491 MB
/// to read, and 3 MB could ask for a terabyte).
const FRAMES_READ_PER_BYTE: usize = 256;

/// What the frames of a file's sites may take once read whatever the file: a file of a few sites
/// with long names is within it.
const FRAMES_READ_FLOOR: usize = 64 << 20;

/// Refuses a site table whose rows (from format 5 on) name frames that would take more memory
/// once read than `FRAMES_READ_PER_BYTE` times what the file gives them, past
/// `FRAMES_READ_FLOOR`; checked before any is read.
fn check_frames_named(rows: &[TableEntry], frames: &[Frame]) -> Result<(), String> {
    let size = |f: &Frame| {
        std::mem::size_of::<Frame>() + f.function.len() + f.file.as_ref().map_or(0, String::len)
    };
    let sizes: Vec<usize> = frames.iter().map(size).collect();
    let places = rows.iter().flat_map(|e| e.frames.iter().flatten());
    let named = places
        .clone()
        .map(|&p| sizes.get(p as usize).copied().unwrap_or(0))
        .fold(0usize, usize::saturating_add);
    let given = sizes.iter().sum::<usize>() + places.count() * std::mem::size_of::<u32>();
    let allowed = given
        .saturating_mul(FRAMES_READ_PER_BYTE)
        .max(FRAMES_READ_FLOOR);
    if named > allowed {
        return Err(format!(
            "the site table's sites name {} of frames from a frame table of {}: more than a \
             file heapdelta writes asks for (a damaged file)",
            crate::report::text::bytes(named as u64),
            crate::report::text::bytes(sizes.iter().sum::<usize>() as u64)
        ));
    }
    Ok(())
}

/// The file's frame table and site rows for `sites`: each distinct frame once, in the order the
/// sites first name them.
fn frame_table(sites: &[SiteEntry]) -> (Vec<&Frame>, Vec<SiteRow<'_>>) {
    let mut frames: Vec<&Frame> = Vec::new();
    let mut place: HashMap<&Frame, u32> = HashMap::new();
    let mut rows = Vec::with_capacity(sites.len());
    for e in sites {
        let mut row = Vec::with_capacity(e.site.frames().len());
        for f in e.site.frames() {
            let at = *place.entry(f).or_insert_with(|| {
                frames.push(f);
                // A table of more than 4 billion frames is beyond any file this writes.
                u32::try_from(frames.len() - 1).unwrap_or(u32::MAX)
            });
            row.push(at);
        }
        rows.push(SiteRow {
            id: e.id,
            frames: row,
            type_name: e.site.known_type(),
        });
    }
    (frames, rows)
}

/// `check_snapshot` for each checkpoint. (Their order is not checked: checkpoints taken by two
/// threads at once can be recorded in either order, with counters read a moment apart.)
fn check_timeline(checkpoints: &[Snapshot]) -> Result<(), String> {
    let mut earlier: Option<&Snapshot> = None;
    for (i, s) in checkpoints.iter().enumerate() {
        // A site in a chunk the checkpoint shares with the one before was checked there: a
        // fuzzing run's file of 20,000 sites over 8,000 checkpoints, each listing what changed,
        // took 22–34 s to read when every checkpoint checked every site.
        let sites: Vec<&SiteCount> = match earlier {
            Some(e) => (s.sites.unshared_with(&e.sites).into_iter())
                .filter_map(|(_, _, new)| new)
                .collect(),
            None => s.sites.iter().collect(),
        };
        check_snapshot_with(s, &sites).map_err(|e| format!("{}: {e}", checkpoint_named(i, s)))?;
        earlier = Some(s);
    }
    Ok(())
}

/// How an error names the checkpoint at `index` of a file: counted from 1, with its label when it
/// has one (`checkpoint 6 ("step 5")`), so that it can be found in the file and in reports.
fn checkpoint_named(index: usize, s: &Snapshot) -> String {
    match &s.label {
        Some(label) => format!("checkpoint {} ({label:?})", index + 1),
        None => format!("checkpoint {}", index + 1),
    }
}

impl Snapshot {
    /// Writes the snapshot as heapdelta JSON to `path`, call sites resolved to their frames.
    /// [`read_json`](Snapshot::read_json) reads it back, in this process or another.
    ///
    /// ```
    /// let path = std::env::temp_dir().join("heapdelta-doc-snapshot.json");
    /// heapdelta::snapshot().write_json(&path)?;
    /// let back = heapdelta::Snapshot::read_json(&path)?;
    /// assert_eq!(back.label(), None);
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_json(&self, path: impl AsRef<Path>) -> io::Result<()> {
        write_file(path.as_ref(), |w| self.json_into(w))
    }

    /// Writes the snapshot as heapdelta JSON to `w` (see [`write_json`](Snapshot::write_json)).
    ///
    /// ```
    /// let mut out = Vec::new();
    /// heapdelta::snapshot().write_json_to(&mut out)?;
    /// assert!(out.starts_with(b"{\"heapdelta_format\":1"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_json_to(&self, w: impl Write) -> io::Result<()> {
        crate::report::write_for_program(w, |w| self.json_into(w))
    }

    /// The JSON file's bytes, made into `w` (in heapdelta's guard).
    fn json_into(&self, w: &mut Vec<u8>) -> io::Result<()> {
        let mut resolved = self.clone();
        resolved.resolve_sites();
        serde_json::to_writer(
            w,
            &SnapshotFile {
                heapdelta_format: SNAPSHOT_FORMAT,
                kind: SNAPSHOT,
                snapshot: &resolved,
            },
        )
        .map_err(to_io)
    }

    /// Reads a snapshot written by [`write_json`](Snapshot::write_json). A missing, truncated or
    /// malformed file, a timeline file, or one from a newer heapdelta is an [`Error`], never a
    /// panic.
    ///
    /// ```
    /// let err = heapdelta::Snapshot::read_json("no/such/file.json").unwrap_err();
    /// assert!(matches!(err, heapdelta::Error::Io(_)));
    /// ```
    pub fn read_json(path: impl AsRef<Path>) -> Result<Snapshot, Error> {
        // The file's buffer is heapdelta's too: not the program's memory.
        let path = path.as_ref();
        crate::thread::untracked(|| {
            let file = std::fs::File::open(path).map_err(|e| crate::report::naming(path, e))?;
            Snapshot::read_json_from(io::BufReader::new(file)).map_err(|e| in_file(path, e))
        })
    }

    /// Reads a snapshot from heapdelta JSON in `r` (see [`read_json`](Snapshot::read_json)).
    ///
    /// ```
    /// let err = heapdelta::Snapshot::read_json_from(&b"{\"heapdelta_format\": 9}"[..]).unwrap_err();
    /// assert!(matches!(err, heapdelta::Error::Version { found: 9, .. }));
    /// ```
    pub fn read_json_from(r: impl Read) -> Result<Snapshot, Error> {
        match read_contents(r)? {
            Contents::Snapshot(s) => Ok(*s),
            Contents::Timeline(_) => Err(Error::Format(
                "this is a timeline file, not a snapshot".to_string(),
            )),
        }
    }
}

/// `e`, an error reading the file `path`, naming it: a library user's message said what was
/// wrong but not in which file (a user trial).
fn in_file(path: &Path, e: Error) -> Error {
    match e {
        Error::Io(e) => Error::Io(crate::report::naming(path, e)),
        Error::Format(msg) => Error::Format(format!("{}: {msg}", path.display())),
        e => e,
    }
}

impl Timeline {
    /// Writes every checkpoint as heapdelta JSON to `path`, call sites resolved to their frames.
    ///
    /// ```
    /// heapdelta::checkpoint("loaded");
    /// let path = std::env::temp_dir().join("heapdelta-doc-timeline.json");
    /// heapdelta::timeline().write_json(&path)?;
    /// let back = heapdelta::Timeline::read_json(&path)?;
    /// assert!(back.find("loaded").is_ok());
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_json(&self, path: impl AsRef<Path>) -> io::Result<()> {
        write_file(path.as_ref(), |w| self.json_into(w))
    }

    /// Writes the timeline as heapdelta JSON to `w` (see [`write_json`](Timeline::write_json)).
    ///
    /// ```
    /// let mut out = Vec::new();
    /// heapdelta::timeline().write_json_to(&mut out)?;
    /// assert!(String::from_utf8_lossy(&out).contains("\"kind\":\"timeline\""));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_json_to(&self, w: impl Write) -> io::Result<()> {
        crate::report::write_for_program(w, |w| self.json_into(w))
    }

    /// The JSON file's bytes, made into `w` (in heapdelta's guard).
    pub(crate) fn json_into(&self, w: &mut Vec<u8>) -> io::Result<()> {
        let (sites, resolved) = site_table(&self.checkpoints);
        let (frames, sites) = frame_table(&sites);
        serde_json::to_writer(
            w,
            &TimelineFile {
                heapdelta_format: FORMAT_VERSION,
                kind: TIMELINE,
                frames,
                sites,
                checkpoints: &resolved,
            },
        )
        .map_err(to_io)
    }

    /// Reads a timeline written by [`write_json`](Timeline::write_json); errors as for
    /// [`Snapshot::read_json`].
    ///
    /// ```
    /// let err = heapdelta::Timeline::read_json("no/such/file.json").unwrap_err();
    /// assert!(err.to_string().contains("No such file"));
    /// ```
    pub fn read_json(path: impl AsRef<Path>) -> Result<Timeline, Error> {
        // The file's buffer is heapdelta's too: not the program's memory.
        let path = path.as_ref();
        crate::thread::untracked(|| {
            let file = std::fs::File::open(path).map_err(|e| crate::report::naming(path, e))?;
            Timeline::read_json_from(io::BufReader::new(file)).map_err(|e| in_file(path, e))
        })
    }

    /// Reads a timeline from heapdelta JSON in `r` (see [`read_json`](Timeline::read_json)).
    ///
    /// ```
    /// let err = heapdelta::Timeline::read_json_from(&b"{\"heapdelta_format\": 1, \"kind\": \"timeline\""[..]);
    /// assert!(err.unwrap_err().to_string().contains("truncated"));
    /// ```
    pub fn read_json_from(r: impl Read) -> Result<Timeline, Error> {
        match read_contents(r)? {
            Contents::Timeline(t) => Ok(t),
            Contents::Snapshot(_) => Err(Error::Format(
                "this is a snapshot file, not a timeline".to_string(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::PoolStats;
    use crate::snapshot::{ClassCount, SiteList};

    /// A pool's statistics with one arena of 1 MiB holding 64 blocks of 64 bytes.
    fn one_arena() -> PoolStats {
        PoolStats {
            classes: vec![crate::ClassStats {
                size: 64,
                pools: 1,
                blocks_in_use: 64,
                blocks_available: 191,
            }],
            arenas_allocated_total: 1,
            arenas_highwater: 1,
            arenas_current: 1,
            bytes_reserved: 1 << 20,
            bytes_in_use: 4096,
            ..PoolStats::default()
        }
    }

    /// The error reading back a snapshot holding `pool`.
    fn pool_error(pool: PoolStats) -> String {
        let mut s = Snapshot::zero();
        s.pool = Some(pool);
        let mut out = Vec::new();
        s.write_json_to(&mut out).unwrap();
        match Snapshot::read_json_from(&out[..]) {
            Err(Error::Format(msg)) => msg,
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    #[test]
    fn pool_statistics_whose_bytes_in_use_are_not_their_classes_are_rejected() {
        let msg = pool_error(PoolStats {
            bytes_in_use: 4000,
            ..one_arena()
        });
        assert!(
            msg.contains("4000 bytes in use, but the size classes hold 4096"),
            "{msg}"
        );
    }

    #[test]
    fn pool_statistics_whose_reserved_bytes_are_not_whole_arenas_are_rejected() {
        let msg = pool_error(PoolStats {
            bytes_reserved: 5,
            ..one_arena()
        });
        assert!(msg.contains("5 bytes reserved in 1 arenas"), "{msg}");
    }

    #[test]
    fn pool_statistics_whose_arena_counts_disagree_are_rejected() {
        for pool in [
            PoolStats {
                arenas_highwater: 0,
                ..one_arena()
            },
            PoolStats {
                arenas_reclaimed: 7,
                ..one_arena()
            },
        ] {
            let msg = pool_error(pool);
            assert!(
                msg.contains("inconsistent pool statistics: 1 arenas live"),
                "{msg}"
            );
        }
        let msg = pool_error(PoolStats {
            large_bytes: u64::MAX,
            ..one_arena()
        });
        assert!(msg.contains("pool statistics above"), "{msg}");
    }

    #[test]
    fn a_site_freeing_more_than_it_allocated_is_told_in_blocks() {
        let mut s = Snapshot::zero();
        let mut site = SiteCount::live(7, 3);
        site.counts.alloc_blocks = 3 * stats::UNIT;
        site.counts.free_blocks = 4 * stats::UNIT;
        s.sites = SiteList::new(vec![site]);
        let mut out = Vec::new();
        s.write_json_to(&mut out).unwrap();
        match Snapshot::read_json_from(&out[..]) {
            Err(Error::Format(msg)) => {
                assert!(
                    msg.contains("site 7 frees 4 blocks (0 bytes) of 3 allocated"),
                    "{msg}"
                )
            }
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    #[test]
    fn pool_statistics_round_trip_and_reach_the_delta() {
        let mut s = Snapshot::zero();
        s.pool = Some(one_arena());
        let mut out = Vec::new();
        s.write_json_to(&mut out).unwrap();
        let back = Snapshot::read_json_from(&out[..]).unwrap();
        assert_eq!(back, s);
        let d = back.since(&Snapshot::zero());
        assert_eq!(d.pool().map(|p| p.bytes_reserved), Some(1 << 20));
    }

    /// A checkpoint of another run whose sites (id, allocations) carry frames, as read from a
    /// file.
    fn checkpoint_of_another_run(label: &str, sites: &[(SiteId, u64)]) -> Snapshot {
        let mut s = Snapshot::zero();
        s.run ^= 1;
        s.label = Some(label.to_string());
        s.sites = SiteList::new(
            sites
                .iter()
                .map(|&(id, allocs)| SiteCount {
                    site: Some(Site::new(vec![crate::Frame {
                        function: format!("app::f{id}"),
                        file: Some("src/app.rs".to_string()),
                        line: Some(id),
                    }])),
                    ..SiteCount::live(id, allocs)
                })
                .collect(),
        );
        s
    }

    /// The timeline file `checkpoints` make, parsed.
    fn written_file(checkpoints: Vec<Snapshot>) -> Value {
        let mut out = Vec::new();
        Timeline::new(checkpoints).write_json_to(&mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    fn written_and_read_back(checkpoints: Vec<Snapshot>) -> Vec<Snapshot> {
        let mut out = Vec::new();
        Timeline::new(checkpoints).write_json_to(&mut out).unwrap();
        Timeline::read_json_from(&out[..])
            .unwrap()
            .checkpoints()
            .to_vec()
    }

    #[test]
    fn a_timeline_reads_back_as_it_was_written() {
        let checkpoints = vec![
            checkpoint_of_another_run("a", &[(1, 1), (40, 1)]),
            checkpoint_of_another_run("b", &[(1, 1), (40, 2), (41, 1)]),
        ];
        assert_eq!(written_and_read_back(checkpoints.clone()), checkpoints);
    }

    #[test]
    fn a_clock_checkpoint_reads_back_as_the_clocks() {
        let mut clock = checkpoint_of_another_run("1.0s", &[(1, 1)]);
        clock.by_clock = true;
        let checkpoints = vec![checkpoint_of_another_run("a", &[(1, 1)]), clock];
        let back = written_and_read_back(checkpoints.clone());
        assert_eq!(back, checkpoints);
        assert_eq!(
            back.iter().map(|c| c.by_clock).collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn checkpoints_read_back_hold_the_sites_they_did_not_change_once() {
        let back = written_and_read_back(vec![
            checkpoint_of_another_run("a", &[(1, 1), (40, 1)]),
            checkpoint_of_another_run("b", &[(1, 1), (40, 2)]),
            checkpoint_of_another_run("c", &[(1, 1), (40, 3)]),
        ]);
        assert_eq!(back[1].sites.shared_chunks(&back[0].sites), 1);
        assert_eq!(back[2].sites.shared_chunks(&back[0].sites), 1);
        assert_eq!(back[2].sites.shared_chunks(&back[1].sites), 1);
    }

    #[test]
    fn a_site_whose_frames_differ_under_one_id_keeps_them_inline() {
        let first = checkpoint_of_another_run("a", &[(1, 1)]);
        let mut second = checkpoint_of_another_run("b", &[(1, 2)]);
        for c in second.sites.iter_mut() {
            c.site = Some(Site::new(Vec::new()));
        }
        let file = written_file(vec![first.clone(), second.clone()]);
        assert_eq!(file["sites"].as_array().map(Vec::len), Some(1));
        assert!(file["checkpoints"][0]["sites"][0].get("site").is_none());
        assert!(file["checkpoints"][1]["sites"]["changed"][0]
            .get("site")
            .is_some());
        assert_eq!(
            written_and_read_back(vec![first.clone(), second.clone()]),
            [first, second]
        );
    }

    #[test]
    fn frames_that_differ_under_one_id_with_the_same_figures_read_back_as_they_were() {
        for run in [0, 2] {
            let first = checkpoint_of_another_run("a", &[(1, 1)]);
            let mut second = checkpoint_of_another_run("b", &[(1, 1)]);
            second.run ^= run;
            for c in second.sites.iter_mut() {
                c.site = Some(Site::new(Vec::new()));
            }
            let checkpoints = vec![first, second];
            assert_eq!(written_and_read_back(checkpoints.clone()), checkpoints);
        }
    }

    /// The keys (`key`: `id` of the sites, `size` of the classes) of the entries a written
    /// checkpoint's list `list` holds, and whether it holds only those that changed.
    fn listed_in(checkpoint: &Value, list: &str, key: &str) -> (Vec<u64>, bool) {
        let entries = &checkpoint[list];
        let (entries, changes_only) = match entries.get("changed") {
            Some(changed) => (changed, true),
            None => (entries, false),
        };
        let keys = entries.as_array().map_or(Vec::new(), |l| {
            l.iter().filter_map(|c| c[key].as_u64()).collect()
        });
        (keys, changes_only)
    }

    /// The ids of the sites a written checkpoint lists, and whether it lists only those that
    /// changed.
    fn listed(checkpoint: &Value) -> (Vec<u64>, bool) {
        listed_in(checkpoint, "sites", "id")
    }

    /// The sizes of the classes a written checkpoint lists, and whether it lists only those that
    /// changed.
    fn classes_listed(checkpoint: &Value) -> (Vec<u64>, bool) {
        listed_in(checkpoint, "classes", "size")
    }

    #[test]
    fn a_timeline_file_lists_at_each_checkpoint_only_the_sites_that_changed() {
        let checkpoints = vec![
            checkpoint_of_another_run("a", &[(1, 1), (40, 1)]),
            checkpoint_of_another_run("b", &[(1, 1), (40, 2), (41, 1)]),
            checkpoint_of_another_run("c", &[(1, 1), (40, 2), (41, 1)]),
        ];
        let file = written_file(checkpoints.clone());
        assert_eq!(listed(&file["checkpoints"][0]), (vec![1, 40], false));
        assert_eq!(listed(&file["checkpoints"][1]), (vec![40, 41], true));
        assert_eq!(listed(&file["checkpoints"][2]), (vec![], true));
        assert_eq!(written_and_read_back(checkpoints.clone()), checkpoints);
    }

    /// `s` holding `classes` as (size, blocks allocated and live), its totals their sums.
    fn with_classes(mut s: Snapshot, classes: &[(u64, u64)]) -> Snapshot {
        let classes: Vec<ClassCount> = classes
            .iter()
            .map(|&(size, blocks)| ClassCount {
                size,
                counts: Counts {
                    alloc_blocks: blocks,
                    alloc_bytes: blocks * size,
                    free_blocks: 0,
                    free_bytes: 0,
                },
            })
            .collect();
        let (blocks, bytes) = classes.iter().fold((0, 0), |(n, b), c| {
            (n + c.counts.alloc_blocks, b + c.counts.alloc_bytes)
        });
        s.totals = crate::Totals {
            live_bytes: bytes,
            live_blocks: blocks,
            peak_bytes: bytes,
            peak_blocks: blocks,
            total_bytes: bytes,
            total_blocks: blocks,
        };
        s.classes = classes.into();
        s
    }

    #[test]
    fn a_timeline_file_lists_at_each_checkpoint_only_the_classes_that_changed() {
        let checkpoints = vec![
            with_classes(checkpoint_of_another_run("a", &[]), &[(16, 1), (64, 1)]),
            with_classes(
                checkpoint_of_another_run("b", &[]),
                &[(16, 1), (32, 1), (64, 2)],
            ),
            with_classes(
                checkpoint_of_another_run("c", &[]),
                &[(16, 1), (32, 1), (64, 2)],
            ),
        ];
        let file = written_file(checkpoints.clone());
        assert_eq!(
            classes_listed(&file["checkpoints"][0]),
            (vec![16, 64], false)
        );
        assert_eq!(
            classes_listed(&file["checkpoints"][1]),
            (vec![32, 64], true)
        );
        assert_eq!(classes_listed(&file["checkpoints"][2]), (vec![], true));
        assert_eq!(written_and_read_back(checkpoints.clone()), checkpoints);
    }

    #[test]
    fn a_checkpoint_whose_classes_did_not_change_reads_back_holding_the_table_before() {
        let checkpoints = vec![
            with_classes(checkpoint_of_another_run("a", &[]), &[(16, 1)]),
            with_classes(checkpoint_of_another_run("b", &[]), &[(16, 1)]),
        ];
        let back = written_and_read_back(checkpoints.clone());
        assert_eq!(back, checkpoints);
        assert!(back[1].classes.is_shared_with(&back[0].classes));
    }

    /// The error of reading `text` as a timeline (which must fail).
    fn timeline_error(text: &str) -> String {
        Timeline::read_json_from(text.as_bytes())
            .unwrap_err()
            .to_string()
    }

    /// The JSON of a timeline of `n` checkpoints of one run, each with one class of 16 B.
    fn checkpoints_of_16_b(n: usize) -> String {
        let one = with_classes(checkpoint_of_another_run("a", &[]), &[(16, 1)]);
        let mut out = Vec::new();
        Timeline::new(vec![one; n]).write_json_to(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_bogus_class_is_refused_at_its_checkpoint_before_the_next_is_read() {
        // The second checkpoint names a class that does not exist, the third has sites of no
        // shape: the error is the second's, found before the merge (a file naming one more bogus
        // class at each checkpoint made each hold all those before, quadratic in the file).
        let text = checkpoints_of_16_b(3);
        let changed = r#""classes":{"changed":[]}"#;
        assert_eq!(text.matches(changed).count(), 2, "{text}");
        let bogus = r#""classes":{"changed":[{"size":1000001,"alloc_blocks":0,"alloc_bytes":0,"free_blocks":0,"free_bytes":0}]}"#;
        let text = text.replacen(changed, bogus, 1);
        let (head, tail) = text.rsplit_once(r#""sites":{"changed":[]}"#).unwrap();
        let text = format!(r#"{head}"sites":5{tail}"#);
        let err = timeline_error(&text);
        assert!(
            err.contains(r#"checkpoint 2 ("a"): 1000001 B is not a size class"#),
            "{err}"
        );
    }

    #[test]
    fn classes_listed_out_of_order_read_back_in_order_and_write_the_same() {
        let text = checkpoints_of_16_b(1);
        let whole = r#""classes":[{"size":16,"alloc_blocks":1,"alloc_bytes":16,"free_blocks":0,"free_bytes":0}]"#;
        assert!(text.contains(whole), "{text}");
        // Two classes, the larger first, with totals to match.
        let two = r#""classes":[{"size":32,"alloc_blocks":1,"alloc_bytes":32,"free_blocks":0,"free_bytes":0},{"size":16,"alloc_blocks":1,"alloc_bytes":16,"free_blocks":0,"free_bytes":0}]"#;
        let text = text.replacen(whole, two, 1).replacen(
            r#""live_bytes":16,"live_blocks":1,"peak_bytes":16,"peak_blocks":1,"total_bytes":16,"total_blocks":1"#,
            r#""live_bytes":48,"live_blocks":2,"peak_bytes":48,"peak_blocks":2,"total_bytes":48,"total_blocks":2"#,
            1,
        );
        let read = Timeline::read_json_from(text.as_bytes()).unwrap();
        let sizes: Vec<u64> = read.checkpoints()[0]
            .classes
            .iter()
            .map(|c| c.size)
            .collect();
        assert_eq!(sizes, [16, 32]);
        let mut again = Vec::new();
        read.write_json_to(&mut again).unwrap();
        assert_eq!(Timeline::read_json_from(&again[..]).unwrap(), read);
    }

    #[test]
    fn a_checkpoint_of_another_run_than_the_one_before_lists_every_class() {
        let first = with_classes(checkpoint_of_another_run("a", &[]), &[(16, 1)]);
        let mut second = with_classes(checkpoint_of_another_run("b", &[]), &[(16, 1)]);
        second.run ^= 2;
        let file = written_file(vec![first.clone(), second.clone()]);
        assert_eq!(classes_listed(&file["checkpoints"][1]), (vec![16], false));
        assert_eq!(
            written_and_read_back(vec![first.clone(), second.clone()]),
            [first, second]
        );
    }

    #[test]
    fn classes_that_changed_with_nothing_before_them_are_a_format_error() {
        let text = checkpoints_of_16_b(1);
        let changed = text.replacen(r#""classes":[{"#, r#""classes":{"changed":[{"#, 1);
        let changed = changed.replacen(r#"}],"tags""#, r#"}]},"tags""#, 1);
        let err = timeline_error(&changed);
        assert!(
            err.contains("the first checkpoint lists only the size classes that changed"),
            "{err}: {changed}"
        );
    }

    #[test]
    fn a_checkpoint_of_another_run_than_the_one_before_lists_every_site() {
        let first = checkpoint_of_another_run("a", &[(1, 1)]);
        let mut second = checkpoint_of_another_run("b", &[(1, 1), (2, 1)]);
        second.run ^= 2;
        let file = written_file(vec![first.clone(), second.clone()]);
        assert_eq!(listed(&file["checkpoints"][1]), (vec![1, 2], false));
        assert_eq!(
            written_and_read_back(vec![first.clone(), second.clone()]),
            [first, second]
        );
    }

    #[test]
    fn changes_since_a_checkpoint_of_another_run_are_a_format_error() {
        let first = checkpoint_of_another_run("a", &[(1, 1)]);
        let second = checkpoint_of_another_run("b", &[(1, 2)]);
        let mut file = written_file(vec![first, second]);
        file["checkpoints"][1]["run"] = 7.into();
        match Timeline::read_json_from(file.to_string().as_bytes()) {
            Err(Error::Format(msg)) => assert!(msg.contains("another run"), "{msg}"),
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    #[test]
    fn a_site_of_another_run_without_frames_is_written_as_unknown_and_reads_back() {
        let mut s = Snapshot::zero();
        s.run ^= 1;
        s.sites = SiteList::new(vec![SiteCount::live(3, 2)]);
        let mut out = Vec::new();
        Timeline::new(vec![s]).write_json_to(&mut out).unwrap();
        let back = Timeline::read_json_from(&out[..]).unwrap();
        let site = back.checkpoints()[0]
            .sites
            .iter()
            .next()
            .unwrap()
            .site
            .clone();
        assert_eq!(site, Some(Site::unknown()));
    }

    #[test]
    fn a_first_checkpoint_that_lists_only_changes_is_a_format_error() {
        let mut file = written_file(vec![checkpoint_of_another_run("a", &[(1, 1)])]);
        let sites = file["checkpoints"][0]["sites"].take();
        file["checkpoints"][0]["sites"] = serde_json::json!({ "changed": sites });
        match Timeline::read_json_from(file.to_string().as_bytes()) {
            Err(Error::Format(msg)) => assert!(msg.contains("first checkpoint"), "{msg}"),
            other => panic!("expected a format error, got {other:?}"),
        }
    }

    #[test]
    fn a_file_that_is_not_a_json_object_is_a_format_error() {
        for text in ["[1, 2]", "3", "\"snapshot\""] {
            let err = read_contents(text.as_bytes()).unwrap_err().to_string();
            assert!(
                err.ends_with(": expected a JSON object with a \"heapdelta_format\" field"),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn a_field_given_twice_is_a_format_error_in_the_envelope_as_in_the_body() {
        for text in [
            r#"{"heapdelta_format": 2, "heapdelta_format": 2, "kind": "timeline", "checkpoints": []}"#,
            r#"{"heapdelta_format": 2, "kind": "timeline", "checkpoints": [], "checkpoints": []}"#,
        ] {
            let err = read_contents(text.as_bytes()).unwrap_err().to_string();
            assert!(err.contains("duplicate field"), "{text}: {err}");
        }
    }

    #[test]
    fn a_truncated_file_is_reported_as_truncated_before_anything_else() {
        let err = read_contents(&b"{\"kind\": \"timeline\", \"checkpoints\": [{"[..]).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
    }

    /// The demo snapshot file as a JSON value.
    fn demo_snapshot() -> Value {
        let text = include_str!("../../tests/data/reports/demo_snapshot.json");
        serde_json::from_str(text).unwrap()
    }

    fn read_value(v: &Value) -> Result<Contents, Error> {
        read_contents(serde_json::to_vec(v).unwrap().as_slice())
    }

    #[test]
    fn the_demo_snapshot_passes_the_consistency_checks() {
        assert!(matches!(
            read_value(&demo_snapshot()),
            Ok(Contents::Snapshot(_))
        ));
    }

    #[test]
    fn a_class_that_frees_more_than_it_allocated_is_a_format_error() {
        let mut v = demo_snapshot();
        v["snapshot"]["classes"][0]["free_bytes"] = Value::from(u64::MAX);
        let e = read_value(&v).unwrap_err();
        assert!(
            matches!(&e, Error::Format(m) if m.contains("inconsistent counters")),
            "{e}"
        );
    }

    #[test]
    fn live_bytes_above_the_total_are_a_format_error() {
        let mut v = demo_snapshot();
        v["snapshot"]["totals"]["live_bytes"] = Value::from(u64::MAX);
        let e = read_value(&v).unwrap_err();
        assert!(
            matches!(&e, Error::Format(m) if m.contains("inconsistent totals")),
            "{e}"
        );
    }

    #[test]
    fn a_checkpoint_with_inconsistent_counters_is_a_format_error() {
        let text = include_str!("../../tests/data/reports/demo_timeline.json");
        let mut v: Value = serde_json::from_str(text).unwrap();
        assert!(matches!(read_value(&v), Ok(Contents::Timeline(_))));
        v["checkpoints"][1]["totals"]["peak_bytes"] = Value::from(0);
        let e = read_value(&v).unwrap_err();
        assert!(
            matches!(&e, Error::Format(m)
                if m.starts_with(r#"checkpoint 2 ("step 1"): inconsistent totals"#)),
            "{e}"
        );
    }

    /// The format error reading `v` gives (panics when `v` reads).
    fn format_error(v: &Value) -> String {
        match read_value(v) {
            Err(Error::Format(m)) => m,
            Err(e) => panic!("expected a format error, got {e}"),
            Ok(_) => panic!("expected a format error, the file read"),
        }
    }

    #[test]
    fn totals_that_are_not_the_size_classes_sums_are_a_format_error() {
        let mut v = demo_snapshot();
        v["snapshot"]["totals"]["live_bytes"] = Value::from(135_080u64);
        assert!(format_error(&v).contains("the size classes add up to"));
    }

    #[test]
    fn a_site_listed_twice_is_a_format_error() {
        let mut v = demo_snapshot();
        let first = v["snapshot"]["sites"][0].clone();
        v["snapshot"]["sites"].as_array_mut().unwrap().push(first);
        assert!(format_error(&v).contains("listed twice"));
    }

    #[test]
    fn a_size_class_listed_twice_is_a_format_error() {
        let mut v = demo_snapshot();
        let first = v["snapshot"]["classes"][0].clone();
        v["snapshot"]["classes"].as_array_mut().unwrap().push(first);
        assert!(format_error(&v).contains("size class 32 is listed twice"));
    }

    #[test]
    fn more_young_frees_than_frees_at_a_site_are_a_format_error() {
        let mut v = demo_snapshot();
        v["snapshot"]["sites"][0]["young_free"] = serde_json::json!([1u64 << 40, 0]);
        assert!(format_error(&v).contains("more young frees than frees"));
    }

    #[test]
    fn counts_that_do_not_fit_a_signed_difference_are_a_format_error() {
        let mut v = demo_snapshot();
        v["snapshot"]["classes"][0]["alloc_bytes"] = Value::from(u64::MAX);
        assert!(format_error(&v).contains("more than"));
        let mut v = demo_snapshot();
        v["snapshot"]["totals"]["peak_bytes"] = Value::from(u64::MAX);
        assert!(format_error(&v).contains("totals above"));
    }
}
