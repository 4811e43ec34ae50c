//! Diffs: `Delta` between two snapshots, and `Timeline` over all checkpoints with the growth
//! detector.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::callsite::{self, Site, SiteId};
use crate::checkpoint;
use crate::error::Error;
use crate::pool::PoolStats;
use crate::report::units_to_blocks;
use crate::scope;
use crate::snapshot::{SiteCount, Snapshot, Totals};
use crate::stats::Counts;
use crate::thread;

/// Growth at one call site between two snapshots: an entry of [`Delta::sites`].
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let (_v, d) = heapdelta::measure(|| vec![0u8; 64]);
/// for s in d.sites() {
///     println!("{:+} B in {:+} blocks at {}", s.live_bytes, s.live_blocks, s.site);
/// }
/// let top = &d.sites()[0];
/// assert_eq!((top.live_bytes, top.live_blocks, top.allocs), (64, 1, 1));
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct SiteDelta {
    /// Where the blocks were allocated.
    pub site: Site,
    /// Change in live bytes.
    pub live_bytes: i64,
    /// Change in live blocks.
    pub live_blocks: i64,
    /// Allocations made in the window (0 in a [comparison](Delta::is_comparison)).
    pub allocs: u64,
    /// Frees made in the window (0 in a comparison).
    pub frees: u64,
    /// Bytes allocated in the window (0 in a comparison).
    pub allocated_bytes: u64,
    /// For a window of one step: what this site allocated in the step and still held at its end,
    /// and what it freed of older blocks (`None` for longer windows, as for
    /// [`Delta::survivors`]).
    pub survivors: Option<Survivors>,
}

/// Growth in one size class.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let (_v, d) = heapdelta::measure(|| vec![0u8; 100]);
/// assert_eq!(d.size_classes()[0].size, 112); // 100 bytes is counted in the 112-byte class
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassDelta {
    /// The class's largest request size.
    pub size: usize,
    /// Change in live bytes.
    pub live_bytes: i64,
    /// Change in live blocks.
    pub live_blocks: i64,
    /// Allocations in the window (0 in a [comparison](Delta::is_comparison)).
    pub allocs: u64,
    /// Frees in the window (0 in a comparison).
    pub frees: u64,
}

/// Growth under one [`scope`](crate::scope) tag: an entry of [`Delta::tags`].
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let (_v, d) = heapdelta::measure(|| {
///     let _g = heapdelta::scope("decode");
///     vec![0u8; 256]
/// });
/// for t in d.tags() {
///     println!("{}: {:+} B", t.tag, t.live_bytes);
/// }
/// assert_eq!(d.tags()[0].tag, "decode");
/// assert_eq!(d.tags()[0].live_bytes, 256);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagDelta {
    /// The tag.
    pub tag: &'static str,
    /// Change in live bytes.
    pub live_bytes: i64,
    /// Change in live blocks.
    pub live_blocks: i64,
    /// Bytes allocated in the window (0 in a [comparison](Delta::is_comparison)).
    pub allocated_bytes: u64,
}

/// Growth by allocated type, derived from the call sites' symbols: an entry of
/// [`Delta::types`]. The type is known only when the allocation's stack went through a generic
/// standard-library function and debug information names it; otherwise it is `(unknown)`.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let (_v, d) = heapdelta::measure(|| vec![0.0f32; 100]);
/// for t in d.types() {
///     println!("{} {:+} blocks", t.type_name, t.live_blocks);
/// }
/// // Whatever the types are named, they add up to the growth.
/// assert_eq!(d.types().iter().map(|t| t.live_bytes).sum::<i64>(), 400);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeDelta {
    /// `Vec<f32>`, `String`, … or `(unknown)`.
    pub type_name: String,
    /// Change in live bytes.
    pub live_bytes: i64,
    /// Change in live blocks.
    pub live_blocks: i64,
    /// Allocations in the window (0 in a [comparison](Delta::is_comparison)).
    pub allocs: u64,
}

/// What happened to the blocks of one step (a window between two consecutive checkpoints), from
/// [`Delta::survivors`] and [`SiteDelta::survivors`].
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// heapdelta::checkpoint("start");
/// let kept = vec![0u8; 100];
/// let step = heapdelta::checkpoint("step 1");
/// let s = step.survivors().expect("a window of one step");
/// println!("{} blocks born in the step outlived it", s.blocks);
/// assert!(s.blocks >= 1 && s.bytes >= 100);
/// # drop(kept);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Survivors {
    /// Blocks born in the step and still alive at its end.
    pub blocks: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Blocks born before the step and freed during it.
    pub freed_older_blocks: u64,
    /// Their bytes.
    pub freed_older_bytes: u64,
}

/// A site's raw change, before symbols are resolved.
#[derive(Clone, Debug)]
enum SiteKey {
    Id(SiteId),
    Resolved(Site),
}

/// A site's counts over a window (blocks in `UNIT`s): allocations and frees, and the frees of
/// blocks born in the epoch they were freed in.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct SiteWindow {
    counts: Counts,
    young_free: (u64, u64),
}

impl SiteWindow {
    fn of(s: &SiteCount) -> SiteWindow {
        SiteWindow {
            counts: s.counts,
            young_free: s.young_free,
        }
    }

    fn add(&mut self, other: &SiteWindow) {
        self.counts.add(&other.counts);
        self.young_free.0 = self.young_free.0.wrapping_add(other.young_free.0);
        self.young_free.1 = self.young_free.1.wrapping_add(other.young_free.1);
    }

    /// The change from `before` to `self` (see `change`); a comparison has no young frees.
    fn since(&self, before: &SiteWindow, window: bool) -> SiteWindow {
        if !window {
            return SiteWindow {
                counts: compare(&self.counts, &before.counts),
                young_free: (0, 0),
            };
        }
        SiteWindow {
            counts: diff(&self.counts, &before.counts),
            young_free: (
                self.young_free.0.saturating_sub(before.young_free.0),
                self.young_free.1.saturating_sub(before.young_free.1),
            ),
        }
    }
}

/// Survivors of a one-step window from its counts and its young frees (in the counts' units).
fn survivors_of(window: &Counts, young: (u64, u64)) -> Survivors {
    Survivors {
        blocks: window.alloc_blocks.saturating_sub(young.0),
        bytes: window.alloc_bytes.saturating_sub(young.1),
        freed_older_blocks: window.free_blocks.saturating_sub(young.0),
        freed_older_bytes: window.free_bytes.saturating_sub(young.1),
    }
}

