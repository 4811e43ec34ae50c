//! The terminal report: the per-step line and the tables under it.

use std::fmt::{self, Display, Formatter, Write as _};

use std::collections::HashMap;

use crate::callsite::Site;
use crate::diff::{Delta, Growth, SiteDelta, Survivors, TagDelta, Timeline};
use crate::pool::{ClassStats, PoolStats};
use crate::snapshot::Snapshot;

/// Sites, types and classes listed under a step line.
const TOP: usize = 5;

/// `s` with control characters, line separators, bidirectional controls and noncharacters escaped
/// (`\n`, `\u{1b}`, `\u{2028}`, `\u{202e}`, `\u{ffff}`): a label or name read from a file stays
/// on its line, cannot drive the terminal or turn the rest of the line around, and can be written
/// into an SVG (XML admits no noncharacter).
pub(crate) struct OneLine<'a>(pub &'a str);

/// Whether `c` would break a line, drive a terminal, reorder the text around it or make XML
/// invalid: what `OneLine` escapes.
pub(crate) fn breaks_line(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{61c}' | '\u{200e}' | '\u{200f}'
        )
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        || matches!(c, '\u{fdd0}'..='\u{fdef}')
        || (c as u32) & 0xfffe == 0xfffe
}

impl Display for OneLine<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if breaks_line(c) {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

/// `n` things, with the word in the singular for one: `1 block`, `1,024 blocks`.
pub(crate) fn count(n: u64, word: &str) -> String {
    match n {
        1 => format!("1 {word}"),
        n => format!("{} {word}s", thousands(n)),
    }
}

/// `n / d` rounded to the nearest whole number (`d` > 0).
fn rounded_div(n: u64, d: u64) -> u64 {
    n / d + u64::from(n % d >= d - n % d)
}

/// `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `+1,234` / `-56`.
pub(crate) fn signed(n: i64) -> String {
    let sign = if n < 0 { '-' } else { '+' };
    format!("{sign}{}", thousands(n.unsigned_abs()))
}

/// The binary units above bytes, each 1,024 times the one before.
const BINARY_UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];

/// `512 B`, `1.5 KiB`, `112.4 MiB`, `1.18 GiB`.
pub(crate) fn bytes(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    // One decimal up to MiB, two from GiB; the unit is chosen after rounding, so 1,048,575
    // bytes read 1.0 MiB rather than 1024.0 KiB.
    let decimals = |unit: usize| if unit >= 2 { 2 } else { 1 };
    let rounded = |v: f64, unit: usize| {
        let scale = 10f64.powi(decimals(unit));
        (v * scale).round() / scale
    };
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while rounded(v, unit) >= 1024.0 && unit + 1 < BINARY_UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!(
        "{v:.prec$} {}",
        BINARY_UNITS[unit],
        prec = decimals(unit) as usize
    )
}

/// A size class's name, its largest request, exact: `640 B`, `1.25 KiB`, `2.5 MiB` (class tops
/// above 512 B are quarters of powers of two), or in bytes when no binary unit gives it in two
/// decimals. Beside rounded figures, `2,621,440 B +2.1 MiB` read as two units for one thing (a
/// user trial).
pub(crate) fn class_name(size: u64) -> String {
    // The largest unit, at most the size, that gives it in whole hundredths.
    (1..=BINARY_UNITS.len())
        .rev()
        .map(|k| (1u128 << (10 * k), BINARY_UNITS[k - 1]))
        .find(|&(unit, _)| u128::from(size) >= unit && (u128::from(size) * 100) % unit == 0)
        .map_or_else(
            || format!("{} B", thousands(size)),
            // Exact: whole hundredths, printed in their shortest form (`1`, `2.5`, `1.25`).
            |(unit, name)| format!("{} {name}", (u128::from(size) * 100 / unit) as f64 / 100.0),
        )
}

/// `+1.5 KiB` / `-512 B`.
pub(crate) fn signed_bytes(n: i64) -> String {
    let sign = if n < 0 { '-' } else { '+' };
    format!("{sign}{}", bytes(n.unsigned_abs()))
}

