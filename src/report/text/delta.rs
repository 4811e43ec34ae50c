//! A step's text: the per-step line of a `Delta`, the tables under it by site, class, tag and
//! type, and the pool's never-shrinking-heap view.

use std::fmt::{self, Display, Formatter, Write as _};

use std::collections::HashMap;

use super::format::{
    bytes, class_name, count, rounded_div, signed, signed_bytes, table_rows, thousands, OneLine,
};
use crate::callsite::Site;
use crate::diff::{Delta, SiteDelta, Survivors, TagDelta};
use crate::pool::{ClassStats, PoolStats};
use crate::snapshot::Snapshot;

/// Sites, types and classes listed under a step line.
const TOP: usize = 5;

impl Delta {
    /// The one-line summary: `| step 3 | live 1.18 GiB | added +112.4 MiB | blocks 6,219 (+2,163) | peak 1.20 GiB |`.
    ///
    /// Live and peak are the process's totals at the end of the window, "added" the change in
    /// live bytes and the figure in brackets the change in live blocks; under a
    /// [`Pool`](crate::Pool), the pool's reserved bytes follow, and the bytes of its large blocks
    /// (those it passes to its inner allocator) when it has any. A window of several steps is
    /// named `| from → to |`, as is a step that starts at a checkpoint of the clock's
    /// (`HEAPDELTA=every=`) and ends at one of the program's, or the other way round. A
    /// [`measure`](crate::measure) delta, which has no process totals, shows the thread's growth,
    /// the most it rose while the closure ran, and what it allocated instead.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let d = heapdelta::checkpoint("step 1");
    /// assert!(d.summary().starts_with("| step 1 | live "));
    ///
    /// let (v, d) = heapdelta::measure(|| vec![0u8; 4096]);
    /// assert_eq!(
    ///     d.summary(),
    ///     "| measure | added +4.0 KiB | peak +4.0 KiB | blocks +1 | allocated 4.0 KiB in 1 block |"
    /// );
    /// # drop(v);
    /// # }
    /// ```
    pub fn summary(&self) -> String {
        crate::report::text_for_program(|| {
            let label = self.label().unwrap_or(if self.after.is_some() {
                "now"
            } else {
                "measure"
            });
            // A window of more than one step names where it starts, too, as does one that starts
            // at a checkpoint of the other kind (a tick of `every=` before one of the program's:
            // it holds only what came after the tick). A program's own step, which runs over the
            // ticks in it, does not (see `checkpoint::record`).
            let mut s = match (&self.from_label, self.names_start) {
                (Some(from), true) => {
                    format!("| {} \u{2192} {} |", OneLine(from), OneLine(label))
                }
                _ => format!("| {} |", OneLine(label)),
            };
            match self.after {
                Some(t) => {
                    s += &format!(
                        " live {} | added {} | blocks {} ({}) | peak {} |",
                        bytes(t.live_bytes),
                        signed_bytes(self.live_bytes()),
                        thousands(t.live_blocks),
                        signed(self.live_blocks()),
                        bytes(t.peak_bytes)
                    );
                    if let Some(p) = &self.pool {
                        s += &format!(" reserved {} |", bytes(p.bytes_reserved));
                        if p.large_blocks > 0 {
                            s += &format!(" large {} |", bytes(p.large_bytes));
                        }
                    }
                }
                None => {
                    s += &format!(" added {} |", signed_bytes(self.live_bytes()));
                    if let Some(peak) = self.peak_added_bytes() {
                        s += &format!(" peak +{} |", bytes(peak));
                    }
                    s += &format!(
                        " blocks {} | allocated {} in {} |",
                        signed(self.live_blocks()),
                        bytes(self.allocated_bytes()),
                        count(self.allocated_blocks(), "block")
                    );
                }
            }
            s
        })
    }
}

/// How [`Delta::table`] groups the growth.
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
/// # fn main() {
/// use heapdelta::By;
/// let (kept, d) = heapdelta::measure(|| {
///     let _g = heapdelta::scope("setup");
///     vec![0u8; 64]
/// });
/// for by in [By::Site, By::Class, By::Tag, By::Type] {
///     let table = d.table(by, 5);
///     print!("{table}");
///     // A header, then one row: the single block, whichever way it is grouped.
///     assert_eq!(table.lines().count(), 2, "{table}");
///     assert!(table.lines().nth(1).unwrap().trim_start().starts_with("+64 B"), "{table}");
/// }
/// # drop(kept);
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[non_exhaustive]
pub enum By {
    /// By call site (first user frame), with the type allocated there: call paths that reach the
    /// same frame from further out are added together.
    Site,
    /// By size class.
    Class,
    /// By scope tag.
    Tag,
    /// By the type allocated.
    Type,
}