/// The growth between two snapshots, from [`checkpoint`](crate::checkpoint),
/// [`measure`](crate::measure), [`Snapshot::since`] or [`Timeline::between`]. `Display` prints
/// the per-step line ([`summary`](Delta::summary)), what survived the step, the top sites, and
/// the changes by type, size class and scope tag (and the pool's figures, under a
/// [`Pool`](crate::Pool)).
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let before = heapdelta::snapshot();
/// let kept: Vec<Vec<u8>> = (0..10).map(|_| vec![0; 100]).collect();
/// let d = heapdelta::snapshot().since(&before);
/// assert!(d.live_bytes() >= 1000);
/// # drop(kept);
/// # }
/// ```
#[derive(Debug)]
pub struct Delta {
    pub(crate) label: Option<String>,
    pub(crate) from_label: Option<String>,
    /// Process totals at the end, or `None` for a thread-only delta from `measure`.
    pub(crate) after: Option<Totals>,
    pub(crate) window: Counts,
    pub(crate) survivors: Option<Survivors>,
    pub(crate) classes: Vec<ClassDelta>,
    pub(crate) tags: Vec<TagDelta>,
    raw_sites: Vec<(SiteKey, SiteWindow)>,
    sites: OnceLock<Vec<SiteDelta>>,
    types: OnceLock<Vec<TypeDelta>>,
    pub(crate) pool: Option<PoolStats>,
    /// Seconds between the two snapshots.
    pub(crate) seconds: f64,
    /// Wall-clock time of the later snapshot, in nanoseconds since the Unix epoch (0: not known).
    /// Read by the pprof writer.
    #[cfg_attr(not(feature = "pprof"), allow(dead_code))]
    pub(crate) unix_nanos: u64,
    /// The sampling mean in bytes when the call-site figures are sampled estimates.
    pub(crate) sampled_mean: Option<u64>,
    /// The path of the program the later snapshot was taken in, when known.
    pub(crate) program: Option<String>,
    /// The id of the process the later snapshot was taken in, when known.
    pub(crate) pid: Option<u32>,
    /// Whether this compares what was live in two snapshots that do not make a window (see
    /// `is_window`): the allocations and frees between them are not known.
    pub(crate) comparison: bool,
    /// Whether the window's text names where it starts: it covers more than one step, or it
    /// starts at a checkpoint of the other kind (the clock's, `every=`, before one of the
    /// program's, or the other way round). Cleared for the step a program's `checkpoint` returns,
    /// which runs from its previous checkpoint over the clock's.
    pub(crate) names_start: bool,
    /// Whether this `measure` delta was counted in counters the thread shares with others (see
    /// `Delta::counts_other_threads`).
    pub(crate) shared: bool,
}

/// Whether `b` closes a window that `a` opens: both of one run, `b` taken after `a` (a later or
/// the same step, and no running count lower). Only then can their running counts be
/// subtracted; otherwise (two runs, or the later snapshot given first) a delta compares what was
/// live in each. (Counts, not the clock: two threads' snapshots taken at once may read their
/// clocks in either order.)
fn is_window(a: &Snapshot, b: &Snapshot) -> bool {
    let (ta, tb) = (total(a), total(b));
    a.run == b.run
        && b.epoch >= a.epoch
        && tb.alloc_blocks >= ta.alloc_blocks
        && tb.alloc_bytes >= ta.alloc_bytes
        && tb.free_blocks >= ta.free_blocks
        && tb.free_bytes >= ta.free_bytes
}

/// A snapshot's running counts summed over its size classes.
fn total(s: &Snapshot) -> Counts {
    let mut c = Counts::default();
    for k in &s.classes {
        c.add(&k.counts);
    }
    c
}

/// The change from `before` to `after`: in a window (`window`), the allocations and frees made
/// in it; otherwise a comparison of what was live, its rise given as allocations and its fall as
/// frees, so that the live figures derived from it are the signed differences.
fn change(after: &Counts, before: &Counts, window: bool) -> Counts {
    if window {
        diff(after, before)
    } else {
        compare(after, before)
    }
}

/// `change` for a comparison.
fn compare(after: &Counts, before: &Counts) -> Counts {
    let split = |now: u64, then: u64| {
        let d = (now as i64).wrapping_sub(then as i64);
        (d.max(0) as u64, d.min(0).unsigned_abs())
    };
    let (alloc_bytes, free_bytes) = split(after.live_bytes(), before.live_bytes());
    let (alloc_blocks, free_blocks) = split(after.live_blocks(), before.live_blocks());
    Counts {
        alloc_blocks,
        alloc_bytes,
        free_blocks,
        free_bytes,
    }
}

fn diff(after: &Counts, before: &Counts) -> Counts {
    Counts {
        alloc_blocks: after.alloc_blocks.saturating_sub(before.alloc_blocks),
        alloc_bytes: after.alloc_bytes.saturating_sub(before.alloc_bytes),
        free_blocks: after.free_blocks.saturating_sub(before.free_blocks),
        free_bytes: after.free_bytes.saturating_sub(before.free_bytes),
    }
}

/// An allocation or free count of a change: `n` in a window, 0 (not known) in a comparison.
fn known(n: u64, window: bool) -> u64 {
    if window {
        n
    } else {
        0
    }
}

fn live_change(c: &Counts) -> (i64, i64) {
    (
        (c.alloc_bytes as i64).wrapping_sub(c.free_bytes as i64),
        (c.alloc_blocks as i64).wrapping_sub(c.free_blocks as i64),
    )
}

impl Delta {
    pub(crate) fn between(a: &Snapshot, b: &Snapshot) -> Delta {
        let is_window = is_window(a, b);
        let window = change(&total(b), &total(a), is_window);
        let young = (
            b.young_free.0.saturating_sub(a.young_free.0),
            b.young_free.1.saturating_sub(a.young_free.1),
        );
        // Survivors need the window to start where `b`'s step started, so that every block born
        // in that step was born inside the window: `a` is the checkpoint that closed the step
        // before, or the very start (nothing allocated yet) when `b` is in the first step. A
        // window starting inside a step (`measure`, two snapshots) has no survivors.
        let starts_the_step = (a.checkpoint && a.epoch.checked_add(1) == Some(b.epoch))
            || (b.epoch == 0 && total(a).alloc_blocks == 0);
        let one_epoch = is_window && starts_the_step;
        let survivors = one_epoch.then(|| survivors_of(&window, young));

        let count_change = |after: &Counts, before: &Counts| change(after, before, is_window);
        let mut classes: Vec<ClassDelta> = changes_of(
            a.classes.iter().map(|c| (c.size, c.counts)),
            b.classes.iter().map(|c| (c.size, c.counts)),
            count_change,
        )
        .into_iter()
        .map(|(size, d)| {
            let (live_bytes, live_blocks) = live_change(&d);
            ClassDelta {
                size: size as usize,
                live_bytes,
                live_blocks,
                allocs: known(d.alloc_blocks, is_window),
                frees: known(d.free_blocks, is_window),
            }
        })
        .collect();
        classes.sort_by(|x, y| y.live_bytes.cmp(&x.live_bytes).then(x.size.cmp(&y.size)));

        let mut tags: Vec<TagDelta> = changes_of(
            a.tags.iter().map(|t| (t.tag.as_str(), t.counts)),
            b.tags.iter().map(|t| (t.tag.as_str(), t.counts)),
            count_change,
        )
        .into_iter()
        .map(|(tag, d)| {
            let (live_bytes, live_blocks) = live_change(&d);
            TagDelta {
                tag: scope::static_tag(tag),
                live_bytes,
                live_blocks,
                allocated_bytes: known(d.alloc_bytes, is_window),
            }
        })
        .collect();
        tags.sort_by(|x, y| y.live_bytes.cmp(&x.live_bytes).then(x.tag.cmp(y.tag)));

        Delta {
            label: b.label.clone(),
            from_label: a.label.clone(),
            after: Some(b.totals),
            window,
            survivors,
            classes,
            tags,
            raw_sites: site_changes(a, b, is_window),
            sites: OnceLock::new(),
            types: OnceLock::new(),
            pool: b.pool.clone(),
            seconds: (b.seconds - a.seconds).max(0.0),
            unix_nanos: b.unix_nanos,
            // Either side's site figures being estimates makes their difference one.
            sampled_mean: b.sampled_mean.or(a.sampled_mean),
            program: b.program.clone(),
            pid: b.pid,
            comparison: !is_window,
            names_start: is_window
                && (b.epoch.saturating_sub(a.epoch) > 1 || a.by_clock != b.by_clock),
            shared: false,
        }
    }

    /// Marks a delta as covering one thread only (no process totals).
    pub(crate) fn thread_only(mut self) -> Delta {
        self.after = None;
        // A thread's window never starts a step for the process: other threads' blocks born in
        // the step may be freed on this one.
        self.survivors = None;
        self
    }