impl Delta {
    /// The one-line summary: `| step 3 | live 1.18 GiB | added +112.4 MiB | blocks 6,219 (+2,163) | peak 1.20 GiB |`.
    ///
    /// Live and peak are the process's totals at the end of the window, "added" the change in
    /// live bytes and the figure in brackets the change in live blocks; under a
    /// [`Pool`](crate::Pool), the pool's reserved bytes follow, and the bytes of its large blocks
    /// (those it passes to its inner allocator) when it has any. A window of several steps is
    /// named `| from → to |`, as is a step that starts at a checkpoint of the clock's
    /// (`HEAPDELTA=every=`) and ends at one of the program's, or the other way round. A [`measure`](crate::measure) delta, which has no process totals,
    /// shows the thread's growth and what it allocated instead.
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
    ///     "| measure | added +4.0 KiB | blocks +1 | allocated 4.0 KiB in 1 block |"
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
                    s += &format!(
                        " added {} | blocks {} | allocated {} in {} |",
                        signed_bytes(self.live_bytes()),
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

/// A table's header and rows of three figures and a name, each line ended: the figures' columns as
/// wide as their widest (a million blocks fits the least widths, 12, 10 and 10).
pub(crate) fn table_rows(header: [&str; 4], rows: Vec<[String; 4]>) -> String {
    let width = |i: usize, least: usize| {
        rows.iter()
            .map(|c| c[i].chars().count())
            .fold(least, usize::max)
    };
    let (w0, w1, w2) = (width(0, 12), width(1, 10), width(2, 10));
    let [a, b, c, name] = header;
    let mut out = format!("{a:>w0$} {b:>w1$} {c:>w2$}  {name}\n");
    for [x, y, z, name] in rows {
        let _ = writeln!(out, "{x:>w0$} {y:>w1$} {z:>w2$}  {name}");
    }
    out
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

/// `   name: a +1.0 KiB (+2 blk) | …`: the `TOP` of `entries` (name, live bytes, live blocks)
/// that changed most either way (by bytes, then blocks; otherwise in their order), and how many
/// more changed; `None` when none changed.
fn changes_line(name: &str, entries: impl Iterator<Item = (String, i64, i64)>) -> Option<String> {
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

/// A timeline's text: the sites that grew at every recent step (the first `top` of them), then one
/// line per step. One line per entry, joined, as for `Delta`: no line break at the end.
pub(crate) fn timeline_text(t: &Timeline, top: usize) -> String {
    let growing = t.growing();
    let mut lines = Vec::new();
    // Of a timeline the program and the clock both took checkpoints in, which steps were looked at.
    let between = t
        .detector_follows()
        .map(|which| format!(", between {which}"))
        .unwrap_or_default();
    if let Some(first) = growing.first() {
        lines.push(format!(
            "growing at every step (last {} steps{between}):",
            first.steps
        ));
        growth_rows(t, &growing, top, &mut lines);
        grown_in_some_steps(t, &growing, &mut lines);
    } else if let Some((peak, after, fell, growing)) = t.growing_before_fall() {
        // Not a bare "none" above a list of sites that grew at every step (a user trial read the
        // two as a contradiction): nothing grew at every step up to the last checkpoint.
        lines.push(format!(
            "growing at every step to the last checkpoint{between}: none"
        ));
        let name = match peak.label() {
            Some(label) => format!("{:?}", OneLine(label).to_string()),
            None => "the last rise".to_string(),
        };
        let how = if fell { "fell" } else { "held" };
        lines.push(format!(
            "growing at every step up to {name} (last {} steps to it{between}; live bytes {how} \
             in the {} after it):",
            growing[0].steps,
            count(after as u64, "step")
        ));
        growth_rows(t, &growing, top, &mut lines);
    } else {
        lines.push(nothing_growing(t, &between));
        // Live bytes rose at every step, and no site did: which sites grew most over those
        // steps (a user trial's sampled run missed its leak at one step, and named no site).
        if t.live_rose_at_every_step()
            .is_some_and(|(_, _, sited)| sited)
        {
            grown_in_some_steps(t, &[], &mut lines);
        }
    }
    // A blank line between the suspects and the steps.
    lines.push(String::new());
    lines.extend(t.steps().iter().map(Delta::summary));
    lines.join("\n")
}

/// Sites listed under the growth detector's, at most this many: those that grew over its steps
/// but not at every one.
const GROWN_IN_SOME: usize = 3;

/// Under the sites that grew at every step: how much of what the live total rose over those steps
/// they hold, and the sites that grew most in some of the steps, which a leak's own tables do
/// (they grow by doubling). Said when the sites listed hold less than four fifths of the rise,
/// or another grew by a tenth of it (a user trial's session map, 3.6 MiB of 32 MiB). With no
/// site that grew at every step (`growing` empty), the sites that grew most.
fn grown_in_some_steps(t: &Timeline, growing: &[Growth], lines: &mut Vec<String>) {
    let Some((change, some)) = t.grown_in_window() else {
        return;
    };
    // (Nothing to say of a window whose live total fell: every growth would be "a tenth" of it.)
    if change <= 0 {
        return;
    }
    let held = growing
        .iter()
        .fold(0i64, |sum, g| sum.saturating_add(g.live_bytes));
    let short = held.saturating_mul(5) < change.saturating_mul(4);
    let some: Vec<&Growth> = some
        .iter()
        .filter(|g| short || g.live_bytes.saturating_mul(10) >= change)
        .collect();
    if some.is_empty() {
        return;
    }
    let steps = some[0].steps;
    if growing.is_empty() {
        lines.push(format!(
            "   grown most in some of those {steps} steps, of the {} the live total rose:",
            signed_bytes(change)
        ));
    } else {
        lines.push(format!(
            "   these hold {} of the {} the live total rose in those steps; grown in some of \
             them:",
            signed_bytes(held),
            signed_bytes(change)
        ));
    }
    for g in some.iter().take(GROWN_IN_SOME) {
        lines.push(format!(
            "   {:>11} in {} of {steps} steps  {}  [{}]",
            signed_bytes(g.live_bytes),
            g.steps_grown,
            g.site,
            OneLine(g.site.type_name())
        ));
    }
}

/// The rows of the growth detector's sites (the first `top` of `growing`), with the note on
/// sampled estimates first, added to `lines`.
fn growth_rows(t: &Timeline, growing: &[Growth], top: usize, lines: &mut Vec<String>) {
    let sampled = t.checkpoints.last().and_then(|c| c.sampled_mean);
    if let Some(note) = estimates_note(sampled) {
        lines.push(format!("   {note}"));
    }
    for g in growing.iter().take(top) {
        lines.push(format!(
            "   {:>11} over {} steps  {}  [{}]",
            signed_bytes(g.live_bytes),
            g.steps,
            g.site,
            OneLine(g.site.type_name())
        ));
    }
    if let Some(more) = growing.len().checked_sub(top).filter(|&n| n > 0) {
        let sites = if more == 1 { "site" } else { "sites" };
        lines.push(format!("   … and {more} more {sites}"));
    }
}

/// The growth detector's line when no site grew at every step: `none`, or, when the live total
/// did grow at every step, why no site was found; `between` names the kind of checkpoints
/// followed, if one was.
fn nothing_growing(t: &Timeline, between: &str) -> String {
    let ends = t.unbroken_step_ends().len();
    if ends < 3 {
        // Not "none": nothing was looked at (a user trial read an empty timeline file so). Where
        // the timeline dropped checkpoints, say so: it may hold many, and only the ones after the
        // last gap count (a user trial with `keep=3` read "2" with no word of why).
        let dropped = match t.dropped() {
            0 => String::new(),
            n => format!(
                "; {} before them not kept (keep_checkpoints or HEAPDELTA=keep=), and no step \
                 is compared across them",
                count(n, "checkpoint")
            ),
        };
        return format!(
            "growing at every step{between}: too few checkpoints to tell ({ends}; it compares \
             the steps between checkpoints, and takes three{dropped})"
        );
    }
    let Some((steps, growth, sited)) = t.live_rose_at_every_step() else {
        return format!("growing at every step{between}: none");
    };
    let sampled = t.checkpoints.last().and_then(|c| c.sampled_mean);
    let why = match (sampled, sited) {
        (Some(mean), _) => format!(
            "no sampled call site grew at every step (sampled about once per {}): record exact \
             sites, or sample more often (`CallSites::Sampled` with a smaller `mean_bytes`, \
             `HEAPDELTA=sites=sampled:N`)",
            bytes(mean)
        ),
        (None, false) => {
            "no call site was recorded (call sites off); each step's size classes say what grew"
                .to_string()
        }
        (None, true) => "no single call site grew at every step".to_string(),
    };
    format!(
        "growing at every step{between}: no site, but live bytes rose in each of the last {steps} steps \
         ({} in all): {why}",
        signed_bytes(growth)
    )
}

impl Display for Timeline {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        // Made inside heapdelta's guard, written outside it: the formatter may be writing into a
        // buffer of the program's, whose growth is the program's.
        let text = crate::thread::untracked(|| timeline_text(self, usize::MAX));
        f.write_str(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_escapes_what_would_turn_the_line_around_or_break_an_svg() {
        assert_eq!(
            OneLine("a\u{202e}b\u{ffff}c\nd").to_string(),
            "a\\u{202e}b\\u{ffff}c\\nd"
        );
    }
    use crate::snapshot::{ClassCount, SiteCount, SiteList, Snapshot};
    use crate::stats::Counts;

    #[test]
    fn a_changes_line_lists_the_largest_changes_either_way() {
        // As a step that shrank lists its types: largest growth first, so the falls come last.
        let entries = [("a", 10, 1), ("b", -1, -1), ("c", -2, -1), ("d", -3, -1)]
            .into_iter()
            .chain([("e", -4, -1), ("f", -5, -1), ("g", -1 << 20, -9)])
            .map(|(n, b, k)| (n.to_string(), b, k));
        let line = changes_line("types", entries).expect("some changed");
        assert_eq!(
            line,
            "   types: g -1.0 MiB (-9 blk) | a +10 B (+1 blk) | f -5 B (-1 blk) | \
             e -4 B (-1 blk) | d -3 B (-1 blk) | 2 more"
        );
    }

    /// A step from an empty heap to one whose size classes say `live` bytes in `blocks`, with one
    /// site of 3 blocks of 8 bytes.
    fn step_with_one_site(live: u64, blocks: u64) -> String {
        let mut s = Snapshot::zero();
        s.totals.live_bytes = live;
        s.totals.live_blocks = blocks;
        s.totals.total_bytes = live;
        s.totals.total_blocks = blocks;
        s.totals.peak_bytes = live;
        s.totals.peak_blocks = blocks;
        s.classes = vec![ClassCount {
            size: 16,
            counts: Counts {
                alloc_blocks: blocks,
                alloc_bytes: live,
                free_blocks: 0,
                free_bytes: 0,
            },
        }];
        let mut site = SiteCount::live(1, 3);
        site.counts.alloc_blocks = 3 * crate::stats::UNIT;
        s.sites = SiteList::new(vec![site]);
        s.since(&Snapshot::zero()).to_string()
    }

    /// A site count of a run read from a file, at a site named `function`.
    fn site_named(function: &str, id: u32, counts: Counts, young_free: (u64, u64)) -> SiteCount {
        SiteCount {
            site: Some(crate::Site::new(vec![crate::Frame {
                function: function.to_string(),
                file: Some("src/main.rs".to_string()),
                line: Some(1),
            }])),
            counts,
            young_free,
            ..SiteCount::live(id, 0)
        }
    }

    /// The first step of a run read from a file (from an empty snapshot), with `sites`.
    fn first_step(sites: Vec<SiteCount>) -> Delta {
        let mut before = Snapshot::zero();
        before.run = !crate::checkpoint::run_id();
        let mut after = before.clone();
        after.sites = SiteList::new(sites);
        after.since(&before)
    }

    /// A step with one site per `(function, blocks allocated, blocks freed)`, each block 8 bytes.
    fn step_with_sites(sites: &[(&str, u64, u64)]) -> Delta {
        let unit = crate::stats::UNIT;
        first_step(
            sites
                .iter()
                .zip(1..)
                .map(|(&(function, allocs, frees), id)| {
                    let counts = Counts {
                        alloc_blocks: allocs * unit,
                        alloc_bytes: 8 * allocs,
                        free_blocks: frees * unit,
                        free_bytes: 8 * frees,
                    };
                    site_named(function, id, counts, (0, 0))
                })
                .collect(),
        )
    }

    #[test]
    fn a_site_that_fell_by_more_than_a_listed_one_grew_is_listed_in_a_step_that_rose() {
        // A user trial's cache: its new table grew, its old one was freed, small sites grew.
        let text =
            step_with_sites(&[("table", 100, 0), ("tiny", 2, 0), ("old", 0, 50)]).to_string();
        let listed: Vec<&str> = text.lines().filter(|l| l.contains(" blk ")).collect();
        assert_eq!(listed.len(), 3, "{text}");
        assert!(
            listed[2].contains("-400 B") && listed[2].contains("old"),
            "{text}"
        );
        let small = step_with_sites(&[("table", 100, 0), ("tiny", 2, 0), ("crumb", 0, 1)]);
        assert!(!small.to_string().contains("crumb ("), "{small}");
    }

    #[test]
    fn a_site_that_kept_blocks_larger_than_its_average_allocation_says_their_size() {
        // A string grown in steps (8, 16 then 32 bytes), 200 times: 600 allocations of 18.7 B on
        // average, of which the 200 last, of 32 B, are kept (a user trial read "~19 B per alloc"
        // as the size of what leaked).
        let unit = crate::stats::UNIT;
        let counts = Counts {
            alloc_blocks: 600 * unit,
            alloc_bytes: 200 * (8 + 16 + 32),
            free_blocks: 400 * unit,
            free_bytes: 200 * (8 + 16),
        };
        let young = (400 * unit, 200 * (8 + 16));
        let text = first_step(vec![site_named("grow", 1, counts, young)]).to_string();
        assert!(
            text.contains("[(unknown), ~19 B per alloc, kept 200 of 600 born (~32 B each)]"),
            "{text}"
        );
    }

    #[test]
    fn class_names_are_exact_in_the_largest_unit_that_gives_them_in_two_decimals() {
        assert_eq!(class_name(16), "16 B");
        assert_eq!(class_name(640), "640 B");
        assert_eq!(class_name(1024), "1 KiB");
        assert_eq!(class_name(1280), "1.25 KiB");
        assert_eq!(class_name(2_621_440), "2.5 MiB");
        assert_eq!(class_name(1_000_000), "1,000,000 B");
    }

    #[test]
    fn a_site_that_also_freed_older_blocks_says_how_many() {
        // A cache that replaced 4 older entries with 6 of the 10 born this step: +2 blocks, which
        // "kept 6" alone seemed to contradict (a user trial).
        let unit = crate::stats::UNIT;
        let counts = Counts {
            alloc_blocks: 10 * unit,
            alloc_bytes: 10 * 40,
            free_blocks: 8 * unit,
            free_bytes: 8 * 40,
        };
        let young = (4 * unit, 4 * 40);
        let text = first_step(vec![site_named("cache", 1, counts, young)]).to_string();
        assert!(
            text.contains("+2 blk") && text.contains("kept 6 of 10 born, 4 older freed]"),
            "{text}"
        );
    }

    #[test]
    fn a_site_that_only_freed_older_blocks_says_only_that() {
        let unit = crate::stats::UNIT;
        let counts = Counts {
            alloc_blocks: 0,
            alloc_bytes: 0,
            free_blocks: 3 * unit,
            free_bytes: 3 * 64,
        };
        // A step that shrank, so that the sites that fell are listed.
        let mut before = Snapshot::zero();
        before.run = !crate::checkpoint::run_id();
        let class = |free_blocks, free_bytes| ClassCount {
            size: 64,
            counts: Counts {
                alloc_blocks: 3,
                alloc_bytes: 3 * 64,
                free_blocks,
                free_bytes,
            },
        };
        before.classes = vec![class(0, 0)];
        before.checkpoint = true;
        let mut after = before.clone();
        after.epoch = 1;
        after.classes = vec![class(3, 3 * 64)];
        after.sites = SiteList::new(vec![site_named("drop", 1, counts, (0, 0))]);
        let text = after.since(&before).to_string();
        assert!(text.contains("per blk, 3 older freed]"), "{text}");
        assert!(!text.contains("kept 0 of 0"), "{text}");
    }

    #[test]
    fn one_kept_block_larger_than_the_average_allocation_gives_its_size() {
        // A map's table grown in steps: the last, largest table is the one kept.
        let unit = crate::stats::UNIT;
        let counts = Counts {
            alloc_blocks: 3 * unit,
            alloc_bytes: 1024 + 2048 + 4096,
            free_blocks: 2 * unit,
            free_bytes: 1024 + 2048,
        };
        let young = (2 * unit, 1024 + 2048);
        let text = first_step(vec![site_named("table", 1, counts, young)]).to_string();
        assert!(text.contains("kept 1 of 3 born (4.0 KiB)]"), "{text}");
    }

    #[test]
    fn a_site_that_kept_blocks_of_its_average_size_says_it_once() {
        let unit = crate::stats::UNIT;
        let counts = Counts {
            alloc_blocks: 10 * unit,
            alloc_bytes: 400,
            free_blocks: 0,
            free_bytes: 0,
        };
        let text = first_step(vec![site_named("keep", 1, counts, (0, 0))]).to_string();
        assert!(
            text.contains("[(unknown), ~40 B per alloc, kept 10 of 10 born]"),
            "{text}"
        );
    }

    #[test]
    fn kept_blocks_of_the_average_size_as_printed_are_not_said_twice() {
        // 2,070 B per allocation and 2,080 B per block kept both print as 2.0 KiB (a review).
        let unit = crate::stats::UNIT;
        let counts = Counts {
            alloc_blocks: 100 * unit,
            alloc_bytes: 50 * 2060 + 50 * 2080,
            free_blocks: 50 * unit,
            free_bytes: 50 * 2060,
        };
        let young = (50 * unit, 50 * 2060);
        let text = first_step(vec![site_named("grow", 1, counts, young)]).to_string();
        assert!(
            text.contains("[(unknown), ~2.0 KiB per alloc, kept 50 of 100 born]"),
            "{text}"
        );
    }

    #[test]
    fn table_rows_that_left_nothing_are_counted_with_the_busiest_named() {
        // A user trial: the twenty rows of a table were half `+0 B` churn. An earlier one: its
        // churn site of a million allocations fell below the top 20, after quiet sites.
        let d = step_with_sites(&[("a_quiet", 3, 3), ("z_busy", 1_080_000, 1_080_000)]);
        let table = d.table(By::Site, 10);
        let lines: Vec<&str> = table.lines().map(str::trim).collect();
        assert_eq!(lines.len(), 2, "{table}");
        assert!(
            lines[1].starts_with(
                "(2 sites were allocated and freed alike: no change; the busiest, 1,080,000 \
                 allocs: z_busy"
            ),
            "{table}"
        );
    }

    #[test]
    fn table_columns_widen_to_their_widest_figure() {
        let d = step_with_sites(&[("many", 12_345_678, 0)]);
        let table = d.table(By::Site, 10);
        let mut lines = table.lines();
        assert_eq!(
            lines.next(),
            Some("  live bytes      blocks     allocs  site")
        );
        assert_eq!(
            lines.next(),
            Some("   +94.2 MiB +12,345,678 12,345,678  many (src/main.rs:1)  [(unknown)]")
        );
    }

    #[test]
    fn a_comparison_of_two_runs_that_differ_nowhere_says_so() {
        let run = |flip| {
            let mut s = Snapshot::zero();
            s.run ^= flip;
            s.sites = SiteList::new(vec![SiteCount {
                site: Some(crate::Site::new(vec![crate::Frame {
                    function: "app::load".to_string(),
                    file: None,
                    line: None,
                }])),
                ..SiteCount::live(1, 3)
            }]);
            s
        };
        let d = run(1).since(&run(2));
        assert!(d.is_comparison());
        let table = d.table(By::Site, 10);
        assert!(
            table.contains("(nothing counted by site differs between the two)"),
            "{table}"
        );
    }

    #[test]
    fn averages_are_rounded_to_the_nearest_byte() {
        assert_eq!(rounded_div(9_999_920, 1_999_990), 5);
        assert_eq!(rounded_div(7, 2), 4);
        assert_eq!(rounded_div(5, 3), 2);
        assert_eq!(rounded_div(4, 3), 1);
        assert_eq!(rounded_div(u64::MAX, u64::MAX), 1);
    }

    #[test]
    fn sites_that_add_up_to_the_step_get_no_note() {
        let text = step_with_one_site(24, 3);
        assert!(!text.contains("account for"), "{text}");
    }

    #[test]
    fn sites_that_do_not_add_up_to_the_step_say_how_much_they_account_for() {
        let text = step_with_one_site(1024, 10);
        assert!(
            text.contains(
                "call sites account for +24 B in +3 blocks of this; the other +1000 B in +7 \
                 blocks changed while the snapshots were read"
            ),
            "{text}"
        );
    }

    #[test]
    fn reports_end_without_a_line_break_whatever_they_hold() {
        let empty = Snapshot::zero().since(&Snapshot::zero()).to_string();
        assert!(!empty.is_empty() && !empty.ends_with('\n'), "{empty:?}");
        let timeline = Timeline::new(vec![Snapshot::zero(), Snapshot::zero()]).to_string();
        assert!(!timeline.ends_with('\n'), "{timeline:?}");
        assert_eq!(timeline.lines().count(), 4, "{timeline:?}");
    }

    /// Checkpoints 0 to 5 of one run whose live bytes rise by 100 at each step, with `sites` as
    /// every checkpoint's sites (a site whose live bytes stay the same) and `sampled_mean`.
    fn rising_checkpoints(sites: bool, sampled_mean: Option<u64>) -> Timeline {
        let checkpoints = (0..6u32)
            .map(|epoch| {
                let mut s = Snapshot::zero();
                s.epoch = epoch;
                s.checkpoint = true;
                s.totals.live_bytes = 1000 + 100 * u64::from(epoch);
                s.sampled_mean = sampled_mean;
                if sites {
                    s.sites = SiteList::new(vec![SiteCount::live(1, 3)]);
                }
                s
            })
            .collect();
        Timeline::new(checkpoints)
    }

    fn growing_line(t: &Timeline) -> String {
        t.to_string().lines().next().unwrap_or_default().to_string()
    }

    #[test]
    fn no_growing_site_with_sites_off_says_that_none_was_recorded() {
        let line = growing_line(&rising_checkpoints(false, None));
        assert!(
            line.contains("rose in each of the last 5 steps (+500 B in all)"),
            "{line}"
        );
        assert!(line.contains("call sites off"), "{line}");
    }

    #[test]
    fn no_growing_site_under_sparse_sampling_says_to_sample_more_often() {
        let line = growing_line(&rising_checkpoints(true, Some(512 * 1024)));
        assert!(line.contains("no sampled call site grew"), "{line}");
        assert!(line.contains("sample more often"), "{line}");
    }

    #[test]
    fn no_growing_site_when_nothing_was_sampled_blames_the_sampling_not_sites_off() {
        let line = growing_line(&rising_checkpoints(false, Some(1 << 30)));
        assert!(line.contains("no sampled call site grew"), "{line}");
        assert!(!line.contains("call sites off"), "{line}");
    }

    #[test]
    fn a_sampled_window_whose_sites_held_steady_does_not_say_none_was_sampled() {
        let t = rising_checkpoints(true, Some(4096));
        let (before, mut after) = (t.checkpoints[0].clone(), t.checkpoints[1].clone());
        // One more sampled block allocated and freed at the site: no change in live bytes.
        let mut churned = SiteCount::live(1, 3);
        churned.counts.alloc_blocks += crate::stats::UNIT;
        churned.counts.alloc_bytes += 8;
        churned.counts.free_blocks += crate::stats::UNIT;
        churned.counts.free_bytes += 8;
        after.sites = SiteList::new(vec![churned]);
        let step = after.since(&before).to_string();
        assert!(!step.contains("no call site sampled"), "{step}");
        assert!(
            step.contains("   no sampled call site's live bytes changed in this window (about one sample per 4.0 KiB)"),
            "{step}"
        );
    }

    #[test]
    fn no_growing_site_while_the_total_held_steady_is_none() {
        let mut t = rising_checkpoints(true, None);
        t.checkpoints[5].totals.live_bytes = 1000;
        assert_eq!(growing_line(&t), "growing at every step: none");
    }

    #[test]
    fn a_timeline_of_fewer_than_three_checkpoints_says_it_cannot_tell_what_grows() {
        let mut t = rising_checkpoints(true, None);
        t.checkpoints.truncate(2);
        assert_eq!(
            growing_line(&t),
            "growing at every step: too few checkpoints to tell (2; it compares the steps between \
             checkpoints, and takes three)"
        );
    }

    #[test]
    fn too_few_checkpoints_after_dropped_ones_says_they_were_not_kept() {
        let mut t = rising_checkpoints(true, None);
        // The first and the last two kept, as `keep=3` does: epochs 1 to 4 dropped.
        let last = t.checkpoints.len() - 2;
        t.checkpoints.drain(1..last);
        assert_eq!(
            growing_line(&t),
            format!(
                "growing at every step: too few checkpoints to tell (2; it compares the steps \
                 between checkpoints, and takes three; {} checkpoints before them not kept \
                 (keep_checkpoints or HEAPDELTA=keep=), and no step is compared across them)",
                last - 1
            )
        );
    }

    /// Checkpoints `step 0`, `step 1`, … of one run with one site, `leak`, holding `live[i]` blocks
    /// of 8 bytes at checkpoint `i`.
    fn one_site_holding(live: &[u64]) -> Timeline {
        let points: Vec<(u64, bool)> = live.iter().map(|&blocks| (blocks, false)).collect();
        leak_timeline(&points)
    }

    /// Checkpoints of one run with one site, `leak`, holding `blocks` blocks of 8 bytes at each
    /// `(blocks, by_clock)`: the program's labelled `step i`, the clock's `i.0s`.
    fn leak_timeline(points: &[(u64, bool)]) -> Timeline {
        let leak = Site::new(vec![crate::callsite::Frame {
            function: "leak".to_string(),
            file: Some("src/main.rs".to_string()),
            line: Some(7),
        }]);
        let checkpoints = (0..)
            .zip(points)
            .map(|(epoch, &(blocks, by_clock))| {
                let mut s = Snapshot::zero();
                s.epoch = epoch;
                s.checkpoint = true;
                s.by_clock = by_clock;
                s.label = Some(match by_clock {
                    true => format!("{epoch}.0s"),
                    false => format!("step {epoch}"),
                });
                s.totals.live_bytes = 8 * blocks;
                s.sites = SiteList::new(vec![SiteCount {
                    site: Some(leak.clone()),
                    ..SiteCount::live(1, blocks)
                }]);
                s
            })
            .collect();
        Timeline::new(checkpoints)
    }

    /// Six checkpoints of sites of `function` in `src/main.rs`, one per `(line, blocks at each
    /// checkpoint)` of 8-byte blocks; the live total is theirs plus `other` bytes at each.
    fn timeline_of(function: &str, sites: &[(u32, [u64; 6])], other: [u64; 6]) -> Timeline {
        let checkpoints = (0..6u32)
            .map(|epoch| {
                let at = epoch as usize;
                let mut s = Snapshot::zero();
                s.epoch = epoch;
                s.checkpoint = true;
                s.totals.live_bytes = other[at] + sites.iter().map(|(_, b)| 8 * b[at]).sum::<u64>();
                let counts = sites.iter().map(|&(line, blocks)| SiteCount {
                    site: Some(Site::new(vec![crate::callsite::Frame {
                        function: function.to_string(),
                        file: Some("src/main.rs".to_string()),
                        line: Some(line),
                    }])),
                    ..SiteCount::live(line, blocks[at])
                });
                s.sites = SiteList::new(counts.collect());
                s
            })
            .collect();
        Timeline::new(checkpoints)
    }

    #[test]
    fn a_leaks_tables_grown_in_some_steps_are_listed_under_the_sites_grown_at_every_one() {
        // A user trial's interner: its strings grew at every step, its map by doubling.
        let strings = [0, 10, 20, 30, 40, 50];
        let map = [0, 0, 100, 100, 300, 300];
        let text = timeline_of("intern", &[(63, strings), (68, map)], [0; 6]).to_string();
        let lines: Vec<&str> = text.lines().take(4).collect();
        assert_eq!(
            lines,
            [
                "growing at every step (last 5 steps):",
                "        +400 B over 5 steps  intern (src/main.rs:63)  [(unknown)]",
                "   these hold +400 B of the +2.7 KiB the live total rose in those steps; grown in \
                 some of them:",
                "      +2.3 KiB in 2 of 5 steps  intern (src/main.rs:68)  [(unknown)]",
            ],
            "{text}"
        );
    }

    #[test]
    fn a_site_grown_by_a_tenth_of_the_rise_in_some_steps_is_listed_under_those_grown_at_every_one()
    {
        // A user trial's sessions: their histories grew at every step, the map of them by
        // doubling, 11% of the rise.
        let history = [0, 200, 400, 600, 800, 1000];
        let map = [0, 0, 0, 0, 120, 120];
        let text = timeline_of("record", &[(107, history), (105, map)], [0; 6]).to_string();
        let lines: Vec<&str> = text.lines().take(4).collect();
        assert!(
            lines[2].starts_with("   these hold +7.8 KiB of the +8.8 KiB"),
            "{text}"
        );
        assert!(
            lines[3].contains("in 1 of 5 steps  record (src/main.rs:105)"),
            "{text}"
        );
    }

    #[test]
    fn with_no_site_grown_at_every_step_the_sites_grown_most_are_listed() {
        // A user trial's sampled run: its leak had no sample at one step, and no site was named.
        let memo = [0, 10, 20, 20, 30, 40];
        let table = [0, 0, 0, 16, 16, 16];
        let text = timeline_of("memoize", &[(122, memo), (127, table)], [0; 6]).to_string();
        let lines: Vec<&str> = text.lines().take(4).collect();
        assert!(
            lines[0].contains("no single call site grew at every step"),
            "{text}"
        );
        assert_eq!(
            lines[1..],
            [
                "   grown most in some of those 5 steps, of the +448 B the live total rose:",
                "        +320 B in 4 of 5 steps  memoize (src/main.rs:122)  [(unknown)]",
                "        +128 B in 1 of 5 steps  memoize (src/main.rs:127)  [(unknown)]",
            ],
            "{text}"
        );
    }

    #[test]
    fn a_window_whose_live_total_fell_lists_nothing_grown_in_some_steps() {
        // A review: a leak, and a 1 MiB buffer freed in the window, read "-1018.6 KiB the live
        // total rose".
        let leak = [0, 10, 20, 30, 40, 50];
        let grown = [0, 0, 0, 50, 50, 50];
        let freed = [1 << 20, 1 << 20, 1 << 20, 0, 0, 0];
        let text = timeline_of("run", &[(7, leak), (9, grown)], freed).to_string();
        assert!(
            text.starts_with("growing at every step (last 5 steps):\n"),
            "{text}"
        );
        assert!(!text.contains("these hold"), "{text}");
    }

    #[test]
    fn a_site_table_of_allocations_without_sites_says_none_was_recorded() {
        // Four blocks allocated, in the classes and the totals, at no site (sites off).
        let mut after = Snapshot::zero();
        after.totals.total_blocks = 4;
        after.totals.total_bytes = 110;
        after.totals.live_blocks = 4;
        after.totals.live_bytes = 110;
        after.classes = vec![ClassCount {
            size: 32,
            counts: Counts {
                alloc_blocks: 4,
                alloc_bytes: 110,
                free_blocks: 0,
                free_bytes: 0,
            },
        }];
        let d = after.since(&Snapshot::zero());
        let table = d.table(By::Site, 10);
        assert!(
            table.contains("no call site was recorded: call sites are off"),
            "{table}"
        );
        after.sampled_mean = Some(512 * 1024);
        let table = after.since(&Snapshot::zero()).table(By::Site, 10);
        assert!(
            table.contains("no call site was recorded: sampling picked none"),
            "{table}"
        );
    }

    #[test]
    fn a_site_table_cut_to_no_rows_does_not_say_nothing_was_recorded() {
        let text = {
            let mut s = Snapshot::zero();
            s.classes = vec![ClassCount {
                size: 16,
                counts: Counts {
                    alloc_blocks: 3,
                    alloc_bytes: 24,
                    free_blocks: 0,
                    free_bytes: 0,
                },
            }];
            let mut site = SiteCount::live(1, 3);
            site.counts.alloc_blocks = 3 * crate::stats::UNIT;
            s.sites = SiteList::new(vec![site]);
            s.since(&Snapshot::zero()).table(By::Site, 0)
        };
        assert!(!text.contains("no call site was recorded"), "{text}");
        assert!(!text.contains("nothing was counted"), "{text}");
    }

    #[test]
    fn a_step_that_starts_at_a_tick_of_the_clock_names_the_tick() {
        let t = leak_timeline(&[(1, false), (2, true), (3, false), (4, false)]);
        let after_tick = t.between("1.0s", "step 2").unwrap();
        assert!(
            after_tick.summary().starts_with("| 1.0s \u{2192} step 2 |"),
            "{}",
            after_tick.summary()
        );
        let plain = t.between("step 2", "step 3").unwrap();
        assert!(
            plain.summary().starts_with("| step 3 |"),
            "{}",
            plain.summary()
        );
    }

    /// The first line of the timeline text, and the second, of `leak_timeline(points)`.
    fn growing_lines(points: &[(u64, bool)]) -> (String, String) {
        let text = leak_timeline(points).to_string();
        let mut lines = text.lines().map(str::to_string);
        (
            lines.next().unwrap_or_default(),
            lines.next().unwrap_or_default(),
        )
    }

    #[test]
    fn a_leak_checkpointed_by_the_program_and_the_clock_is_found_at_one_kinds_steps() {
        // A user trial: a program checkpointing its batches, run with `HEAPDELTA=every=1`; each
        // clock checkpoint fell right after one of the program's, in a step where nothing grew.
        // The last checkpoint is the clock's, and each of its steps spans a batch.
        let mut points = Vec::new();
        for batch in 0..7 {
            points.push((10 * batch, false));
            points.push((10 * batch, true));
        }
        assert_eq!(
            growing_lines(&points),
            (
                "growing at every step (last 5 steps, between the clock's checkpoints (every=)):"
                    .to_string(),
                "        +400 B over 5 steps  leak (src/main.rs:7)  [(unknown)]".to_string()
            )
        );
        points.push((70, false));
        assert_eq!(
            growing_lines(&points).0,
            "growing at every step (last 5 steps, between the program's checkpoints):"
        );
    }

    #[test]
    fn a_leak_in_a_phase_the_clock_checkpointed_after_one_the_program_did_is_found() {
        // A review: eight checkpoints of the program's on a flat heap, then seven of the clock's
        // while the program leaked; following the kind that took more missed the leak.
        let mut points: Vec<(u64, bool)> = (0..8).map(|_| (5, false)).collect();
        points.extend((1..=7).map(|s| (5 + 10 * s, true)));
        let (first, second) = growing_lines(&points);
        assert_eq!(
            first,
            "growing at every step (last 5 steps, between the clock's checkpoints (every=)):"
        );
        assert!(second.contains("+400 B over 5 steps  leak"), "{second}");
    }

    #[test]
    fn a_last_checkpoint_of_a_kind_too_few_for_two_steps_leaves_the_steps_to_the_other() {
        // A program's `done` after a run of the clock's checkpoints.
        let mut points: Vec<(u64, bool)> = (0..8).map(|s| (10 * s, true)).collect();
        points.push((80, false));
        assert_eq!(
            growing_lines(&points).0,
            "growing at every step (last 5 steps, between the clock's checkpoints (every=)):"
        );
    }

    #[test]
    fn no_growth_between_one_kinds_checkpoints_names_the_kind() {
        let mut points: Vec<(u64, bool)> = (0..4).map(|_| (5, false)).collect();
        points.extend((0..4).map(|_| (5, true)));
        assert_eq!(
            growing_lines(&points).0,
            "growing at every step, between the clock's checkpoints (every=): none"
        );
    }

    #[test]
    fn sites_that_grew_up_to_a_fall_at_the_end_are_listed_with_where_it_began() {
        // The last checkpoint taken while the program freed on its way out (a user trial,
        // `HEAPDELTA=every=`: "growing at every step: none" under a leak of 45 MiB).
        let text = one_site_holding(&[0, 10, 20, 30, 40, 50, 5]).to_string();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("growing at every step to the last checkpoint: none")
        );
        assert_eq!(
            lines.next(),
            Some(
                "growing at every step up to \"step 5\" (last 5 steps to it; live bytes fell in \
                 the 1 step after it):"
            )
        );
        assert_eq!(
            lines.next(),
            Some("        +400 B over 5 steps  leak (src/main.rs:7)  [(unknown)]")
        );
    }

    #[test]
    fn sites_that_grew_up_to_a_quiet_end_are_listed_with_where_it_began() {
        // An operator trial: a service's file read after its traffic stopped named no site.
        let text = one_site_holding(&[0, 10, 20, 30, 40, 50, 50, 50]).to_string();
        let lines: Vec<&str> = text.lines().take(3).collect();
        assert_eq!(
            lines,
            [
                "growing at every step to the last checkpoint: none",
                "growing at every step up to \"step 5\" (last 5 steps to it; live bytes held in \
                 the 2 steps after it):",
                "        +400 B over 5 steps  leak (src/main.rs:7)  [(unknown)]",
            ],
            "{text}"
        );
    }

    #[test]
    fn a_warm_up_then_a_steady_run_lists_nothing() {
        let text = one_site_holding(&[0, 10, 20, 30, 30, 30, 30, 30]).to_string();
        assert!(text.starts_with("growing at every step: none\n"), "{text}");
    }

    #[test]
    fn a_fall_at_the_end_after_no_steady_growth_lists_nothing() {
        let text = one_site_holding(&[0, 10, 20, 15, 40, 50, 5]).to_string();
        assert!(!text.contains("up to"), "{text}");
    }

    #[test]
    fn a_site_that_fell_in_a_middle_step_is_not_listed() {
        let text = one_site_holding(&[0, 10, 20, 15, 40, 50, 60]).to_string();
        assert!(
            text.starts_with("growing at every step: none\n\n"),
            "{text}"
        );
    }

    #[test]
    fn a_sampled_step_without_sites_says_none_was_sampled() {
        let t = rising_checkpoints(false, Some(4096));
        let step = t.checkpoints[1].since(&t.checkpoints[0]).to_string();
        assert!(
            step.contains("no call site sampled in this window (about one sample per 4.0 KiB)"),
            "{step}"
        );
    }

    #[test]
    fn control_characters_in_a_name_are_escaped() {
        assert_eq!(
            OneLine("step\n2\u{1b}[31m").to_string(),
            "step\\n2\\u{1b}[31m"
        );
        assert_eq!(OneLine("plain étape").to_string(), "plain étape");
    }

    #[test]
    fn line_separators_in_a_name_are_escaped() {
        assert_eq!(
            OneLine("a\u{2028}b\u{2029}c").to_string(),
            "a\\u{2028}b\\u{2029}c"
        );
    }

    #[test]
    fn one_thing_is_named_in_the_singular() {
        assert_eq!(count(1, "block"), "1 block");
        assert_eq!(count(0, "block"), "0 blocks");
        assert_eq!(count(1024, "arena"), "1,024 arenas");
    }

    #[test]
    fn thousands_are_separated_with_commas() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(6219), "6,219");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(112 * 1024 * 1024 + 400 * 1024), "112.4 MiB");
        assert_eq!(bytes(1_267_000_000), "1.18 GiB");
        assert_eq!(bytes(1_048_575), "1.0 MiB");
        assert_eq!(bytes(1_048_524), "1023.9 KiB");
        assert_eq!(signed_bytes(-2048), "-2.0 KiB");
    }
}
