//! `Snapshot`: the counters frozen at one moment, and `Totals`.

use serde::{Deserialize, Serialize};

use crate::callsite::{self, Site, SiteId};
use crate::checkpoint;
use crate::config;
use crate::diff::Delta;
use crate::pool::{pool_stats, PoolStats};
use crate::scope;
use crate::sizeclass::class_size;
use crate::stats::{self, Counts, Raw};
use crate::thread;

mod changes;
mod classes;
mod sites;
pub(crate) use classes::ClassList;
pub(crate) use sites::{ChunkMemo, SiteList};

/// Process-wide totals. Byte figures are the bytes the program asked for (`Layout::size`), never
/// the tracker's header.
///
/// ```
/// let t = heapdelta::snapshot().totals();
/// assert!(t.live_bytes <= t.total_bytes);
/// assert!(t.live_bytes <= t.peak_bytes);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Bytes in live blocks.
    pub live_bytes: u64,
    /// Live blocks.
    pub live_blocks: u64,
    /// Highest `live_bytes` since the start.
    pub peak_bytes: u64,
    /// Live blocks at the moment of the peak.
    pub peak_blocks: u64,
    /// Bytes ever allocated.
    pub total_bytes: u64,
    /// Blocks ever allocated.
    pub total_blocks: u64,
}

/// One size class's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ClassCount {
    pub size: u64,
    #[serde(flatten)]
    pub counts: Counts,
}

/// One scope tag's counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TagCount {
    pub tag: String,
    #[serde(flatten)]
    pub counts: Counts,
}

/// One call site's counters (block figures in `stats::UNIT`s, so sampled estimates keep their
/// fractions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SiteCount {
    /// Interned id, meaningful only within the run that took the snapshot.
    pub id: SiteId,
    /// The resolved site: filled when the snapshot is written or read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<Site>,
    #[serde(flatten)]
    pub counts: Counts,
    /// Frees of blocks born in the epoch they were freed in: (blocks in units, bytes).
    pub young_free: (u64, u64),
}

#[cfg(test)]
impl SiteCount {
    /// Site `id` with `allocs` live blocks of 8 bytes, not resolved.
    pub(crate) fn live(id: SiteId, allocs: u64) -> SiteCount {
        SiteCount {
            id,
            site: None,
            counts: Counts {
                alloc_blocks: allocs,
                alloc_bytes: 8 * allocs,
                free_blocks: 0,
                free_bytes: 0,
            },
            young_free: (0, 0),
        }
    }
}

/// The heap's counters at one moment: totals, size classes, scope tags and call sites.
///
/// A snapshot equals the one read back from its JSON file ([`write_json`](Snapshot::write_json),
/// [`read_json`](Snapshot::read_json)): a snapshot taken in the process holds its call sites as
/// ids, which it compares as the frames they resolve to, as its file gives them.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let before = heapdelta::snapshot();
/// let v = vec![1u64; 100];
/// let growth = heapdelta::snapshot().since(&before);
/// # drop(v);
/// assert!(growth.live_bytes() >= 800);
/// # }
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Snapshot {
    pub(crate) label: Option<String>,
    /// Checkpoint epoch during which the counters were read.
    pub(crate) epoch: u32,
    /// Whether this snapshot closed its epoch (a checkpoint).
    pub(crate) checkpoint: bool,
    /// Whether heapdelta's clock took this checkpoint (`HEAPDELTA=every=`), not the program.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) by_clock: bool,
    /// Identifies the process that took it (site ids are only comparable within one run).
    pub(crate) run: u64,
    /// Seconds since the process's first snapshot or allocation record.
    pub(crate) seconds: f64,
    /// Wall-clock time it was taken, in nanoseconds since the Unix epoch (0: not known, as in
    /// files written before it was kept).
    #[serde(default)]
    pub(crate) unix_nanos: u64,
    /// The sampling mean in bytes when the call-site figures are sampled estimates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sampled_mean: Option<u64>,
    /// The path of the program that took it, when known (not in files written before it was
    /// kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) program: Option<String>,
    /// The id of the process that took it, when known (not in files written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pid: Option<u32>,
    pub(crate) totals: Totals,
    /// Frees of blocks born in the epoch they were freed in: (blocks, bytes).
    pub(crate) young_free: (u64, u64),
    pub(crate) classes: ClassList,
    pub(crate) tags: Vec<TagCount>,
    pub(crate) sites: SiteList,
    pub(crate) pool: Option<PoolStats>,
}