    /// The label of the later snapshot (the checkpoint that ended the step).
    ///
    /// ```
    /// assert_eq!(heapdelta::checkpoint("warm-up").label(), Some("warm-up"));
    /// ```
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The label of the earlier snapshot (the checkpoint that started the step).
    ///
    /// ```
    /// heapdelta::checkpoint("a");
    /// assert_eq!(heapdelta::checkpoint("b").from_label(), Some("a"));
    /// ```
    pub fn from_label(&self) -> Option<&str> {
        self.from_label.as_deref()
    }

    /// Change in live bytes.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let (v, d) = heapdelta::measure(|| vec![0u8; 4096]);
    /// assert_eq!(d.live_bytes(), 4096);
    /// # drop(v);
    /// # }
    /// ```
    pub fn live_bytes(&self) -> i64 {
        live_change(&self.window).0
    }

    /// Change in live blocks.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let (v, d) = heapdelta::measure(|| vec![0u8; 16]);
    /// assert_eq!(d.live_blocks(), 1);
    /// # drop(v);
    /// # }
    /// ```
    pub fn live_blocks(&self) -> i64 {
        live_change(&self.window).1
    }

    /// Bytes allocated in the window (whether freed since or not); 0 in a
    /// [comparison](Delta::is_comparison), where they are not known.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let ((), d) = heapdelta::measure(|| drop(vec![0u8; 100]));
    /// assert_eq!(d.allocated_bytes(), 100);
    /// assert_eq!(d.live_bytes(), 0);
    /// # }
    /// ```
    pub fn allocated_bytes(&self) -> u64 {
        known(self.window.alloc_bytes, !self.comparison)
    }

    /// Blocks allocated in the window (whether freed since or not); 0 in a
    /// [comparison](Delta::is_comparison).
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let ((), d) = heapdelta::measure(|| drop(vec![0u8; 100]));
    /// assert_eq!(d.allocated_blocks(), 1);
    /// # }
    /// ```
    pub fn allocated_blocks(&self) -> u64 {
        known(self.window.alloc_blocks, !self.comparison)
    }

    /// Whether this delta compares two snapshots that do not make a window of one run: snapshots
    /// of two runs (read from files), or the later one given first. Its live figures are then the
    /// differences between what was live in each, and the allocations and frees between them are
    /// not known: they read 0, and there are no survivors.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let before = heapdelta::snapshot();
    /// let kept = vec![0u8; 100];
    /// let after = heapdelta::snapshot();
    /// assert!(!after.since(&before).is_comparison());
    /// // The later snapshot given first: its running counts are the higher.
    /// assert!(before.since(&after).is_comparison());
    /// # drop(kept);
    /// # }
    /// ```
    pub fn is_comparison(&self) -> bool {
        self.comparison
    }

    /// Whether this [`measure`](crate::measure) delta counts other threads' events too: it ran
    /// on a thread without counters of its own (every one of the 255 private ones was held by a
    /// live thread, or the thread was exiting), whose events are counted with those of every
    /// thread in the same position. Its text says so under the first line. Always `false` for a
    /// delta between snapshots, which covers the process.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let (v, d) = heapdelta::measure(|| vec![0u8; 64]);
    /// assert!(!d.counts_other_threads());
    /// # drop(v);
    /// # }
    /// ```
    pub fn counts_other_threads(&self) -> bool {
        self.shared
    }

    /// Process totals at the end of the window (`None` for a [`measure`](crate::measure) delta,
    /// which covers one thread).
    ///
    /// ```
    /// let t = heapdelta::checkpoint("now").totals().expect("a checkpoint has process totals");
    /// assert!(t.live_bytes <= t.peak_bytes);
    /// let ((), d) = heapdelta::measure(|| ());
    /// assert!(d.totals().is_none());
    /// ```
    pub fn totals(&self) -> Option<Totals> {
        self.after
    }

    /// For a window that is one step (between two consecutive checkpoints, or from the last
    /// checkpoint to now): the blocks born in the step that are still alive, and the older blocks
    /// freed in it. `None` for other windows: longer ones, ones that start inside a step (two
    /// [`snapshot`](crate::snapshot)s, [`measure`](crate::measure)), and comparisons.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// heapdelta::checkpoint("before");
    /// let kept = vec![0u8; 256];
    /// let step = heapdelta::checkpoint("after");
    /// // `kept` was born in the step and outlived it.
    /// assert!(step.survivors().expect("one step").bytes >= 256);
    /// let ((), inside) = heapdelta::measure(|| ());
    /// assert!(inside.survivors().is_none());
    /// # drop(kept);
    /// # }
    /// ```
    pub fn survivors(&self) -> Option<Survivors> {
        self.survivors
    }

    /// Growth per call site, largest live-bytes growth first. Symbols are resolved on the first
    /// call (and cached process-wide).
    ///
    /// One entry per call path: a function reached from two callers is two entries, whose first
    /// frame is the same. The text reports (`Display`, [`table`](Delta::table) by site) add such
    /// entries together, by first frame and type; to assert on one site in a test, sum the
    /// entries whose first frame is its function, or use the table.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let (_v, d) = heapdelta::measure(|| vec![1u64; 32]);
    /// let top = d.sites().first().expect("one site grew");
    /// println!("{} grew by {} B", top.site, top.live_bytes);
    /// assert_eq!(top.live_bytes, 256);
    /// # }
    /// ```
    pub fn sites(&self) -> &[SiteDelta] {
        self.sites.get_or_init(|| {
            thread::untracked(|| {
                resolve_sites(&self.raw_sites, self.survivors.is_some(), !self.comparison)
            })
        })
    }

    /// Growth per size class, largest live-bytes growth first.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let (_v, d) = heapdelta::measure(|| vec![0u8; 1000]);
    /// for c in d.size_classes() {
    ///     println!("class {} B: {:+} blocks", c.size, c.live_blocks);
    /// }
    /// // Above 512 bytes there are four classes per power of two: 1000 bytes is in class 1024.
    /// assert_eq!((d.size_classes()[0].size, d.size_classes()[0].live_blocks), (1024, 1));
    /// # }
    /// ```
    pub fn size_classes(&self) -> &[ClassDelta] {
        &self.classes
    }

    /// Growth per scope tag, largest live-bytes growth first. Only allocations made inside a
    /// [`scope`](crate::scope) are counted here (the rest are in no tag's entry), and tags
    /// that saw no allocation or free in the window are left out.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let ((a, b), d) = heapdelta::measure(|| {
    ///     let a = {
    ///         let _g = heapdelta::scope("load");
    ///         vec![0u8; 300]
    ///     };
    ///     let _g = heapdelta::scope("parse");
    ///     (a, vec![0u8; 100])
    /// });
    /// let tags: Vec<(&str, i64)> = d.tags().iter().map(|t| (t.tag, t.live_bytes)).collect();
    /// assert_eq!(tags, [("load", 300), ("parse", 100)]);
    /// # drop((a, b));
    /// # }
    /// ```
    pub fn tags(&self) -> &[TagDelta] {
        &self.tags
    }

