//! Folded stacks (`outer;middle;inner;file:line;[Type] 1234`, one line per call path, the value
//! in bytes; the site's line and type where known), the input of flamegraph tools, and (feature `flamegraph`) a flamegraph SVG drawn by `inferno`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
#[cfg(feature = "flamegraph")]
use std::io;
#[cfg(feature = "flamegraph")]
use std::path::Path;

use crate::diff::Delta;
use crate::report::text::breaks_line;
#[cfg(feature = "flamegraph")]
use crate::report::text::OneLine;
use crate::report::{delta_sites, snapshot_sites, SiteFigures, UNKNOWN_SITE};
use crate::snapshot::Snapshot;

/// A frame name as a folded-stack element: `;` separates frames and a line ends a stack, so
/// neither may appear inside one; what `OneLine` escapes (control characters, noncharacters,
/// which no SVG may hold) reads as a space; and a name with nothing to show (from a file) is
/// `(unknown)`, which flamegraph tools would otherwise drop with its bytes.
fn element(name: &str) -> String {
    let name = name.replace(';', ",").replace(breaks_line, " ");
    match name.trim().is_empty() {
        true => "(unknown)".to_string(),
        false => name,
    }
}

/// One line per stack with positive live bytes, outermost frame first, largest first. Under the
/// innermost function come two more elements, where known: the site's `file:line`, then its type
/// in brackets, so that the sites of one function stay apart (as the text reports name them) and
/// the boxes of the function hold them all. Sites whose stacks read alike are added up, as
/// flamegraph tools expect each stack once.
fn fold(sites: &[SiteFigures]) -> String {
    let mut stacks: BTreeMap<String, i64> = BTreeMap::new();
    for s in sites.iter().filter(|s| s.live_bytes > 0) {
        let stack = if s.site.frames().is_empty() {
            UNKNOWN_SITE.to_string()
        } else {
            let mut names: Vec<String> = s
                .site
                .shown_stack()
                .iter()
                .rev()
                .map(|(name, _)| element(name))
                .collect();
            let innermost = s.site.stack().next();
            if let Some((Some(file), Some(line))) = innermost.map(|f| (&f.file, f.line)) {
                names.push(element(&format!("{file}:{line}")));
            }
            if let Some(type_name) = s.site.known_type() {
                names.push(element(&format!("[{type_name}]")));
            }
            names.join(";")
        };
        let total = stacks.entry(stack).or_default();
        *total = total.saturating_add(s.live_bytes);
    }
    let mut lines: Vec<(String, i64)> = stacks.into_iter().collect();
    lines.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
    let mut out = String::new();
    for (stack, bytes) in lines {
        let _ = writeln!(out, "{stack} {bytes}");
    }
    out
}

impl Snapshot {
    /// Live bytes per call site as folded stacks, for `flamegraph.pl`, `inferno-flamegraph`,
    /// speedscope and the like: one line `outer;…;inner;file:line;[Type] BYTES` per stack
    /// holding live bytes, largest first (the site's line and type where known, so that the sites
    /// of one function stay apart).
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let kept = vec![0u8; 4096];
    /// let folded = heapdelta::snapshot().folded();
    /// assert!(!folded.is_empty());
    /// for line in folded.lines() {
    ///     let (_stack, bytes) = line.rsplit_once(' ').unwrap();
    ///     assert!(bytes.parse::<u64>().unwrap() > 0);
    /// }
    /// # drop(kept);
    /// # }
    /// ```
    pub fn folded(&self) -> String {
        crate::report::text_for_program(|| fold(&snapshot_sites(self)))
    }

    /// Draws the live bytes per call site as a flamegraph SVG (feature `flamegraph`). A
    /// snapshot without live bytes at any call site has nothing to draw: that is an error.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() -> std::io::Result<()> {
    /// # #[cfg(feature = "flamegraph")] {
    /// let keep = vec![0u8; 4096];
    /// let path = std::env::temp_dir().join("heapdelta-doc-live.svg");
    /// heapdelta::snapshot().write_flamegraph(&path)?;
    /// assert!(std::fs::read_to_string(&path)?.contains("<svg"));
    /// # let _ = std::fs::remove_file(&path);
    /// # drop(keep);
    /// # }
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "flamegraph")]
    #[cfg_attr(docsrs, doc(cfg(feature = "flamegraph")))]
    pub fn write_flamegraph(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let title = match self.label() {
            Some(label) => format!("Live heap bytes at {label:?}"),
            None => "Live heap bytes".to_string(),
        };
        let title = estimated(title, self.sampled_mean);
        flamegraph(&self.folded(), self.sites_recorded(), &title, path.as_ref())
    }

    /// Whether the snapshot holds call sites, or nothing was ever allocated to have one: `false`
    /// after a run with call sites off, or sampled without a sample.
    #[cfg(feature = "flamegraph")]
    pub(crate) fn sites_recorded(&self) -> bool {
        self.sites.iter().next().is_some() || self.totals().total_blocks == 0
    }
}

