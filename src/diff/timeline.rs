//! `Timeline`: every checkpoint in order, windows between them, and the growth detector.

use std::collections::HashMap;

use super::delta::Delta;
use crate::callsite::{self, Site, SiteId};
use crate::checkpoint;
use crate::error::Error;
use crate::snapshot::{SiteCount, Snapshot};
use crate::thread;
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
        steps_of(self.unbroken()).map(kind_of_checkpoints)
    }

    /// When the growth detector follows one kind of checkpoint only: the sites that grew at every
    /// one of a whole window of steps (`GROWTH_WINDOW`) between checkpoints of the other kind,
    /// and still hold that growth at the timeline's last step end, with the last of those
    /// checkpoints and the kind's name; `None` when none did. Said when the kind followed finds
    /// nothing: a user trial's file, whose program leaked at each of its 600 checkpoints while
    /// four of the clock's ticks rose and the last held, read `none`, where the program's own
    /// timeline named the leak. A shorter run of the other kind is a warm-up (a review: a
    /// service's three start-up checkpoints, then a steady run of ticks), and growth freed since
    /// is not growing.
    pub(crate) fn growing_by_the_other_kind(
        &self,
    ) -> Option<(&Snapshot, &'static str, Vec<Growth>)> {
        let ends = self.unbroken();
        let followed = steps_of(ends)?;
        let other: Vec<&Snapshot> = ends.iter().filter(|s| s.by_clock != followed).collect();
        if other.len() <= GROWTH_WINDOW {
            return None;
        }
        let (last, now) = (*other.last()?, ends.last()?);
        let growing: Vec<Growth> = thread::untracked(|| {
            let (then, now) = (live_by_site(last), live_by_site(now));
            growing_at_every_step(&other)
                .into_iter()
                .filter(|g| now.get(&g.site) >= then.get(&g.site))
                .collect()
        });
        (!growing.is_empty()).then(|| (last, kind_of_checkpoints(!followed), growing))
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
    /// `label`, counted from 1 (`#0` is an error that says so), or the error saying how many there are when fewer than `n` do;
    /// `None` when `label#n` is not of that form or fewer than `least` checkpoints are labelled
    /// `label`.
    fn nth_labelled(&self, label: &str, least: usize) -> Option<Result<&Snapshot, Error>> {
        let (label, n) = label.rsplit_once('#')?;
        // `#0` too, to be told that numbers count from 1.
        if (n.starts_with('0') && n != "0") || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: usize = n.parse().ok()?;
        let count = self.labelled(label).count();
        if count < least {
            return None;
        }
        Some(
            n.checked_sub(1)
                .and_then(|i| self.labelled(label).nth(i))
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
        let (first, last) = (live_by_site(window[0]), live_by_site(window[n]));
        // In how many steps each site's live bytes rose, from the sites each step may have
        // changed only (see `live_change`): a fuzzing run's `growing_in(1, usize::MAX)` over
        // 2,000 checkpoints of 5,000 sites took 2.3 GB when every checkpoint's sites were mapped
        // whole.
        let mut leaves = Leaves::new();
        let mut rises: HashMap<Site, usize> = HashMap::new();
        for pair in window.windows(2) {
            for (site, change) in live_change(pair[0], pair[1], &mut leaves) {
                if change > 0 {
                    *rises.entry(site).or_default() += 1;
                }
            }
        }
        let mut out: Vec<Growth> = last
            .iter()
            .filter_map(|(site, &end)| {
                let grown = rises.get(site).copied().unwrap_or(0);
                (grown >= k).then(|| Growth {
                    site: site.clone(),
                    steps_grown: grown,
                    steps: n,
                    live_bytes: end.saturating_sub(first.get(site).copied().unwrap_or(0)),
                })
            })
            .collect();
        sort_growth(&mut out);
        out
    })
}

/// Sorts sites by the steps they grew in and then their growth, ties in the order sites are
/// listed everywhere else, so that every run, and every call, lists them alike.
fn sort_growth(growth: &mut [Growth]) {
    growth.sort_by_cached_key(|g| {
        (
            std::cmp::Reverse((g.steps_grown, g.live_bytes)),
            g.site.to_string(),
            g.site.type_name().to_string(),
        )
    });
}