    /// Growth per allocated type (derived from the call sites' symbols), largest first.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let (_s, d) = heapdelta::measure(|| String::from("hello"));
    /// let names: Vec<&str> = d.types().iter().map(|t| t.type_name.as_str()).collect();
    /// println!("{names:?}"); // ["String"] with debug information, else ["(unknown)"]
    /// assert_eq!(d.types().len(), 1);
    /// assert_eq!(d.types()[0].live_bytes, 5);
    /// # }
    /// ```
    pub fn types(&self) -> &[TypeDelta] {
        self.types.get_or_init(|| {
            thread::untracked(|| {
                let mut by: HashMap<&str, TypeDelta> = HashMap::new();
                for s in self.sites() {
                    let t = by.entry(s.site.type_name()).or_insert_with(|| TypeDelta {
                        type_name: s.site.type_name().to_string(),
                        live_bytes: 0,
                        live_blocks: 0,
                        allocs: 0,
                    });
                    t.live_bytes = t.live_bytes.saturating_add(s.live_bytes);
                    t.live_blocks = t.live_blocks.saturating_add(s.live_blocks);
                    t.allocs = t.allocs.saturating_add(s.allocs);
                }
                let mut v: Vec<TypeDelta> = by.into_values().collect();
                v.sort_by(|x, y| {
                    y.live_bytes
                        .cmp(&x.live_bytes)
                        .then_with(|| x.type_name.cmp(&y.type_name))
                });
                v
            })
        })
    }

    /// The pool's statistics at the end of the window, when a [`Pool`](crate::Pool) is in use.
    ///
    /// ```
    /// // With the system allocator there is no pool.
    /// assert!(heapdelta::checkpoint("now").pool().is_none());
    /// ```
    pub fn pool(&self) -> Option<&PoolStats> {
        self.pool.as_ref()
    }
}

/// Per-site changes from `a` to `b` (a window when `window`, see `change`), keyed by interned id
/// in this process, by resolved site otherwise (files); sites of two snapshots of one run are
/// paired by id, of two runs by their frames.
fn site_changes(a: &Snapshot, b: &Snapshot, window: bool) -> Vec<(SiteKey, SiteWindow)> {
    let since = |after: &SiteWindow, before: &SiteWindow| after.since(before, window);
    if a.run == b.run {
        // Within one run an id is one site. Sites in chunks the two snapshots share did not
        // change (consecutive checkpoints share most of theirs).
        let here = b.run == checkpoint::run_id();
        let window_of = |s: Option<&SiteCount>| s.map_or_else(SiteWindow::default, SiteWindow::of);
        b.sites
            .unshared_with(&a.sites)
            .into_iter()
            .filter_map(|(id, before, after)| {
                let w = since(&window_of(after), &window_of(before));
                if w == SiteWindow::default() {
                    return None;
                }
                let key = match (here, after.or(before).and_then(|s| s.site.as_ref())) {
                    (true, _) => SiteKey::Id(id),
                    (false, Some(site)) => SiteKey::Resolved(site.clone()),
                    (false, None) => SiteKey::Resolved(Site::unknown()),
                };
                Some((key, w))
            })
            .collect()
    } else {
        let by_site = |snap: &Snapshot| {
            let mut m: HashMap<Site, SiteWindow> = HashMap::new();
            for s in &snap.sites {
                let site = s.site.clone().unwrap_or_else(Site::unknown);
                m.entry(site).or_default().add(&SiteWindow::of(s));
            }
            m
        };
        changes_of(by_site(a), by_site(b), since)
            .into_iter()
            .map(|(site, w)| (SiteKey::Resolved(site), w))
            .collect()
    }
}

/// The change of every group `a` or `b` holds, by key (`change(after, before)`), without the
/// groups that did not change. A group only `a` holds changed to nothing: in a window that cannot
/// happen (counts only grow), in a comparison it is what was live there and is gone.
fn changes_of<K: Eq + std::hash::Hash, V: Copy + Default + PartialEq>(
    a: impl IntoIterator<Item = (K, V)>,
    b: impl IntoIterator<Item = (K, V)>,
    change: impl Fn(&V, &V) -> V,
) -> Vec<(K, V)> {
    let mut before: HashMap<K, V> = a.into_iter().collect();
    let mut out: Vec<(K, V)> = b
        .into_iter()
        .map(|(k, after)| {
            let earlier = before.remove(&k).unwrap_or_default();
            (k, change(&after, &earlier))
        })
        .collect();
    out.extend(
        before
            .into_iter()
            .map(|(k, earlier)| (k, change(&V::default(), &earlier))),
    );
    out.retain(|(_, v)| *v != V::default());
    out
}

/// Resolves, merges sites that resolve to the same logical site, converts units, and sorts;
/// `one_step` when the window is one step, so sites get survivors; `window` unless the changes
/// compare two snapshots (see `change`), whose allocations are not known.
fn resolve_sites(raw: &[(SiteKey, SiteWindow)], one_step: bool, window: bool) -> Vec<SiteDelta> {
    let mut merged: HashMap<Site, SiteWindow> = HashMap::new();
    for (key, w) in raw {
        let site = match key {
            SiteKey::Id(id) => callsite::resolve(*id),
            SiteKey::Resolved(site) => site.clone(),
        };
        merged.entry(site).or_default().add(w);
    }
    let mut v: Vec<SiteDelta> = merged
        .into_iter()
        .map(|(site, w)| {
            let c = w.counts;
            let allocs = units_to_blocks(c.alloc_blocks);
            let frees = units_to_blocks(c.free_blocks);
            let survivors = one_step.then(|| {
                let s = survivors_of(&c, w.young_free);
                Survivors {
                    blocks: units_to_blocks(s.blocks),
                    freed_older_blocks: units_to_blocks(s.freed_older_blocks),
                    ..s
                }
            });
            SiteDelta {
                site,
                live_bytes: (c.alloc_bytes as i64).wrapping_sub(c.free_bytes as i64),
                live_blocks: allocs as i64 - frees as i64,
                allocs: known(allocs, window),
                frees: known(frees, window),
                allocated_bytes: known(c.alloc_bytes, window),
                survivors,
            }
        })
        .collect();
    sort_sites(&mut v);
    v
}

/// Sorts sites in the order they are listed in: largest growth first, then by name; ties broken
/// by the other figures (allocations, live blocks, frees and bytes allocated, larger first), the
/// type and the outer frames, so that the order does not depend on which thread reached a site
/// first. Each site's name and frames are made once, not at every comparison (a fuzz run's
/// snapshot of 200,000 sites took 10 s to `show`, most of it naming sites to compare them).
pub(crate) fn sort_sites(sites: &mut [SiteDelta]) {
    use std::cmp::Reverse;
    sites.sort_by_cached_key(|s| {
        let frames: Vec<(String, Option<String>, Option<u32>)> = s
            .site
            .frames()
            .iter()
            .map(|f| (f.function.clone(), f.file.clone(), f.line))
            .collect();
        (
            Reverse(s.live_bytes),
            s.site.to_string(),
            Reverse((s.allocs, s.live_blocks, s.frees, s.allocated_bytes)),
            s.site.type_name().to_string(),
            frames,
        )
    });
}

/// A call site whose live bytes grew in most recent steps: the leak suspect, from
/// [`Timeline::growing`] and [`Timeline::growing_in`].
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// let mut leak = Vec::new();
/// for step in 0..4 {
///     leak.push(vec![0u8; 1024]);
///     heapdelta::checkpoint(format!("step {step}"));
/// }
/// let growing = heapdelta::timeline().growing();
/// for g in &growing {
///     println!("{} grew in {} of {} steps ({:+} B)", g.site, g.steps_grown, g.steps, g.live_bytes);
/// }
/// // The site of `vec![0u8; 1024]` grew at each of the 3 steps between the 4 checkpoints.
/// assert!(growing.iter().any(|g| g.steps_grown == 3 && g.live_bytes == 3 * 1024));
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Growth {
    /// The site, as reports name it: its first frame and the type allocated there (call paths that
    /// differ further out are counted together; flamegraphs and pprof keep them apart).
    pub site: Site,
    /// In how many of the examined steps its live bytes rose.
    pub steps_grown: usize,
    /// How many steps were examined.
    pub steps: usize,
    /// Its live-bytes change over those steps.
    pub live_bytes: i64,
}