impl Snapshot {
    /// Totals at the moment the snapshot was taken.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let before = heapdelta::snapshot().totals();
    /// let kept = vec![0u8; 2048];
    /// let after = heapdelta::snapshot().totals();
    /// assert!(after.live_bytes >= before.live_bytes + 2048);
    /// assert!(after.total_blocks > before.total_blocks);
    /// # drop(kept);
    /// # }
    /// ```
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// The growth from `earlier` to this snapshot.
    ///
    /// Two snapshots of this process, `earlier` taken first, make a window: the delta also counts
    /// the allocations and frees between them. Otherwise (snapshots of two runs read from files,
    /// or the later one given as `earlier`) it compares what was live in each
    /// ([`Delta::is_comparison`]).
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let a = heapdelta::snapshot();
    /// let kept = vec![0u64; 64];
    /// let b = heapdelta::snapshot();
    /// let growth = b.since(&a);
    /// println!("{growth}");
    /// assert!(growth.live_bytes() >= 512);
    /// assert!(growth.allocated_blocks() >= 1);
    /// # drop(kept);
    /// # }
    /// ```
    pub fn since(&self, earlier: &Snapshot) -> Delta {
        crate::thread::untracked(|| Delta::between(earlier, self))
    }

    /// Everything this snapshot holds, as the growth from the start of its run (an empty heap):
    /// the live figures are what was live at the snapshot, and the sites, types and tables
    /// ([`Delta::table`]) rank what holds the heap, largest first, as a `tracemalloc` snapshot's
    /// top statistics do.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let kept = vec![0u8; 4096];
    /// let live = heapdelta::snapshot().since_start();
    /// assert!(live.live_bytes() >= 4096);
    /// print!("{}", live.table(heapdelta::By::Class, 5));
    /// # drop(kept);
    /// # }
    /// ```
    pub fn since_start(&self) -> Delta {
        let start = Snapshot {
            run: self.run,
            ..Snapshot::zero()
        };
        self.since(&start)
    }

    /// The checkpoint label, if this snapshot was taken by [`checkpoint`](crate::checkpoint)
    /// (or is the final `exit` snapshot of a `HEAPDELTA=report=` file).
    ///
    /// ```
    /// assert_eq!(heapdelta::snapshot().label(), None);
    /// heapdelta::checkpoint("loaded");
    /// let t = heapdelta::timeline();
    /// assert_eq!(t.checkpoints().last().unwrap().label(), Some("loaded"));
    /// ```
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// This snapshot named `label`, as reports and files then name it (a checkpoint is named by
    /// its own label; [`snapshot`](crate::snapshot) takes none, and `heapdelta show` of its file
    /// reads `| snapshot |`). It stays a snapshot: it does not become a checkpoint of the timeline.
    ///
    /// ```
    /// let path = std::env::temp_dir().join("heapdelta-doc-labelled.json");
    /// heapdelta::snapshot().with_label("after warm-up").write_json(&path)?;
    /// let back = heapdelta::Snapshot::read_json(&path)?;
    /// assert_eq!(back.label(), Some("after warm-up"));
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_label(mut self, label: impl Into<String>) -> Snapshot {
        self.label = Some(label.into());
        self
    }

    /// The pool's statistics at that moment, when a [`Pool`](crate::Pool) is the global
    /// allocator (alone or under the tracker).
    ///
    /// ```
    /// // With the system allocator there is no pool.
    /// assert!(heapdelta::snapshot().pool().is_none());
    /// ```
    pub fn pool(&self) -> Option<&PoolStats> {
        self.pool.as_ref()
    }