/// The name of the checkpoints the clock took (`by_clock`), or the program's, as the detector's
/// lines give it.
fn kind_of_checkpoints(by_clock: bool) -> &'static str {
    match by_clock {
        true => "the clock's checkpoints (every=)",
        false => "the program's checkpoints",
    }
}

/// Of step ends taken by both the program and heapdelta's clock, which kind the growth detector
/// follows: `Some(true)` the clock's, `Some(false)` the program's; `None` when all are of one kind.
/// The kind of the last step end, the most recent: a program that checkpointed one phase and left
/// the next to the clock leaks, if it does, in the clock's steps (a review: following whichever
/// kind took more looked at the old phase alone). Unless that kind has too few step ends for two
/// steps and the other has enough: a program's last `done` after a run of the clock's. Or unless
/// that kind has too few for the whole window, and the other took a whole window's worth
/// between the last kind's two latest: a file `rewrite=on` wrote while the program ran ends at a
/// tick of the clock, and early on holds a few ticks, each after many of the program's
/// checkpoints (a user trial: growth judged on 2 of the clock's steps among 36 of the
/// program's). One or a few of the other kind in between are not enough (a review: a program's
/// `done` between two ticks of a leaking phase, or ticks inside each of a program's batches,
/// then took the detector to steps where nothing grew).
fn steps_of(ends: &[Snapshot]) -> Option<bool> {
    let by_clock = ends.iter().filter(|s| s.by_clock).count();
    let by_program = ends.len() - by_clock;
    if by_clock == 0 || by_program == 0 {
        return None;
    }
    let (latest, before) = ends.split_last()?;
    let last = latest.by_clock;
    let (mine, other) = match last {
        true => (by_clock, by_program),
        false => (by_program, by_clock),
    };
    if mine < 3 && other >= 3 {
        return Some(!last);
    }
    let since_my_previous = before
        .iter()
        .rposition(|s| s.by_clock == last)
        .map_or(before, |i| &before[i + 1..]);
    let whole_window = GROWTH_WINDOW + 1;
    let other_since = since_my_previous
        .iter()
        .filter(|s| s.by_clock != last)
        .count();
    Some(match mine < whole_window && other_since >= whole_window {
        true => !last,
        false => last,
    })
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
    let here = is_here(s);
    for c in &s.sites {
        let live = m.entry(leaf_of(c, here)).or_default();
        *live = live.saturating_add(c.counts.live_bytes() as i64);
    }
    m
}

/// The site, as reports name it, of each call-site id of a run (see `live_change`).
pub(crate) type Leaves = HashMap<(SiteId, u64), Site>;

/// The change of each site's live bytes from `before` to `after` (sites told apart as
/// `live_by_site` tells them), from the sites whose counters may differ: those the two do not hold
/// in a shared chunk, so that a long timeline costs what changed in it, not its checkpoints times
/// its sites. `leaves` keeps each id's site from one call to the next.
pub(crate) fn live_change(
    before: &Snapshot,
    after: &Snapshot,
    leaves: &mut Leaves,
) -> HashMap<Site, i64> {
    let mut change: HashMap<Site, i64> = HashMap::new();
    for (id, old, new) in after.sites.unshared_with(&before.sites) {
        for (c, s, sign) in [(old, before, -1), (new, after, 1)] {
            let Some(c) = c else { continue };
            let leaf = leaves
                .entry((id, s.run))
                .or_insert_with(|| leaf_of(c, is_here(s)));
            let live = change.entry(leaf.clone()).or_default();
            *live = live.saturating_add(sign * c.counts.live_bytes() as i64);
        }
    }
    change
}

/// Whether `s` was taken by this process, whose site ids `callsite::resolve` names.
fn is_here(s: &Snapshot) -> bool {
    s.run == checkpoint::run_id()
}