/// Every checkpoint of the run, in order, from [`timeline`](crate::timeline) or
/// [`Timeline::read_json`]. `Display` prints the sites that grew at every recent step (or, when
/// none did and the live total fell at the last steps, those that grew at every step up to that
/// fall), then one line per checkpoint.
///
/// Under [`keep_checkpoints`](crate::keep_checkpoints) it holds the first checkpoint and the
/// latest ones only. A timeline read from the file `HEAPDELTA=report=` writes at exit ends with
/// one more snapshot, labelled `exit`, that is not a checkpoint.
///
/// ```
/// for step in 1..=3 {
///     heapdelta::checkpoint(format!("step {step}"));
/// }
/// let t = heapdelta::timeline();
/// assert_eq!(t.checkpoints().len(), 3);
/// for g in t.growing() {
///     println!("{} grew in {}/{} steps", g.site, g.steps_grown, g.steps);
/// }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    pub(crate) checkpoints: Vec<Snapshot>,
}

/// Steps the default growth detector looks at.
pub const GROWTH_WINDOW: usize = 5;

impl Timeline {
    pub(crate) fn new(checkpoints: Vec<Snapshot>) -> Timeline {
        Timeline { checkpoints }
    }

    /// The checkpoints, oldest first.
    ///
    /// ```
    /// heapdelta::checkpoint("first");
    /// assert!(heapdelta::timeline().checkpoints().iter().any(|c| c.label() == Some("first")));
    /// ```
    pub fn checkpoints(&self) -> &[Snapshot] {
        &self.checkpoints
    }

    /// The growth of each step: from the start to the first checkpoint, then between consecutive
    /// checkpoints.
    ///
    /// ```
    /// heapdelta::checkpoint("a");
    /// heapdelta::checkpoint("b");
    /// let t = heapdelta::timeline();
    /// assert_eq!(t.steps().len(), t.checkpoints().len());
    /// ```
    pub fn steps(&self) -> Vec<Delta> {
        let Some(first) = self.checkpoints.first() else {
            return Vec::new();
        };
        // The state before the first allocation, of the first checkpoint's run (a timeline read
        // from a file is another run than this process's).
        let zero = Snapshot {
            run: first.run,
            ..Snapshot::zero()
        };
        let mut prev = &zero;
        let mut out = Vec::with_capacity(self.checkpoints.len());
        for c in &self.checkpoints {
            out.push(c.since(prev));
            prev = c;
        }
        out
    }

    /// The checkpoints that end steps: all of them but a final snapshot that is not a checkpoint,
    /// such as the `exit` snapshot `HEAPDELTA=report=` adds after `main` has dropped its data
    /// (counting that fall as a step would hide every leak from the growth detector).
    pub(crate) fn step_ends(&self) -> &[Snapshot] {
        match self.checkpoints.split_last() {
            Some((last, rest)) if !last.checkpoint => rest,
            _ => &self.checkpoints,
        }
    }

    /// How many checkpoints were taken between the ones the timeline holds and not kept
    /// (`keep_checkpoints`, `HEAPDELTA=keep=`), told by their epochs.
    pub(crate) fn dropped(&self) -> u64 {
        self.checkpoints
            .windows(2)
            .map(|w| u64::from(not_kept_between(&w[0], &w[1])))
            .sum()
    }

    /// The step ends from the last checkpoint the timeline did not keep on: the ends of the steps
    /// the growth detector looks at, which are steps the program made, not a span of dropped ones.
    /// Of a timeline where both the program and heapdelta's clock (`HEAPDELTA=every=`) took
    /// checkpoints, those of one kind (see `steps_of`): each kind's steps are alike, and the two
    /// interleaved cut each other's steps into slivers in which a steady leak did not grow (a
    /// user trial: `growing at every step: none` once `every=1` was added to a program that
    /// checkpointed its batches).
    pub(crate) fn unbroken_step_ends(&self) -> Vec<&Snapshot> {
        let ends = self.unbroken();
        match steps_of(ends) {
            Some(by_clock) => ends.iter().filter(|s| s.by_clock == by_clock).collect(),
            None => ends.iter().collect(),
        }
    }

    /// The step ends from the last checkpoint the timeline did not keep on, of both kinds.
    fn unbroken(&self) -> &[Snapshot] {
        let ends = self.step_ends();
        let start = (1..ends.len())
            .rev()
            .find(|&i| not_kept_between(&ends[i - 1], &ends[i]) > 0)
            .unwrap_or(0);
        &ends[start..]
    }