    /// An empty snapshot: the state before the first allocation.
    pub(crate) fn zero() -> Snapshot {
        Snapshot {
            label: None,
            epoch: 0,
            checkpoint: false,
            by_clock: false,
            run: checkpoint::run_id(),
            seconds: 0.0,
            unix_nanos: 0,
            sampled_mean: None,
            program: None,
            pid: None,
            totals: Totals::default(),
            young_free: (0, 0),
            classes: ClassList::default(),
            tags: Vec::new(),
            sites: SiteList::default(),
            pool: None,
        }
    }

    /// Reads the process-wide counters now.
    pub(crate) fn take(label: Option<String>, closes_epoch: bool) -> Snapshot {
        thread::untracked(|| {
            let epoch = stats::epoch();
            let raw = stats::read_all();
            let mut s = Snapshot::from_raw(raw, label, epoch, closes_epoch);
            thread::publish_high();
            let (peak_bytes, peak_blocks) = stats::peak();
            if peak_bytes >= s.totals.live_bytes {
                s.totals.peak_bytes = peak_bytes;
                s.totals.peak_blocks = peak_blocks;
            } else {
                // Live above the peak: other threads' growth not folded yet, or their churn while
                // the counters were read (which can make the figure more than the heap ever
                // held). The peak is raised, for later snapshots too, to what the heap certainly
                // held; this snapshot's own peak is its live figure, as it never reports less
                // (and its live figure stays as read: it must add up with its size classes).
                let (bytes, blocks) = stats::live_lower_bound();
                stats::raise_peak(bytes, blocks);
            }
            s.pool = pool_stats();
            s
        })
    }

    /// Builds a snapshot from raw counters (peak = live; the caller fills in the real peak).
    pub(crate) fn from_raw(
        raw: Raw,
        label: Option<String>,
        epoch: u32,
        closes_epoch: bool,
    ) -> Snapshot {
        let mut all = Counts::default();
        let classes: Vec<ClassCount> = raw
            .classes
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_zero())
            .map(|(i, c)| {
                all.add(c);
                ClassCount {
                    size: class_size(i),
                    counts: *c,
                }
            })
            .collect();
        let tags = raw
            .tags
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_zero())
            .map(|(i, c)| TagCount {
                tag: scope::tag_name(i).to_string(),
                counts: *c,
            })
            .collect();
        let sites = SiteList::new(
            raw.sites
                .iter()
                .enumerate()
                .filter(|(_, c)| !c.counts.is_zero())
                .map(|(i, c)| SiteCount {
                    id: i as SiteId,
                    site: None,
                    counts: c.counts,
                    young_free: c.young_free,
                })
                .collect(),
        );
        let live_bytes = all.live_bytes();
        let live_blocks = all.live_blocks();
        Snapshot {
            label,
            epoch,
            checkpoint: closes_epoch,
            by_clock: false,
            run: checkpoint::run_id(),
            seconds: checkpoint::seconds(),
            unix_nanos: checkpoint::unix_nanos(),
            sampled_mean: config::sampled_mean(),
            program: checkpoint::program(),
            pid: Some(std::process::id()),
            totals: Totals {
                live_bytes,
                live_blocks,
                peak_bytes: live_bytes,
                peak_blocks: live_blocks,
                total_bytes: all.alloc_bytes,
                total_blocks: all.alloc_blocks,
            },
            young_free: raw.young_free,
            classes: classes.into(),
            tags,
            sites,
            pool: None,
        }
    }

    /// Fills in every site's resolved frames (for writing to a file).
    pub(crate) fn resolve_sites(&mut self) {
        if !self.holds_ids() {
            return;
        }
        thread::untracked(|| {
            for s in self.sites.iter_mut() {
                if s.site.is_none() {
                    s.site = Some(callsite::resolve(s.id));
                }
            }
        })
    }

    /// Whether the snapshot's call-site ids are this process's, so that a site without frames
    /// is the one its id resolves to here (`callsite::resolve`).
    fn holds_ids(&self) -> bool {
        self.run == checkpoint::run_id()
    }

    /// The frames of site count `c` as this snapshot's file gives them: its own, else those its
    /// id resolves to in this process when it is this process's, else none.
    fn frames_of(&self, c: &SiteCount) -> Option<Site> {
        match &c.site {
            Some(site) => Some(site.clone()),
            None if self.holds_ids() => Some(thread::untracked(|| callsite::resolve(c.id))),
            None => None,
        }
    }

    /// Whether the call sites of the two snapshots (of one run) are the same: ids, figures and
    /// the frames their files give.
    fn same_sites(&self, other: &Snapshot) -> bool {
        if self.sites == other.sites {
            return true;
        }
        self.sites.is_changes_only() == other.sites.is_changes_only()
            && self.sites.iter().count() == other.sites.iter().count()
            && self.sites.iter().zip(other.sites.iter()).all(|(a, b)| {
                let SiteCount {
                    id,
                    site,
                    counts,
                    young_free,
                } = a;
                let frames = match (site, &b.site) {
                    (Some(x), Some(y)) => x == y,
                    (None, None) => true,
                    _ => self.frames_of(a) == other.frames_of(b),
                };
                *id == b.id && *counts == b.counts && *young_free == b.young_free && frames
            })
    }
}