impl Delta {
    /// The growth grouped `by` call site, size class, scope tag or type, the largest changes
    /// first (growth or fall), as a table of at most `top` rows (those that did not change are
    /// counted under it, not listed): live bytes, live blocks, then
    /// allocations (or, by tag, bytes allocated) and the group's name, like tracemalloc's
    /// `compare_to` or pympler's summary diff. Sampled call-site figures get a line saying they
    /// are estimates.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// use heapdelta::By;
    ///
    /// let (kept, growth) = heapdelta::measure(|| vec![String::from("x"); 100]);
    /// let table = growth.table(By::Class, 10);
    /// print!("{table}");
    /// assert!(table.starts_with("  live bytes     blocks"));
    /// // The 100 one-byte strings are counted in the 16-byte class.
    /// let row = table.lines().find(|l| l.ends_with(" 16 B")).expect("a 16-byte row");
    /// assert!(row.contains("+100 "), "{row}");
    /// # drop(kept);
    /// # }
    /// ```
    pub fn table(&self, by: By, top: usize) -> String {
        crate::report::text_for_program(|| {
            let (third, name) = match by {
                By::Site => ("allocs", "site"),
                By::Class => ("allocs", "size class"),
                By::Tag => ("allocated", "tag"),
                By::Type => ("allocs", "type"),
            };
            // (live bytes, live blocks, the third column's figure and its text, name)
            let mut rows: Vec<(i64, i64, u64, String, String)> = match by {
                By::Site => sites_by_leaf(self)
                    .iter()
                    .map(|s| {
                        let name = format!("{}  [{}]", s.site, OneLine(s.site.type_name()));
                        let allocs = thousands(s.allocs);
                        (s.live_bytes, s.live_blocks, s.allocs, allocs, name)
                    })
                    .collect(),
                By::Class => self
                    .size_classes()
                    .iter()
                    .map(|c| {
                        let name = class_name(c.size as u64);
                        (
                            c.live_bytes,
                            c.live_blocks,
                            c.allocs,
                            thousands(c.allocs),
                            name,
                        )
                    })
                    .collect(),
                By::Tag => tag_rows(self)
                    .into_iter()
                    .map(|(name, live_bytes, live_blocks, allocated)| {
                        (live_bytes, live_blocks, allocated, bytes(allocated), name)
                    })
                    .collect(),
                By::Type => self
                    .types()
                    .iter()
                    .map(|t| {
                        let name = OneLine(&t.type_name).to_string();
                        (
                            t.live_bytes,
                            t.live_blocks,
                            t.allocs,
                            thousands(t.allocs),
                            name,
                        )
                    })
                    .collect(),
            };
            // Largest changes first, either way: in a window that shrank, what fell most. Rows
            // that changed alike (churn that left nothing, `+0 B`) by their blocks, then by how
            // much they allocated: the busiest first, not the first by name.
            rows.sort_by_key(|row| {
                std::cmp::Reverse((row.0.unsigned_abs(), row.1.unsigned_abs(), row.2))
            });
            let mut out = String::new();
            if let (By::Site | By::Type, Some(note)) = (by, estimates_note(self.sampled_mean)) {
                let _ = writeln!(out, "{note}");
            }
            // A comparison knows no allocations.
            // Whether anything was counted at all, before `top` cuts the rows (a review: with a
            // top of 0, a delta with sites read "no call site was recorded").
            let empty = rows.is_empty();
            // Rows that did not change are counted, not listed: a user trial's table of the
            // twenty largest changes was half `+0 B  +0` rows of churn.
            // (The busiest of them is named: an earlier trial looked for its churn site there.)
            let unchanged = rows.iter().filter(|r| r.0 == 0 && r.1 == 0).count();
            let changed = rows.len() - unchanged;
            let busiest = rows
                .iter()
                .find(|r| r.0 == 0 && r.1 == 0 && r.2 > 0)
                .filter(|_| !self.is_comparison())
                .map(|r| {
                    // "1 alloc"; the tag table's column is "allocated", bytes.
                    let what = if r.2 == 1 && third == "allocs" {
                        "alloc"
                    } else {
                        third
                    };
                    format!("; the busiest, {} {what}: {}", r.3, r.4)
                });
            let cells: Vec<[String; 4]> = rows
                .into_iter()
                .filter(|r| r.0 != 0 || r.1 != 0)
                .take(top)
                .map(|(live_bytes, live_blocks, _, third, name)| {
                    let third = if self.is_comparison() {
                        "?".into()
                    } else {
                        third
                    };
                    [signed_bytes(live_bytes), signed(live_blocks), third, name]
                })
                .collect();
            out += &table_rows(["live bytes", "blocks", third, name], cells);
            if empty {
                let nothing = if self.is_comparison() {
                    format!("nothing counted by {name} differs between the two")
                } else if by == By::Site && self.allocated_blocks() > 0 {
                    // Allocations without a site: not "nothing was counted" (a user trial with
                    // sites off read that beside "added +110 B").
                    match self.sampled_mean {
                        Some(_) => {
                            "no call site was recorded: sampling picked none of these \
                                    allocations"
                        }
                        None => "no call site was recorded: call sites are off",
                    }
                    .to_string()
                } else {
                    format!("nothing was counted by {name} here")
                };
                let _ = writeln!(out, "{:>12}  ({nothing})", "");
            }
            let plural = match by {
                By::Class => "size classes",
                By::Site => "sites",
                By::Tag => "tags",
                By::Type => "types",
            };
            // Rows that changed but were cut by `top`: counted, as a step line does (a user trial).
            if let Some(more) = changed.checked_sub(top).filter(|&n| n > 0) {
                let what = if more == 1 { name } else { plural };
                let _ = writeln!(
                    out,
                    "{:>12}  (and {} more {what} that changed)",
                    "",
                    thousands(more as u64)
                );
            }
            if !empty && unchanged > 0 {
                let (what, were) = match unchanged {
                    1 => (name, "was"),
                    _ => (plural, "were"),
                };
                // (Of two runs compared, what was live in each: nothing was allocated between.)
                let alike = match self.is_comparison() {
                    true => "the same in both",
                    false => "allocated and freed alike: no change",
                };
                let _ = writeln!(
                    out,
                    "{:>12}  ({} {what} {were} {alike}{})",
                    "",
                    thousands(unchanged as u64),
                    busiest.unwrap_or_default()
                );
            }
            out
        })
    }
}