impl Delta {
    /// The growth of live bytes per call site as folded stacks (sites that shrank or stayed
    /// level are left out).
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() {
    /// let (v, growth) = heapdelta::measure(|| vec![0u8; 1000]);
    /// assert!(growth.folded().ends_with(" 1000\n"));
    /// # drop(v);
    /// # }
    /// ```
    pub fn folded(&self) -> String {
        crate::report::text_for_program(|| fold(&delta_sites(self)))
    }

    /// Draws the growth of live bytes per call site as a flamegraph SVG (feature `flamegraph`).
    /// A window in which nothing grew has nothing to draw: that is an error.
    ///
    /// ```
    /// # #[global_allocator]
    /// # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
    /// # fn main() -> std::io::Result<()> {
    /// # #[cfg(feature = "flamegraph")] {
    /// let (kept, growth) = heapdelta::measure(|| vec![0u8; 4096]);
    /// let path = std::env::temp_dir().join("heapdelta-doc-growth.svg");
    /// growth.write_flamegraph(&path)?;
    /// # let _ = std::fs::remove_file(&path);
    /// # drop(kept);
    /// # }
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "flamegraph")]
    #[cfg_attr(docsrs, doc(cfg(feature = "flamegraph")))]
    pub fn write_flamegraph(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let title = estimated(
            format!("Heap growth {}", self.window_name()),
            self.sampled_mean,
        );
        flamegraph(&self.folded(), self.sites_recorded(), &title, path.as_ref())
    }

    /// Whether the window has call sites, or allocated nothing to have one: `false` for a window
    /// of a run with call sites off, or sampled without a sample in the window.
    #[cfg(feature = "flamegraph")]
    pub(crate) fn sites_recorded(&self) -> bool {
        !self.sites().is_empty() || self.allocated_blocks() == 0
    }
}

/// Why there is nothing to draw or export by call site when none was recorded (see
/// `Snapshot::sites_recorded`): the run's settings, not the figures.
#[cfg(feature = "flamegraph")]
pub(crate) const NO_SITE_RECORDED: &str = "no call site was recorded (the run had \
HEAPDELTA=sites=off or CallSites::Off, or, with sampled sites, no allocation in the window was \
sampled)";

/// A flamegraph's title, marked as estimated when call sites were sampled.
#[cfg(feature = "flamegraph")]
fn estimated(title: String, sampled_mean: Option<u64>) -> String {
    match sampled_mean {
        Some(mean) => format!(
            "{title} (estimated: call sites sampled about once per {})",
            crate::report::text::bytes(mean)
        ),
        None => title,
    }
}

