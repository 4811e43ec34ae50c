//! `Delta`: what changed between two snapshots, by call site, size class, scope tag and type,
//! with the survivors of a step.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::callsite::{self, Site, SiteId};
use crate::checkpoint;
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
/// [`measure`](crate::measure), [`Snapshot::since`] or [`Timeline::between`](crate::Timeline::between). `Display` prints
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
    /// For a `measure` delta: the most the thread's live bytes rose above their start in the
    /// window, and its live blocks then (see `Delta::peak_added_bytes`).
    pub(crate) peak_added: Option<(u64, i64)>,
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
    for k in s.classes.iter() {
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
            peak_added: None,
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

    /// For a [`measure`](crate::measure) delta, the most the calling thread's live bytes rose
    /// above where they were when the measured code began, at any moment while it ran, as
    /// dhat's `max_bytes` tells for a whole run (`None` for other deltas). A cache that must
    /// never hold more than a bound, or a step whose temporaries must stay small, is checked on
    /// it; [`live_bytes`](Delta::live_bytes) is only what is left at the end. It counts the
    /// thread's events as `measure` does, so it can fall short of the heap's own peak when the
    /// thread frees blocks other threads allocated; on a thread without counters of its own
    /// ([`counts_other_threads`](Delta::counts_other_threads)), where the other figures include
    /// the other sharing threads' events, it still counts this thread's alone. Without a
    /// tracker installed it is 0, as the rest of the delta.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let ((), d) = heapdelta::measure(|| {
    ///     let scratch = vec![0u8; 64 * 1024];
    ///     drop(std::hint::black_box(scratch));
    /// });
    /// assert_eq!(d.live_bytes(), 0);
    /// assert_eq!(d.peak_added_bytes(), Some(64 * 1024));
    /// # }
    /// ```
    pub fn peak_added_bytes(&self) -> Option<u64> {
        self.peak_added.map(|(bytes, _)| bytes)
    }

    /// For a [`measure`](crate::measure) delta, the change in the thread's live blocks at the
    /// moment of [`peak_added_bytes`](Delta::peak_added_bytes) (`None` for other deltas).
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let ((), d) = heapdelta::measure(|| {
    ///     let parts: Vec<Box<[u8; 64]>> = (0..10).map(|_| Box::new([0; 64])).collect();
    ///     drop(std::hint::black_box(parts));
    /// });
    /// assert_eq!(d.peak_added_blocks(), Some(11)); // ten boxes and the vector
    /// # }
    /// ```
    pub fn peak_added_blocks(&self) -> Option<i64> {
        self.peak_added.map(|(_, blocks)| blocks)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::Frame;

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
}