impl Display for Delta {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        // Made inside heapdelta's guard, written outside it: the formatter may be writing into a
        // buffer of the program's, whose growth is the program's.
        let text = crate::thread::untracked(|| {
            // One line per entry, joined: the text never ends with a line break, whatever it holds.
            let mut lines = vec![self.summary()];
            if let Some(note) = comparison_note(self) {
                lines.push(format!("   {note}"));
            }
            if self.counts_other_threads() {
                lines.push(
                    "   counted with other threads: this thread had no counters of its own \
                     (all 255 were held by live threads, or the thread was exiting), so these \
                     figures include the events of every thread sharing them"
                        .to_string(),
                );
            }
            if let Some(s) = self.survivors() {
                lines.push(format!(
                    "   born this step and still live: {}, {}; older blocks freed: {}, {}",
                    count(s.blocks, "block"),
                    bytes(s.bytes),
                    thousands(s.freed_older_blocks),
                    bytes(s.freed_older_bytes)
                ));
            }
            // The sites that grew most; then those that fell most: in a step that shrank, and
            // otherwise those that fell by more than a site listed grew (a user trial's cache
            // step listed `+28.5 KiB` for its new table and `+14 B` lines, not the old table's
            // `-14.3 KiB`).
            let by_leaf = sites_by_leaf(self);
            let grew = by_leaf.iter().filter(|s| s.live_bytes > 0).count();
            let fell = by_leaf.iter().filter(|s| s.live_bytes < 0).count();
            let mut sites: Vec<_> = by_leaf
                .iter()
                .filter(|s| s.live_bytes > 0)
                .take(TOP)
                .collect();
            let fell_listed = match sites.last() {
                _ if self.live_bytes() < 0 => fell.min(TOP),
                Some(least) => by_leaf
                    .iter()
                    .rev()
                    .take_while(|s| {
                        s.live_bytes < 0
                            && s.live_bytes.unsigned_abs() > least.live_bytes.unsigned_abs()
                    })
                    .take(TOP)
                    .count(),
                None => 0,
            };
            sites.extend(
                by_leaf
                    .iter()
                    .rev()
                    .filter(|s| s.live_bytes < 0)
                    .take(fell_listed),
            );
            // How many were left out, so that a reader knows the list is not the whole story.
            let unlisted = [
                (grew.saturating_sub(TOP), "grew"),
                (fell - fell_listed, "fell"),
            ];
            let listed = !sites.is_empty();
            // Whether any site was sampled is whether any counted an event: a window can have
            // sampled sites and list none (they held steady, or only fell while the total rose).
            let sampled_any = by_leaf.iter().any(|s| s.allocs > 0 || s.frees > 0);
            match self.sampled_mean {
                Some(mean) if listed => {
                    lines.extend(estimates_note(Some(mean)).map(|note| format!("   {note}")))
                }
                // Said, so that a window without sites does not read as an exact report (nor
                // one whose sampled sites held steady as one where nothing was sampled).
                Some(mean) if !self.is_comparison() => {
                    let what = match sampled_any {
                        true => "no sampled call site's live bytes changed in this window",
                        false => "no call site sampled in this window",
                    };
                    lines.push(format!("   {what} (about one sample per {})", bytes(mean)));
                }
                _ => {}
            }
            for s in sites {
                // The average allocation in the window; a comparison knows no allocations, so
                // its average is that of the blocks gained or lost.
                let avg = if s.allocs > 0 {
                    format!(
                        ", ~{} per alloc",
                        bytes(rounded_div(s.allocated_bytes, s.allocs))
                    )
                } else if s.live_blocks != 0 {
                    let per =
                        rounded_div(s.live_bytes.unsigned_abs(), s.live_blocks.unsigned_abs());
                    format!(", ~{} per blk", bytes(per))
                } else {
                    String::new()
                };
                // The blocks kept can be larger than the average allocation (a string grown in
                // steps leaves only its last, largest block): their own size, where it differs.
                let kept = match s.survivors {
                    Some(k) => {
                        let each = match (k.blocks, s.allocs) {
                            (0, _) | (_, 0) => String::new(),
                            (blocks, allocs) => {
                                // Told apart as printed: `2.0 KiB` twice says nothing more.
                                let each = bytes(rounded_div(k.bytes, blocks));
                                if each == bytes(rounded_div(s.allocated_bytes, allocs)) {
                                    String::new()
                                } else if blocks == 1 {
                                    format!(" ({each})")
                                } else {
                                    format!(" (~{each} each)")
                                }
                            }
                        };
                        // The older blocks freed too, when there are any: the change in
                        // blocks is those kept less those (a user trial read "kept 306" beside
                        // "+50 blk" as a contradiction). A site that allocated nothing in the
                        // step says only that ("kept 0 of 0 born" said nothing).
                        let born = match s.allocs {
                            0 => None,
                            allocs => Some(format!(
                                "kept {} of {} born{each}",
                                thousands(k.blocks),
                                thousands(allocs)
                            )),
                        };
                        let older = match k.freed_older_blocks {
                            0 => None,
                            n => Some(format!("{} older freed", thousands(n))),
                        };
                        born.into_iter()
                            .chain(older)
                            .map(|part| format!(", {part}"))
                            .collect()
                    }
                    None => String::new(),
                };
                lines.push(format!(
                    "   {:>11} {:>9} blk  {}  [{}{avg}{}]",
                    signed_bytes(s.live_bytes),
                    signed(s.live_blocks),
                    s.site,
                    OneLine(s.site.type_name()),
                    kept
                ));
            }
            let unlisted: Vec<String> = unlisted
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, how)| {
                    let word = if listed { "more site" } else { "site" };
                    format!("{} that {how}", count(*n as u64, word))
                })
                .collect();
            if !unlisted.is_empty() {
                lines.push(format!("   … and {}", unlisted.join(", ")));
            }
            // Only for `measure` (no process totals): a loop's steps that freed what they
            // allocated would each list the same churn. Only for exact sites: sampled ones say
            // so above, and their counts are estimates.
            let none_changed = by_leaf.iter().all(|s| s.live_bytes == 0);
            if none_changed && self.after.is_none() && self.sampled_mean.is_none() {
                lines.extend(busiest_lines(&by_leaf));
            }
            lines.extend(unaccounted_line(self, &by_leaf));
            let types = self.types().iter().map(|t| {
                let name = OneLine(&t.type_name).to_string();
                (name, t.live_bytes, t.live_blocks)
            });
            let classes = self.size_classes().iter().map(|c| {
                let name = class_name(c.size as u64);
                (name, c.live_bytes, c.live_blocks)
            });
            let tags = tag_rows(self)
                .into_iter()
                .map(|(name, b, n, _)| (name, b, n));
            // Types are read from the sites, so they are estimates when the sites are.
            let types_name = match self.sampled_mean {
                Some(_) => "types (sampled estimates)",
                None => "types",
            };
            lines.extend(changes_line(types_name, types));
            lines.extend(changes_line("classes", classes));
            lines.extend(changes_line("tags", tags));
            if let Some(p) = &self.pool {
                lines.push(pool_view(p));
            }
            lines.join("\n")
        });
        f.write_str(&text)
    }
}