    /// When the growth detector follows one kind of checkpoint only (see `unbroken_step_ends`),
    /// which: for the lines that name its window.
    pub(crate) fn detector_follows(&self) -> Option<&'static str> {
        steps_of(self.unbroken()).map(|by_clock| match by_clock {
            true => "the clock's checkpoints (every=)",
            false => "the program's checkpoints",
        })
    }

    /// Whether the live total rose in each of the steps [`growing`](Timeline::growing) looks
    /// at: `Some((steps, growth in bytes, whether those steps recorded any call site))`. When no
    /// site is growing, this tells a detector that had too little to go by (call sites off, or
    /// sampled too sparsely for the growth) from a heap that did not grow.
    pub(crate) fn live_rose_at_every_step(&self) -> Option<(usize, i64, bool)> {
        let ends = self.unbroken_step_ends();
        let n = GROWTH_WINDOW.min(ends.len().saturating_sub(1));
        if n < 2 {
            return None;
        }
        let window = &ends[ends.len() - n - 1..];
        let live = |s: &Snapshot| s.totals.live_bytes as i64;
        let rose = window.windows(2).all(|w| live(w[1]) > live(w[0]));
        let sited = window[1..].iter().any(|s| s.sites.iter().next().is_some());
        rose.then(|| (n, live(window[n]).saturating_sub(live(window[0])), sited))
    }

    /// Over the steps [`growing`](Timeline::growing) looks at: the live total's change, and the
    /// sites whose live bytes rose in some of those steps but not all and grew over them, the
    /// most first. A leak's own tables grow so, by doubling now and then (a user trial: an
    /// interner's strings grew at every step, +48.9 KiB, its map and vector +328 KiB in two).
    /// `None` under two steps.
    pub(crate) fn grown_in_window(&self) -> Option<(i64, Vec<Growth>)> {
        let ends = self.unbroken_step_ends();
        let n = GROWTH_WINDOW.min(ends.len().saturating_sub(1));
        if n < 2 {
            return None;
        }
        let live = |s: &Snapshot| s.totals.live_bytes as i64;
        let change = live(ends[ends.len() - 1]).saturating_sub(live(ends[ends.len() - n - 1]));
        let mut some: Vec<Growth> = growing_over(&ends, 1, n)
            .into_iter()
            .filter(|g| g.steps_grown < n && g.live_bytes > 0)
            .collect();
        some.sort_by_key(|g| std::cmp::Reverse(g.live_bytes));
        Some((change, some))
    }

    /// The checkpoint labelled `label`; an error when no checkpoint has that label, or when
    /// several have it (which one is meant cannot be told). `label#n` picks the `n`th checkpoint
    /// labelled `label` the timeline holds (from 1, in the order they were taken; with
    /// [`keep_checkpoints`](crate::keep_checkpoints), of those kept), so a script can number its
    /// picks whether a label repeats or not. A checkpoint labelled `label#n` itself is found by
    /// that label beside a single checkpoint labelled `label`; beside several, which one is meant
    /// cannot be told, and that is an error too.
    ///
    /// ```
    /// heapdelta::checkpoint("loaded");
    /// assert!(heapdelta::timeline().find("loaded").is_ok());
    /// assert!(heapdelta::timeline().find("nope").is_err());
    ///
    /// heapdelta::checkpoint("tick");
    /// heapdelta::checkpoint("tick");
    /// let t = heapdelta::timeline();
    /// assert!(t.find("tick").is_err()); // which one?
    /// assert!(t.find("tick#2").is_ok());
    /// ```
    pub fn find(&self, label: &str) -> Result<&Snapshot, Error> {
        let mut found = self.labelled(label);
        match (found.next(), found.count()) {
            // A checkpoint labelled `x#1` itself is ambiguous with the first of several `x`, not
            // with a single `x`, whose `x#1` is only a convenience (a review: a timeline of
            // `batch` and `batch#1` could no longer pick `batch#1`).
            (Some(c), 0) => match self.nth_labelled(label, 2) {
                Some(Ok(_)) => Err(Error::NumberedLabelTaken {
                    label: label.to_string(),
                }),
                _ => Ok(c),
            },
            (Some(_), others) => Err(Error::AmbiguousLabel {
                label: label.to_string(),
                count: others + 1,
                dropped: self.dropped(),
            }),
            (None, _) => match self.nth_labelled(label, 1) {
                Some(picked) => picked,
                None => Err(Error::UnknownLabel {
                    label: label.to_string(),
                    known: self
                        .checkpoints
                        .iter()
                        .filter_map(|c| c.label().map(str::to_string))
                        .collect(),
                    dropped: self.dropped(),
                }),
            },
        }
    }

    /// The checkpoints labelled `label`, in the order they were taken.
    fn labelled<'a: 'b, 'b>(&'a self, label: &'b str) -> impl Iterator<Item = &'a Snapshot> + 'b {
        self.checkpoints
            .iter()
            .filter(move |c| c.label() == Some(label))
    }

    /// For `label#n` (`n` written in digits, without leading zeros), the `n`th checkpoint labelled
    /// `label`, counted from 1, or the error saying how many there are when fewer than `n` do;
    /// `None` when `label#n` is not of that form or fewer than `least` checkpoints are labelled
    /// `label`.
    fn nth_labelled(&self, label: &str, least: usize) -> Option<Result<&Snapshot, Error>> {
        let (label, n) = label.rsplit_once('#')?;
        if n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: usize = n.parse().ok()?;
        let count = self.labelled(label).count();
        if count < least {
            return None;
        }
        Some(
            self.labelled(label)
                .nth(n - 1)
                .ok_or_else(|| Error::NoSuchNumber {
                    label: label.to_string(),
                    n,
                    count,
                    dropped: self.dropped(),
                }),
        )
    }

    /// The growth between the checkpoints labelled `from` and `to`: a window over all the steps
    /// between them. An error when either label is unknown or ambiguous (as for
    /// [`find`](Timeline::find)), when `to` comes before `from` ([`Error::ReversedWindow`]), or
    /// when both name the same checkpoint ([`Error::EmptyWindow`]: the step ending at a
    /// checkpoint starts at the one before).
    ///
    /// ```
    /// heapdelta::checkpoint("a");
    /// heapdelta::checkpoint("b");
    /// let t = heapdelta::timeline();
    /// assert!(t.between("a", "b").is_ok());
    /// assert!(t.between("a", "no such step").is_err());
    /// assert!(t.between("b", "a").is_err());
    /// assert!(t.between("b", "b").is_err());
    /// ```
    pub fn between(&self, from: &str, to: &str) -> Result<Delta, Error> {
        self.window(Some(from), Some(to))
    }

    /// [`between`](Timeline::between) with either end left out: the first checkpoint, or the
    /// last that ends a step (not the `exit` snapshot). Left out before the first checkpoint,
    /// the start is the program's (its first step, as [`steps`](Timeline::steps) gives it).
    /// `None` ends are found by place, not by a label, which can repeat (the CLI's `--from` or
    /// `--to` alone).
    pub(crate) fn window(&self, from: Option<&str>, to: Option<&str>) -> Result<Delta, Error> {
        let none = || Error::Format("the timeline holds no checkpoint".to_string());
        let start = match from {
            Some(label) => self.find(label)?,
            None => self.checkpoints.first().ok_or_else(none)?,
        };
        let end = match to {
            Some(label) => self.find(label)?,
            None => self.step_ends().last().ok_or_else(none)?,
        };
        let name = |given: Option<&str>, s: &Snapshot| {
            given
                .or(s.label())
                .map_or_else(|| "(unlabelled)".to_string(), str::to_string)
        };
        let position = |s: &Snapshot| self.checkpoints.iter().position(|c| std::ptr::eq(c, s));
        if position(end) < position(start) {
            return Err(Error::ReversedWindow {
                from: name(from, start),
                to: name(to, end),
            });
        }
        if position(end) == position(start) {
            if from.is_none() {
                return Ok(end.since_start());
            }
            return Err(Error::EmptyWindow {
                from: name(from, start),
                label: name(to, end),
            });
        }
        let mut delta = end.since(start);
        // A checkpoint picked by its number among several of one label (`tick#2`) is named so.
        if let Some(from) = from.filter(|&f| start.label() != Some(f)) {
            delta.from_label = Some(from.to_string());
        }
        if let Some(to) = to.filter(|&t| end.label() != Some(t)) {
            delta.label = Some(to.to_string());
        }
        Ok(delta)
    }

    /// Sites whose live bytes rose in every one of the last 5 steps between checkpoints (or in
    /// every such step, when there are fewer; at least 3 checkpoints, so 2 steps, are needed). A
    /// final snapshot that is not a checkpoint, as the `exit` one of `HEAPDELTA=report=`, ends no
    /// step, and the span across checkpoints that were not kept
    /// ([`keep_checkpoints`](crate::keep_checkpoints), `HEAPDELTA=keep=`) is not a step:
    /// only the steps after it count. When both the program and heapdelta's clock
    /// (`HEAPDELTA=every=`) took checkpoints, the steps are those between checkpoints of one
    /// kind: the kind of the last one (or the other, when the last one's kind took fewer than
    /// three); `Display` names it.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let mut kept = Vec::with_capacity(6);
    /// for step in 0..6 {
    ///     kept.push(vec![0u8; 1024]); // a new block every step: a leak
    ///     heapdelta::checkpoint(format!("step {step}"));
    /// }
    /// let growing = heapdelta::timeline().growing();
    /// println!("{growing:?}");
    /// // 6 checkpoints make 5 steps, and the leak grew in all of them.
    /// assert!(growing.iter().any(|g| (g.steps_grown, g.steps) == (5, 5)));
    /// # }
    /// ```
    pub fn growing(&self) -> Vec<Growth> {
        growing_at_every_step(&self.unbroken_step_ends())
    }

    /// When the live total did not rise at the last steps, as a program freeing its data on its
    /// way out makes it fall (an `every=` checkpoint taken then; the `exit` snapshot is not a step
    /// already), or a service holds it once its traffic stopped (an operator trial's file, read
    /// after a quiet spell, named no site): the checkpoint before those steps, how many came after
    /// it, whether the total fell over them (or held), and the sites that grew at every step up
    /// to it (as [`growing`](Timeline::growing) finds them over the steps that end there). `None`
    /// when the last step rose, or no site grew so, or the total held after fewer steps than the
    /// detector's window.
    pub(crate) fn growing_before_fall(&self) -> Option<(&Snapshot, usize, bool, Vec<Growth>)> {
        let ends = self.unbroken_step_ends();
        let live = |i: usize| ends[i].totals.live_bytes;
        let last = ends.len().checked_sub(1)?;
        let mut peak = last;
        while peak > 0 && live(peak) <= live(peak - 1) {
            peak -= 1;
        }
        let after = last - peak;
        if after == 0 {
            return None;
        }
        let fell = live(last) < live(peak);
        // A total that held after a rise of fewer steps than the detector's window is a warm-up
        // (a review: three cache layers loaded, then a steady run, read as growth).
        if !fell && peak < GROWTH_WINDOW {
            return None;
        }
        let growing = growing_at_every_step(&ends[..=peak]);
        (!growing.is_empty()).then(|| (ends[peak], after, fell, growing))
    }

    /// Sites whose live bytes rose in at least `k` of the last `n` steps, most steps first (of
    /// fewer steps when there are fewer since the last checkpoint not kept, and between
    /// checkpoints of one kind when the program and the clock both took some: see
    /// [`growing`](Timeline::growing)).
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let mut cache = Vec::with_capacity(11);
    /// for step in 0..=10 {
    ///     if step % 5 != 3 {
    ///         cache.push(vec![0u8; 512]); // grows at most steps, not all
    ///     }
    ///     heapdelta::checkpoint(format!("step {step}"));
    /// }
    /// let t = heapdelta::timeline();
    /// // Sites that grew in at least 8 of the last 10 steps.
    /// let suspects = t.growing_in(8, 10);
    /// let cache_site = suspects
    ///     .iter()
    ///     .find(|g| (g.steps_grown, g.steps) == (8, 10))
    ///     .expect("the cache's site");
    /// // It did not grow at every one of the last 5 steps, so `growing` leaves it out.
    /// assert!(t.growing().iter().all(|g| g.site != cache_site.site));
    /// # }
    /// ```
    pub fn growing_in(&self, k: usize, n: usize) -> Vec<Growth> {
        growing_over(&self.unbroken_step_ends(), k, n)
    }
}