/// The site `c` counts, as reports name it (see `live_by_site`), of a snapshot taken by this
/// process when `here`.
fn leaf_of(c: &SiteCount, here: bool) -> Site {
    match (&c.site, here) {
        (Some(site), _) => site.leaf(),
        (None, true) => callsite::resolve(c.id).leaf(),
        (None, false) => Site::unknown(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{SiteCount, SiteList};
    use crate::stats::Counts;

    /// `growing_over` with every checkpoint's sites mapped whole, as it was first written.
    fn growing_over_whole(ends: &[&Snapshot], k: usize, n: usize) -> Vec<Growth> {
        let n = n.min(ends.len().saturating_sub(1));
        if n == 0 || k == 0 || k > n {
            return Vec::new();
        }
        let series: Vec<HashMap<Site, i64>> = ends[ends.len() - n - 1..]
            .iter()
            .map(|s| live_by_site(s))
            .collect();
        let at = |i: usize, site: &Site| series[i].get(site).copied().unwrap_or(0);
        let mut out: Vec<Growth> = series[n]
            .keys()
            .filter_map(|site| {
                let grown = (1..=n).filter(|&i| at(i, site) > at(i - 1, site)).count();
                (grown >= k).then(|| Growth {
                    site: site.clone(),
                    steps_grown: grown,
                    steps: n,
                    live_bytes: at(n, site) - at(0, site),
                })
            })
            .collect();
        sort_growth(&mut out);
        out
    }

    #[test]
    fn growth_counted_over_the_sites_each_step_changed_is_growth_counted_over_all() {
        // 40 sites in three chunks, two ids of each of ten functions (one site as reports name
        // it), over 12 checkpoints: the sites of the middle chunk change rarely, so that a file's
        // checkpoints share it.
        let sites: Vec<Site> = (0..40)
            .map(|i| {
                Site::new(vec![crate::callsite::Frame {
                    function: format!("f{}", i % 30),
                    file: Some("src/main.rs".to_string()),
                    line: Some(i % 30),
                }])
            })
            .collect();
        let mut counts = vec![(0u64, 0u64); 40];
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % m
        };
        let checkpoints = (0..12)
            .map(|epoch| {
                for (i, (allocs, frees)) in counts.iter_mut().enumerate() {
                    // Ids 16 to 31, the second chunk.
                    let rarely = (15..31).contains(&i);
                    if next(if rarely { 64 } else { 2 }) == 0 {
                        *allocs += next(3);
                        *frees += next(3).min(*allocs - *frees);
                    }
                }
                let mut s = Snapshot::zero();
                s.epoch = epoch;
                s.checkpoint = true;
                s.label = Some(format!("step {epoch}"));
                s.sites = SiteList::new(
                    counts
                        .iter()
                        .zip(&sites)
                        .zip(1..)
                        .map(|(((allocs, frees), site), id)| SiteCount {
                            id,
                            site: Some(site.clone()),
                            counts: Counts {
                                alloc_blocks: *allocs,
                                alloc_bytes: 8 * allocs,
                                free_blocks: *frees,
                                free_bytes: 8 * frees,
                            },
                            young_free: (0, 0),
                        })
                        .collect(),
                );
                s
            })
            .collect();
        // Through a file, whose checkpoints share the chunks that did not change.
        let mut file = Vec::new();
        Timeline::new(checkpoints).write_json_to(&mut file).unwrap();
        let t = Timeline::read_json_from(&file[..]).unwrap();
        let ends = t.unbroken_step_ends();
        let shared: usize = ends
            .windows(2)
            .map(|w| w[1].sites.shared_chunks(&w[0].sites))
            .sum();
        assert!(shared > 0, "no chunk shared");
        for n in 1..=11 {
            for k in 1..=n {
                assert_eq!(
                    growing_over(&ends, k, n),
                    growing_over_whole(&ends, k, n),
                    "k {k}, n {n}"
                );
            }
        }
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
    fn label_hash_0_is_told_that_numbers_count_from_1() {
        let t = labelled_timeline(&["start", "tick", "tick", "tick"]);
        assert_eq!(
            t.find("tick#0").unwrap_err().to_string(),
            r#"no checkpoint "tick#0": numbers count from 1; 3 checkpoints are labelled "tick": pick the first as "tick#1""#
        );
        assert!(matches!(t.find("tick#01"), Err(Error::UnknownLabel { .. })));
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
        for label in ["tick#02", "tick#+2", "tick#", "tick#two", "start#1"] {
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