/// For a `measure` window in which no site's live bytes changed, the sites that allocated most
/// (by allocations, at most `TOP`), under a line saying so: a window whose allocations were all
/// freed (a test that its code allocates nothing after warm-up) otherwise named none of them (a
/// user trial's failing test read only `allocated 7.8 KiB in 1,000 blocks`). Nothing when no
/// site allocated.
fn busiest_lines(by_leaf: &[SiteDelta]) -> Vec<String> {
    let mut busy: Vec<&SiteDelta> = by_leaf.iter().filter(|s| s.allocs > 0).collect();
    busy.sort_by_key(|s| std::cmp::Reverse((s.allocs, s.allocated_bytes)));
    let mut lines = Vec::new();
    if busy.is_empty() {
        return lines;
    }
    lines.push("   no site's live bytes changed; the sites that allocated most:".to_string());
    for s in busy.iter().take(TOP) {
        let avg = bytes(rounded_div(s.allocated_bytes, s.allocs));
        let allocs = if s.allocs == 1 { "alloc " } else { "allocs" };
        lines.push(format!(
            "   {:>11} {allocs}  {}  [{}, ~{avg} per alloc]",
            thousands(s.allocs),
            s.site,
            OneLine(s.site.type_name()),
        ));
    }
    if busy.len() > TOP {
        lines.push(format!(
            "   … and {} that allocated",
            count((busy.len() - TOP) as u64, "more site")
        ));
    }
    lines
}