/// The sites whose live bytes rose at every one of the last `GROWTH_WINDOW` steps that `ends`
/// (checkpoints ending steps, in order) close, or of all of them when fewer; none under two steps.
fn growing_at_every_step(ends: &[&Snapshot]) -> Vec<Growth> {
    let n = GROWTH_WINDOW.min(ends.len().saturating_sub(1));
    if n < 2 {
        return Vec::new();
    }
    growing_over(ends, n, n)
}

/// The sites whose live bytes rose in at least `k` of the last `n` steps that `ends` (checkpoints
/// ending steps, in order) close, as [`Timeline::growing_in`] gives them.
fn growing_over(ends: &[&Snapshot], k: usize, n: usize) -> Vec<Growth> {
    let n = n.min(ends.len().saturating_sub(1));
    if n == 0 || k == 0 || k > n {
        return Vec::new();
    }
    let window = &ends[ends.len() - n - 1..];
    thread::untracked(|| {
        let series: Vec<HashMap<Site, i64>> = window.iter().map(|s| live_by_site(s)).collect();
        let last = &series[series.len() - 1];
        let mut out: Vec<Growth> = last
            .iter()
            .filter_map(|(site, &end)| {
                let at = |i: usize| series[i].get(site).copied().unwrap_or(0);
                let grown = (1..series.len()).filter(|&i| at(i) > at(i - 1)).count();
                (grown >= k).then(|| Growth {
                    site: site.clone(),
                    steps_grown: grown,
                    steps: n,
                    live_bytes: end.saturating_sub(at(0)),
                })
            })
            .collect();
        // Ties in the order sites are listed everywhere else, so that every run, and every
        // call, lists them alike.
        out.sort_by_cached_key(|g| {
            (
                std::cmp::Reverse((g.steps_grown, g.live_bytes)),
                g.site.to_string(),
                g.site.type_name().to_string(),
            )
        });
        out
    })
}

/// Of step ends taken by both the program and heapdelta's clock, which kind the growth detector
/// follows: `Some(true)` the clock's, `Some(false)` the program's; `None` when all are of one kind.
/// The kind of the last step end, the most recent: a program that checkpointed one phase and left
/// the next to the clock leaks, if it does, in the clock's steps (a review: following whichever
/// kind took more looked at the old phase alone). Unless that kind has too few step ends for two
/// steps and the other has enough: a program's last `done` after a run of the clock's.
fn steps_of(ends: &[Snapshot]) -> Option<bool> {
    let by_clock = ends.iter().filter(|s| s.by_clock).count();
    let by_program = ends.len() - by_clock;
    if by_clock == 0 || by_program == 0 {
        return None;
    }
    let last = ends.last()?.by_clock;
    let (mine, other) = match last {
        true => (by_clock, by_program),
        false => (by_program, by_clock),
    };
    Some(if mine < 3 && other >= 3 { !last } else { last })
}

/// How many checkpoints were taken between `a` and the later `b` and are in neither: none unless
/// both are of one run and their epochs are more than one apart.
pub(crate) fn not_kept_between(a: &Snapshot, b: &Snapshot) -> u32 {
    if a.run != b.run {
        return 0;
    }
    b.epoch.saturating_sub(a.epoch).saturating_sub(1)
}