/// Equal when every figure is, and the call sites are the same stacks: those of a snapshot taken
/// in this process compare as the frames their ids resolve to, so it equals the snapshot read back
/// from its file, which holds them.
impl PartialEq for Snapshot {
    fn eq(&self, other: &Snapshot) -> bool {
        let Snapshot {
            label,
            epoch,
            checkpoint,
            by_clock,
            run,
            seconds,
            unix_nanos,
            sampled_mean,
            program,
            pid,
            totals,
            young_free,
            classes,
            tags,
            sites: _,
            pool,
        } = self;
        *label == other.label
            && *epoch == other.epoch
            && *checkpoint == other.checkpoint
            && *by_clock == other.by_clock
            && *run == other.run
            && *seconds == other.seconds
            && *unix_nanos == other.unix_nanos
            && *sampled_mean == other.sampled_mean
            && *program == other.program
            && *pid == other.pid
            && *totals == other.totals
            && *young_free == other.young_free
            && *classes == other.classes
            && *tags == other.tags
            && *pool == other.pool
            && self.same_sites(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::LAST_SITE;
    use crate::Frame;

    /// A snapshot of this process (or, with `other_run`, of another) holding one site, counted
    /// under the id of the stacks that came after the site table was full, with `frames`.
    fn one_site(other_run: bool, frames: Option<Site>) -> (Snapshot, SiteId) {
        let id = LAST_SITE;
        let mut s = Snapshot::zero();
        if other_run {
            s.run ^= 1;
        }
        s.sites = SiteList::new(vec![SiteCount {
            site: frames,
            ..SiteCount::live(id, 3)
        }]);
        (s, id)
    }

    #[test]
    fn a_site_of_this_run_equals_it_with_the_frames_its_id_resolves_to() {
        let (held_as_id, id) = one_site(false, None);
        let (with_frames, _) = one_site(false, Some(callsite::resolve(id)));
        assert_eq!(held_as_id, with_frames);
        assert_eq!(with_frames, held_as_id);
    }

    #[test]
    fn a_site_of_this_run_differs_from_it_with_other_frames() {
        let other = Site::new(vec![Frame {
            function: "app::elsewhere".to_string(),
            file: None,
            line: None,
        }]);
        assert_ne!(one_site(false, None).0, one_site(false, Some(other)).0);
    }

    #[test]
    fn a_site_of_another_run_is_not_resolved_here() {
        let (held_as_id, id) = one_site(true, None);
        let (with_frames, _) = one_site(true, Some(callsite::resolve(id)));
        assert_ne!(held_as_id, with_frames);
    }
}