/// `   name: a +1.0 KiB (+2 blk) | …`: the `TOP` of `entries` (name, live bytes, live blocks)
/// that changed most either way (by bytes, then blocks; otherwise in their order), and how many
/// more changed; `None` when none changed.
pub(super) fn changes_line(
    name: &str,
    entries: impl Iterator<Item = (String, i64, i64)>,
) -> Option<String> {
    let mut changed: Vec<_> = entries.filter(|(_, b, n)| (*b, *n) != (0, 0)).collect();
    changed.sort_by_key(|(_, b, n)| std::cmp::Reverse((b.unsigned_abs(), n.unsigned_abs())));
    if changed.is_empty() {
        return None;
    }
    let mut shown: Vec<String> = changed
        .iter()
        .take(TOP)
        .map(|(what, b, n)| format!("{what} {} ({} blk)", signed_bytes(*b), signed(*n)))
        .collect();
    if changed.len() > TOP {
        shown.push(format!("{} more", changed.len() - TOP));
    }
    Some(format!("   {name}: {}", shown.join(" | ")))
}

/// The row of what no scope tag counted.
const NO_TAG: &str = "(no tag)";

/// A delta's scope tags as `(name, live bytes, live blocks, bytes allocated)`, largest growth
/// first, with what no tag counted as `(no tag)` (the delta's figures less the tags', when not all
/// zero), so the rows add up to the delta; none when no tag counted anything. `scope("")` is a
/// tag, named `""`.
fn tag_rows(d: &Delta) -> Vec<(String, i64, i64, u64)> {
    if d.tags().is_empty() {
        return Vec::new();
    }
    let mut rows: Vec<(String, i64, i64, u64)> = d
        .tags()
        .iter()
        .map(|t| {
            // Quoted when it could be taken for something else: `scope("")`, a tag named as the
            // remainder's row, or one that starts with a quote as quoted names do.
            let name = match t.tag {
                "" | NO_TAG => format!("{:?}", t.tag),
                tag if tag.starts_with('"') => format!("{tag:?}"),
                tag => OneLine(tag).to_string(),
            };
            (name, t.live_bytes, t.live_blocks, t.allocated_bytes)
        })
        .collect();
    let sum =
        |pick: &dyn Fn(&TagDelta) -> i64| d.tags().iter().map(pick).fold(0i64, i64::saturating_add);
    let tagged_allocated = d
        .tags()
        .iter()
        .map(|t| t.allocated_bytes)
        .fold(0u64, u64::saturating_add);
    let untagged = (
        NO_TAG.to_string(),
        d.live_bytes().saturating_sub(sum(&|t| t.live_bytes)),
        d.live_blocks().saturating_sub(sum(&|t| t.live_blocks)),
        d.allocated_bytes().saturating_sub(tagged_allocated),
    );
    if (untagged.1, untagged.2, untagged.3) != (0, 0, 0) {
        rows.push(untagged);
    }
    rows.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    rows
}