/// Live bytes per call site in one snapshot, sites told apart as reports name them: by their first
/// frame and type (`Site::leaf`). Call paths that differ further out are added together: one
/// recursive function cut at different depths by the capture's frame limit is one site.
pub(crate) fn live_by_site(s: &Snapshot) -> HashMap<Site, i64> {
    let mut m: HashMap<Site, i64> = HashMap::new();
    let here = s.run == checkpoint::run_id();
    for c in &s.sites {
        let site = match (&c.site, here) {
            (Some(site), _) => site.leaf(),
            (None, true) => callsite::resolve(c.id).leaf(),
            (None, false) => Site::unknown(),
        };
        let live = m.entry(site).or_default();
        *live = live.saturating_add(c.counts.live_bytes() as i64);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::Frame;
    use crate::snapshot::{SiteCount, SiteList};

    /// A site delta of `live_bytes` at `build (src/model.rs:8)`, called from `caller`, allocating
    /// `type_name`, `allocs` times.
    fn at_build(live_bytes: i64, allocs: u64, type_name: &str, caller: &str) -> SiteDelta {
        let frame = |function: &str, line| Frame {
            function: function.to_string(),
            file: Some("src/model.rs".to_string()),
            line: Some(line),
        };
        SiteDelta {
            site: Site::with_type(
                vec![frame("build", 8), frame(caller, 20)],
                Some(type_name.to_string()),
            ),
            live_bytes,
            live_blocks: 1,
            allocs,
            frees: 0,
            allocated_bytes: 0,
            survivors: None,
        }
    }

    #[test]
    fn sites_alike_in_name_and_growth_are_ordered_by_their_other_figures_type_and_callers() {
        let expected = [
            at_build(64, 2, "Vec<u8>", "main"),
            at_build(64, 1, "String", "main"),
            at_build(64, 1, "Vec<u8>", "load"),
            at_build(64, 1, "Vec<u8>", "main"),
        ];
        let mut sites = expected.clone();
        sites.reverse();
        sort_sites(&mut sites);
        assert_eq!(sites, expected);
    }

    /// Checkpoint `epoch` of another run, labelled `step {epoch}`, with `blocks` live blocks at
    /// one site.
    fn checkpoint_of_another_run(epoch: u32, blocks: u64) -> Snapshot {
        let mut s = Snapshot::zero();
        s.run ^= 1;
        s.epoch = epoch;
        s.checkpoint = true;
        s.label = Some(format!("step {epoch}"));
        s.sites = SiteList::new(vec![SiteCount::live(1, blocks)]);
        s
    }

    /// A timeline whose checkpoints 1 to 9 were not kept: steps 0, 10, 11, 12, the site growing
    /// by one block at each.
    fn timeline_with_checkpoints_not_kept() -> Timeline {
        Timeline::new(
            [(0, 0), (10, 1), (11, 2), (12, 3)]
                .into_iter()
                .map(|(epoch, blocks)| checkpoint_of_another_run(epoch, blocks))
                .collect(),
        )
    }

    #[test]
    fn the_growth_detector_leaves_out_the_span_across_checkpoints_not_kept() {
        let growing = timeline_with_checkpoints_not_kept().growing();
        assert_eq!(growing.len(), 1);
        assert_eq!((growing[0].steps_grown, growing[0].steps), (2, 2));
        assert_eq!(growing[0].live_bytes, 16);
    }

    /// Checkpoints 0, 1, … of one run with these labels.
    fn labelled_timeline(labels: &[&str]) -> Timeline {
        Timeline::new(
            labels
                .iter()
                .enumerate()
                .map(|(epoch, label)| {
                    let mut s = Snapshot::zero();
                    s.epoch = epoch as u32;
                    s.checkpoint = true;
                    s.label = Some(label.to_string());
                    s
                })
                .collect(),
        )
    }

    #[test]
    fn an_end_left_out_is_found_by_place_not_by_a_label_that_repeats() {
        // A review: a default end named `x#1` was taken for the literal label beside two `x`.
        let t = labelled_timeline(&["x", "x", "y", "x#1"]);
        let from_second = t.window(Some("x#2"), None).unwrap();
        assert!(
            from_second.summary().starts_with("| x#2 → x#1 |"),
            "{}",
            from_second.summary()
        );
        let t = labelled_timeline(&["a", "a#1", "b", "a"]);
        let to_second = t.window(None, Some("a#2")).unwrap();
        assert!(
            to_second.summary().starts_with("| a → a#2 |"),
            "{}",
            to_second.summary()
        );
    }

    #[test]
    fn a_window_to_the_first_checkpoint_alone_starts_at_the_program_start() {
        let t = labelled_timeline(&["start", "step 1"]);
        let first = t.window(None, Some("start")).unwrap();
        assert!(
            first.summary().starts_with("| start |"),
            "{}",
            first.summary()
        );
        assert!(t.window(Some("start"), Some("start")).is_err());
    }

    #[test]
    fn label_hash_n_picks_the_nth_of_checkpoints_sharing_a_label() {
        let t = labelled_timeline(&["start", "tick", "tick", "tick"]);
        assert!(matches!(
            t.find("tick"),
            Err(Error::AmbiguousLabel { count: 3, .. })
        ));
        assert_eq!(t.find("tick#1").map(|c| c.epoch).ok(), Some(1));
        assert_eq!(t.find("tick#3").map(|c| c.epoch).ok(), Some(3));
    }

    #[test]
    fn label_hash_n_past_the_checkpoints_sharing_the_label_names_n_and_the_range() {
        let t = labelled_timeline(&["start", "tick", "tick", "tick"]);
        let beyond = t.find("tick#9").unwrap_err();
        assert_eq!(
            beyond.to_string(),
            r#"no checkpoint "tick#9": only 3 checkpoints are labelled "tick"; pick one as "tick#1" to "tick#3""#
        );
    }

    #[test]
    fn a_window_from_a_checkpoint_to_itself_is_an_error() {
        let t = labelled_timeline(&["a", "b"]);
        let err = t.between("b", "b").unwrap_err();
        assert!(matches!(err, Error::EmptyWindow { .. }), "{err:?}");
        assert!(err.to_string().contains("holds no step"), "{err}");
    }

    #[test]
    fn a_window_between_two_names_of_one_checkpoint_names_both() {
        let t = labelled_timeline(&["a", "b"]);
        let err = t.between("b", "b#1").unwrap_err();
        assert!(
            err.to_string()
                .starts_with(r#""b" and "b#1" name the same checkpoint: the window holds no step"#),
            "{err}"
        );
    }

    #[test]
    fn a_window_between_checkpoints_picked_by_number_is_named_by_them() {
        let t = labelled_timeline(&["start", "tick", "tick", "tick"]);
        let d = t.between("tick#1", "tick#3").unwrap();
        assert_eq!(
            (d.from_label(), d.label()),
            (Some("tick#1"), Some("tick#3"))
        );
        let d = t.between("start", "tick#2").unwrap();
        assert_eq!((d.from_label(), d.label()), (Some("start"), Some("tick#2")));
    }

    #[test]
    fn label_hash_n_that_is_also_a_checkpoints_own_label_is_ambiguous() {
        // A user trial: told to pick one of two "x" as "x#1", the literal "x#1" was picked.
        let t = labelled_timeline(&["x", "x#1", "x", "x"]);
        let e = t.find("x#1").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#""x#1" names two checkpoints: one labelled so, and the 1st of those labelled "x"; give each checkpoint its own label"#
        );
        assert_eq!(t.find("x#3").map(|c| c.epoch).ok(), Some(3));
    }

    #[test]
    fn a_checkpoint_labelled_label_hash_n_is_found_when_no_other_shares_its_label() {
        let t = labelled_timeline(&["x", "x#2", "y"]);
        assert_eq!(t.find("x#2").map(|c| c.epoch).ok(), Some(1));
    }

    #[test]
    fn label_hash_1_picks_a_label_only_one_checkpoint_has() {
        // A user trial's script numbered its picks; "batch 3#1" was unknown as "batch 3" was unique.
        let t = labelled_timeline(&["start", "batch 3", "batch 4"]);
        assert_eq!(t.find("batch 3#1").map(|c| c.epoch).ok(), Some(1));
        assert_eq!(
            t.find("batch 3#2").unwrap_err().to_string(),
            r#"no checkpoint "batch 3#2": only 1 checkpoint is labelled "batch 3"; pick it as "batch 3" or "batch 3#1""#
        );
    }

    #[test]
    fn a_checkpoint_labelled_label_hash_1_is_found_beside_a_single_checkpoint_labelled_label() {
        let t = labelled_timeline(&["batch", "batch#1", "batch#2"]);
        assert_eq!(t.find("batch#1").map(|c| c.epoch).ok(), Some(1));
        assert_eq!(t.find("batch#2").map(|c| c.epoch).ok(), Some(2));
    }

    #[test]
    fn only_plain_numbers_pick_a_checkpoint() {
        let t = labelled_timeline(&["tick", "tick"]);
        for label in [
            "tick#02", "tick#+2", "tick#0", "tick#", "tick#two", "start#1",
        ] {
            assert!(
                matches!(t.find(label), Err(Error::UnknownLabel { .. })),
                "{label}"
            );
        }
    }

    #[test]
    fn a_label_several_kept_checkpoints_share_says_how_many_were_not_kept() {
        let mut t = timeline_with_checkpoints_not_kept();
        for c in &mut t.checkpoints {
            c.label = Some("tick".to_string());
        }
        let err = t.find("tick").unwrap_err();
        assert!(
            matches!(
                err,
                Error::AmbiguousLabel {
                    count: 4,
                    dropped: 9,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .ends_with("; 9 more checkpoints were not kept (keep_checkpoints or HEAPDELTA=keep=) and are not counted"),
            "{err}"
        );
    }

    #[test]
    fn a_label_not_found_says_how_many_checkpoints_were_not_kept() {
        let err = timeline_with_checkpoints_not_kept()
            .find("step 5")
            .unwrap_err();
        assert!(
            matches!(err, Error::UnknownLabel { dropped: 9, .. }),
            "{err:?}"
        );
    }
}