/// Draws `folded` to `path`; `recorded`: whether the figures drawn had call sites at all (see
/// `Snapshot::sites_recorded`), which says why an empty drawing is.
#[cfg(feature = "flamegraph")]
fn flamegraph(folded: &str, recorded: bool, title: &str, path: &Path) -> io::Result<()> {
    crate::thread::untracked(|| {
        if folded.is_empty() {
            let why = match recorded {
                true => "no call site has live bytes (or growth)",
                false => NO_SITE_RECORDED,
            };
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("nothing to draw: {why}"),
            ));
        }
        // The drawing adds the stacks' bytes up in 64 bits; sampled sites' estimates, each
        // within a file's bounds, can exceed that together.
        let total = folded.lines().try_fold(0u64, |sum, line| {
            let bytes = line.rsplit(' ').next()?.parse::<u64>().ok()?;
            sum.checked_add(bytes)
        });
        if total.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "nothing drawn: the call sites' bytes add up to more than 2^64",
            ));
        }
        let mut options = inferno::flamegraph::Options::default();
        options.title = OneLine(title).to_string();
        options.count_name = "bytes".to_string();
        options.name_type = "Site:".to_string();
        options.colors = inferno::flamegraph::color::Palette::Basic(
            inferno::flamegraph::color::BasicPalette::Mem,
        );
        crate::report::write_file(path, |w| {
            inferno::flamegraph::from_lines(&mut options, folded.lines(), w)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frame, Site};

    /// A site of `live_bytes` in `main` → `load` at `line`, allocating `type_name`.
    fn in_load(line: u32, type_name: Option<&str>, live_bytes: i64) -> SiteFigures {
        let frame = |function: &str, line| Frame {
            function: function.to_string(),
            file: Some("src/main.rs".to_string()),
            line: Some(line),
        };
        SiteFigures {
            site: Site::with_type(
                vec![frame("app::load", line), frame("app::main", 3)],
                type_name.map(str::to_string),
            ),
            alloc_blocks: 1,
            alloc_bytes: live_bytes as u64,
            live_blocks: 1,
            live_bytes,
        }
    }

    #[cfg(feature = "flamegraph")]
    #[test]
    fn sites_whose_bytes_add_up_past_64_bits_are_not_drawn() {
        let folded = fold(&[
            in_load(10, Some("Vec<u8>"), i64::MAX),
            in_load(11, Some("Vec<u8>"), i64::MAX),
            in_load(12, Some("Vec<u8>"), i64::MAX),
        ]);
        let path =
            std::env::temp_dir().join(format!("heapdelta-overflow-{}.svg", std::process::id()));
        let e = flamegraph(&folded, true, "t", &path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(!path.exists());
    }

    #[cfg(feature = "flamegraph")]
    #[test]
    fn a_flamegraph_of_a_run_without_call_sites_says_none_was_recorded() {
        // As `heapdelta flamegraph` says it (a user trial: the library's message did not).
        let mut s = crate::snapshot::Snapshot::zero();
        s.totals.total_blocks = 5;
        let path =
            std::env::temp_dir().join(format!("heapdelta-no-sites-{}.svg", std::process::id()));
        let e = s.write_flamegraph(&path).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "nothing to draw: no call site was recorded (the run had HEAPDELTA=sites=off"
            ),
            "{e}"
        );
        assert!(!path.exists());
    }

    #[test]
    fn a_closure_without_its_path_folds_under_the_function_that_wrote_it() {
        let frame = |function: &str, line| Frame {
            function: function.to_string(),
            file: Some("src/main.rs".to_string()),
            line: Some(line),
        };
        let site = SiteFigures {
            site: Site::new(vec![frame("{closure#0}", 36), frame("build", 37)]),
            alloc_blocks: 1,
            alloc_bytes: 8,
            live_blocks: 1,
            live_bytes: 8,
        };
        assert_eq!(
            fold(&[site]),
            "build;{closure#0} in build;src/main.rs:36 8\n"
        );
    }

    #[test]
    fn sites_of_one_function_stay_apart_under_it_by_line_and_type() {
        let folded = fold(&[
            in_load(10, Some("Vec<u8>"), 300),
            in_load(12, Some("String"), 200),
            in_load(12, None, 100),
        ]);
        assert_eq!(
            folded,
            "app::main;app::load;src/main.rs:10;[Vec<u8>] 300\n\
             app::main;app::load;src/main.rs:12;[String] 200\n\
             app::main;app::load;src/main.rs:12 100\n"
        );
    }

    #[test]
    fn a_stack_cut_by_the_depth_folds_under_its_mark() {
        let mut site = in_load(10, Some("String"), 100);
        let mark = "(stack cut at 2 frames, before any of the program's: raise Tracker::depth)";
        let mut frames = site.site.frames().to_vec();
        frames.insert(
            0,
            Frame {
                function: mark.to_string(),
                file: None,
                line: None,
            },
        );
        site.site = Site::with_type(frames, Some("String".to_string()));
        assert_eq!(
            fold(&[site]),
            format!("{mark};app::main;app::load;src/main.rs:10;[String] 100\n")
        );
    }

    /// A site whose one frame is `function`, without file or type, holding 100 bytes.
    fn named(function: &str) -> SiteFigures {
        let mut site = in_load(10, None, 100);
        site.site = Site::with_type(
            vec![Frame {
                function: function.to_string(),
                file: None,
                line: None,
            }],
            None,
        );
        site
    }

    #[test]
    fn a_frame_without_a_name_folds_as_unknown_not_as_an_empty_stack() {
        // An empty stack is dropped, bytes and all, by flamegraph tools (a fuzz run's file).
        assert_eq!(fold(&[named(" ")]), "(unknown) 100\n");
    }

    #[test]
    fn noncharacters_and_bidirectional_controls_in_a_name_read_as_spaces() {
        // XML admits no noncharacter: an SVG holding one does not open.
        assert_eq!(fold(&[named("a\u{ffff}b\u{202e}c")]), "a b c 100\n");
    }
}