/// With exact call sites, when they do not add up to the window's change: how much they account
/// for, and why the rest may not be theirs (a snapshot reads its totals and its sites one after
/// the other, so other threads' events in between count in one and not the other; and blocks
/// counted without a site, as during a thread's teardown, are in the totals only).
fn unaccounted_line(d: &Delta, by_leaf: &[SiteDelta]) -> Option<String> {
    if d.sampled_mean.is_some() || d.is_comparison() || by_leaf.is_empty() {
        return None;
    }
    let (site_bytes, site_blocks) = by_leaf.iter().fold((0i64, 0i64), |(b, n), s| {
        (
            b.saturating_add(s.live_bytes),
            n.saturating_add(s.live_blocks),
        )
    });
    if (site_bytes, site_blocks) == (d.live_bytes(), d.live_blocks()) {
        return None;
    }
    // The rest is said in figures, so that a reader sees how small it usually is.
    let rest_bytes = d.live_bytes().saturating_sub(site_bytes);
    let rest_blocks = d.live_blocks().saturating_sub(site_blocks);
    Some(format!(
        "   call sites account for {} in {} {} of this; the other {} in {} {} changed while the \
         snapshots were read (other threads) or have no site",
        signed_bytes(site_bytes),
        signed(site_blocks),
        blocks_word(site_blocks),
        signed_bytes(rest_bytes),
        signed(rest_blocks),
        blocks_word(rest_blocks),
    ))
}

/// `block` or `blocks`, for a signed count.
fn blocks_word(n: i64) -> &'static str {
    if n.unsigned_abs() == 1 {
        "block"
    } else {
        "blocks"
    }
}

/// A delta's sites as the text reports list them: told apart by their first frame and type
/// (`Site::leaf`), call paths that differ further out added together, largest growth first.
fn sites_by_leaf(d: &Delta) -> Vec<SiteDelta> {
    let mut merged: Vec<SiteDelta> = Vec::new();
    let mut at: HashMap<Site, usize> = HashMap::new();
    for s in d.sites() {
        let leaf = s.site.leaf();
        let Some(&i) = at.get(&leaf) else {
            at.insert(leaf.clone(), merged.len());
            merged.push(SiteDelta {
                site: leaf,
                ..s.clone()
            });
            continue;
        };
        let m = &mut merged[i];
        m.live_bytes = m.live_bytes.saturating_add(s.live_bytes);
        m.live_blocks = m.live_blocks.saturating_add(s.live_blocks);
        m.allocs = m.allocs.saturating_add(s.allocs);
        m.frees = m.frees.saturating_add(s.frees);
        m.allocated_bytes = m.allocated_bytes.saturating_add(s.allocated_bytes);
        m.survivors = match (m.survivors, s.survivors) {
            (Some(a), Some(b)) => Some(Survivors {
                blocks: a.blocks.saturating_add(b.blocks),
                bytes: a.bytes.saturating_add(b.bytes),
                freed_older_blocks: a.freed_older_blocks.saturating_add(b.freed_older_blocks),
                freed_older_bytes: a.freed_older_bytes.saturating_add(b.freed_older_bytes),
            }),
            (a, b) => a.or(b),
        };
    }
    crate::diff::sort_sites(&mut merged);
    merged
}

/// The line said under the summary of a delta that compares two snapshots instead of covering a
/// window of one run (see `Delta::is_comparison`), or `None`.
pub(crate) fn comparison_note(d: &Delta) -> Option<String> {
    d.is_comparison().then(|| {
        format!(
            "compared with {}: not a window of one run (two runs, or the later snapshot first), \
             so these are changes in what was live; the allocations between are not known",
            OneLine(d.from_label().unwrap_or("the other snapshot"))
        )
    })
}

/// The line said above call sites whose figures are sampled estimates (`sampled_mean`: the mean
/// in bytes), or `None` for exact figures.
pub(crate) fn estimates_note(sampled_mean: Option<u64>) -> Option<String> {
    sampled_mean.map(|mean| {
        format!(
            "call sites sampled about once per {}: their figures are estimates",
            bytes(mean)
        )
    })
}

/// `estimates_note` with the exact figures the estimates stand beside (made by `exact`, only when
/// the figures are estimates), for the files whose viewers add the estimates up into totals of
/// their own.
pub(crate) fn estimates_note_beside(
    sampled_mean: Option<u64>,
    exact: impl FnOnce() -> String,
) -> Option<String> {
    estimates_note(sampled_mean).map(|note| format!("{note}; exact: {}", exact()))
}

impl Snapshot {
    /// The exact live and allocated figures, as the notes on sampled estimates give them.
    pub(crate) fn exact_live(&self) -> String {
        format!(
            "{} live in {} blocks, {} allocated in {} blocks",
            bytes(self.totals.live_bytes),
            thousands(self.totals.live_blocks),
            bytes(self.totals.total_bytes),
            thousands(self.totals.total_blocks)
        )
    }
}

impl Delta {
    /// The exact growth and allocations, as the notes on sampled estimates give them.
    pub(crate) fn exact_growth(&self) -> String {
        format!(
            "{} live in {} blocks, {} allocated in {} blocks",
            signed_bytes(self.live_bytes()),
            signed(self.live_blocks()),
            bytes(self.allocated_bytes()),
            thousands(self.allocated_blocks())
        )
    }
}

/// The never-shrinking-heap view: what the pool keeps reserved, and where the room is.
pub(crate) fn pool_view(p: &PoolStats) -> String {
    // Saturating: the figures may come from a file, where nothing bounds them.
    let free_of = |c: &ClassStats| c.blocks_available.saturating_mul(c.size as u64);
    let free_in_pools = p
        .classes
        .iter()
        .map(free_of)
        .fold(0u64, u64::saturating_add);
    let mut out = format!(
        "   pool: reserved {} in {} | blocks in use {} | free in used pools {} | empty or untouched pools {}",
        bytes(p.bytes_reserved),
        count(p.arenas_current, "arena"),
        bytes(p.bytes_in_use),
        bytes(free_in_pools),
        thousands(p.unused_pools),
    );
    // Blocks above the pool's limit (or of a larger alignment) come from the inner allocator,
    // outside what the arenas reserve: without them, live could read above reserved with nothing
    // to say why (a user trial: live 37.3 MiB, reserved 31.0 MiB, 12.4 MiB in 8 large blocks).
    if p.large_blocks > 0 {
        out += &format!(
            " | large blocks, from the inner allocator: {} in {}",
            bytes(p.large_bytes),
            thousands(p.large_blocks)
        );
    }
    let mut classes: Vec<_> = p.classes.iter().filter(|c| c.pools > 0).collect();
    classes.sort_by_key(|c| std::cmp::Reverse(free_of(c)));
    for c in classes.iter().take(TOP) {
        out += &format!(
            "\n      class {:>3} B: {:>9} blocks in use, {:>9} free in {} ({})",
            c.size,
            thousands(c.blocks_in_use),
            thousands(c.blocks_available),
            count(c.pools, "pool"),
            bytes(free_of(c)),
        );
    }
    out
}
