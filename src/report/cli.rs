//! The `heapdelta` command (feature `cli`): reads the JSON files heapdelta writes and prints
//! them, compares them, or converts them to the other formats.
//!
//! ```text
//! heapdelta show FILE [--top N]
//! heapdelta diff OLD NEW [--by site|class|tag|type] [--top N]
//! heapdelta diff TIMELINE [--from LABEL] [--to LABEL] [--by site|class|tag|type] [--top N]
//! heapdelta flamegraph FILE -o out.svg [--from LABEL] [--to LABEL] [--folded]
//! heapdelta plot TIMELINE -o out.svg
//! heapdelta export --format pprof|dhat FILE -o OUT [--from LABEL] [--to LABEL]
//! ```
//!
//! A FILE is a snapshot or a timeline (`Snapshot::write_json`, `Timeline::write_json`, or the
//! `report=` file of `HEAPDELTA`). Where one snapshot is needed, a timeline stands for its last
//! checkpoint; `--from`/`--to` pick the growth between two of its checkpoints instead (either
//! alone: from it to the last, or from the first to it; `LABEL#n` is the `n`th labelled `LABEL`). Errors are one line on stderr and exit code 1 (2 for a
//! usage error; without a command, its help on stderr and exit code 2).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::diff::{Delta, Timeline};
use crate::report::json::{read_contents, Contents};

use crate::report::text::{
    self, bytes, comparison_note, count, estimates_note, thousands, By, OneLine,
};
use crate::report::{snapshot_sites, sort_figures, SiteFigures};
use crate::snapshot::Snapshot;

#[derive(Parser)]
#[command(
    name = "heapdelta",
    version,
    about = "Read, compare and convert heapdelta's snapshot and timeline files.",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a snapshot (totals and the sites holding the most bytes) or a timeline (the sites
    /// that grew at every recent step, then one line per checkpoint).
    Show {
        /// A snapshot or timeline JSON file.
        file: PathBuf,
        /// How many sites to list (of a timeline: of those that grew at every step).
        #[arg(long, default_value_t = 10)]
        top: usize,
    },
    /// Print the growth from OLD to NEW, or between two checkpoints of one timeline (its first
    /// and last, without --from/--to), largest changes first.
    Diff {
        /// The earlier snapshot (a timeline: its last checkpoint); alone, or with --from/--to, the
        /// timeline whose checkpoints are compared.
        old: PathBuf,
        /// The later snapshot (a timeline: its last checkpoint).
        #[arg(conflicts_with_all = ["from", "to"])]
        new: Option<PathBuf>,
        #[command(flatten)]
        window: Window,
        /// Group the growth by call site, size class, scope tag or allocated type.
        #[arg(long, value_enum, default_value_t = By::Site)]
        by: By,
        /// How many rows to list.
        #[arg(long, default_value_t = 20)]
        top: usize,
    },
    /// Draw live bytes (or the growth between two checkpoints) per call site as a flamegraph.
    Flamegraph {
        /// A snapshot or timeline JSON file.
        file: PathBuf,
        /// The SVG to write (the folded stacks, with --folded; `-` writes those to standard
        /// output).
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        window: Window,
        /// Write folded stacks (`outer;…;inner;file:line;[Type] BYTES`) instead of an SVG.
        #[arg(long)]
        folded: bool,
    },
    /// Plot live, peak and reserved bytes and the top growing sites per checkpoint.
    Plot {
        /// A timeline JSON file.
        file: PathBuf,
        /// The SVG to write.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Convert a snapshot (or the growth between two checkpoints) to pprof or DHAT's format.
    Export {
        /// The format to write.
        #[arg(long, value_enum)]
        format: Format,
        /// A snapshot or timeline JSON file.
        file: PathBuf,
        /// The file to write; `-` for standard output (a pprof profile, which is binary, only
        /// when that is not a terminal).
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        window: Window,
    },
}

/// Two checkpoints of a timeline file.
#[derive(Args)]
struct Window {
    /// The checkpoint the growth starts at (needs a timeline file; without it, the first).
    #[arg(long, value_name = "LABEL")]
    from: Option<String>,
    /// The checkpoint the growth ends at (needs a timeline file; without it, the last).
    #[arg(long, value_name = "LABEL")]
    to: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// gzipped profile.proto, for go tool pprof, Pyroscope, Parca.
    Pprof,
    /// DHAT's JSON, for Valgrind's dh_view.html.
    Dhat,
}

impl Format {
    /// What the format's file is called in messages.
    fn name(self) -> &'static str {
        match self {
            Format::Pprof => "pprof profile",
            Format::Dhat => "DHAT file",
        }
    }
}

/// A failure: the one line printed.
struct Failure(String);

type Outcome = Result<(), Failure>;

fn fail(path: &Path, e: impl std::fmt::Display) -> Failure {
    // File errors of the library name their file already.
    let message = e.to_string();
    Failure(format!(
        "{}: {}",
        path.display(),
        crate::report::unnamed(path, &message)
    ))
}

/// A failure to write a picture of `path` to `output`: named after `path` when there was nothing
/// to draw (the writers say so as `InvalidInput`), after `output` otherwise (a user trial read
/// `o.svg: nothing to plot` as a problem of the output).
fn drawing_failed(path: &Path, output: &Path, e: std::io::Error) -> Failure {
    match e.kind() {
        std::io::ErrorKind::InvalidInput => fail(path, e),
        _ => fail(output, e),
    }
}

/// Runs the command line `args` (the program name first), printing to stdout and stderr, and
/// returns the exit code: success, 1 when the command failed (a file that cannot be read or
/// written, an unknown label), 2 for a usage error. `--help` and `--version` succeed.
///
/// ```no_run
/// // The whole of the `heapdelta` binary:
/// fn main() -> std::process::ExitCode {
///     heapdelta::cli::run(std::env::args_os())
/// }
/// ```
///
/// From a program or a test, with the arguments given directly:
///
/// ```
/// use std::process::ExitCode;
///
/// heapdelta::checkpoint("loaded");
/// let path = std::env::temp_dir().join("heapdelta-doc-cli.json");
/// heapdelta::timeline().write_json(&path)?;
/// let code = heapdelta::cli::run(["heapdelta", "show", path.to_str().unwrap()]);
/// assert_eq!(code, ExitCode::SUCCESS);
/// assert_eq!(heapdelta::cli::run(["heapdelta", "show", "no/such/file.json"]), ExitCode::FAILURE);
/// # let _ = std::fs::remove_file(&path);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            // No command: the help, which lists them, on stderr.
            let _ = e.print();
            return ExitCode::from(2);
        }
        Err(e) => {
            // clap's message up to its usage section, on one line.
            let rendered = e.to_string();
            let message: Vec<&str> = rendered
                .lines()
                .map(str::trim)
                .take_while(|l| !l.is_empty())
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            say_error(&format!("{message} (see heapdelta --help)"));
            return ExitCode::from(2);
        }
    };
    if let Some(refused) = refused_output(&cli.command) {
        say_error(&refused);
        return ExitCode::from(2);
    }
    let outcome = match cli.command {
        Command::Show { file, top } => show(&file, top),
        Command::Diff {
            old,
            new,
            window,
            by,
            top,
        } => diff(&old, new.as_deref(), &window, by, top),
        Command::Flamegraph {
            file,
            output,
            window,
            folded,
        } => flamegraph(&file, &output, &window, folded),
        Command::Plot { file, output } => plot(&file, &output),
        Command::Export {
            format,
            file,
            output,
            window,
        } => export(format, &file, &output, &window),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(msg)) => {
            say_error(&msg);
            ExitCode::FAILURE
        }
    }
}

/// Why the command's output file cannot be used, if it cannot: `-`, which by convention means
/// standard output, where the SVG files are not written, nor a pprof profile when it is a
/// terminal; or the file the command reads, which writing would replace.
fn refused_output(command: &Command) -> Option<String> {
    let (input, output) = match command {
        // Folded stacks and DHAT's JSON are text, for a pipe into another tool; a pprof profile
        // for a pipe or a redirection.
        Command::Flamegraph {
            output,
            folded: true,
            ..
        }
        | Command::Export {
            output,
            format: Format::Dhat,
            ..
        } if output.as_os_str() == "-" => return None,
        Command::Export {
            output,
            format: Format::Pprof,
            ..
        } if output.as_os_str() == "-" => {
            use std::io::IsTerminal;
            return std::io::stdout().is_terminal().then(|| {
                "-o -: a pprof profile is binary, and standard output is a terminal: redirect it \
                 to a file, or give a file name"
                    .to_string()
            });
        }
        Command::Flamegraph { file, output, .. }
        | Command::Plot { file, output }
        | Command::Export { file, output, .. } => (file, output),
        Command::Show { .. } | Command::Diff { .. } => return None,
    };
    if output.as_os_str() == "-" {
        return Some(
            "-o -: this SVG is written to a file only (folded stacks and exports can go to \
             standard output): give a file name (./- for a file named -)"
                .to_string(),
        );
    }
    same_file(input, output).then(|| {
        format!(
            "-o {}: that is the file read; writing it would replace it: give another file name",
            output.display()
        )
    })
}

/// Whether `a` and `b` name one existing file (through links, hard or symbolic, or different
/// spellings): the same device and inode.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Writes the one-line error to stderr (if stderr is gone there is nobody to tell).
fn say_error(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "heapdelta: {}", OneLine(msg));
}

/// Writes a command's output to stdout. A reader that went away (`heapdelta show F | head`) ends
/// the output quietly; any other write error is a failure.
fn print_out(text: &str) -> Outcome {
    print_bytes(text.as_bytes())
}

/// `print_out` for any bytes.
fn print_bytes(bytes: &[u8]) -> Outcome {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure(format!("writing to standard output: {e}")))
        }
        _ => Ok(()),
    }
}

fn read(path: &Path) -> Result<Contents, Failure> {
    let file = std::fs::File::open(path).map_err(|e| fail(path, e))?;
    read_contents(std::io::BufReader::new(file)).map_err(|e| fail(path, e))
}

/// One snapshot: the file's, or a timeline's last checkpoint.
fn read_snapshot(path: &Path) -> Result<Snapshot, Failure> {
    match read(path)? {
        Contents::Snapshot(s) => Ok(*s),
        // The last checkpoint: a final `exit` snapshot, taken once the program had freed its
        // data, only when there is nothing else.
        Contents::Timeline(t) => t
            .step_ends()
            .last()
            .or(t.checkpoints().last())
            .cloned()
            .ok_or_else(|| fail(path, "the timeline has no checkpoints")),
    }
}

/// `s`, labelled `name` (the file it was read from, see `file_names`) if it has no label of its
/// own, so that a diff of two such files names them (`| before.json → after.json |`) rather than
/// `now`.
fn named_by_file(mut s: Snapshot, name: String) -> Snapshot {
    if s.label.is_none() {
        s.label = Some(name);
    }
    s
}

/// How a diff names the two files it compares: by their file names, or by the paths given when
/// the names are alike (`out/snapshot.json`, `out-pool/snapshot.json`: a user trial's diff read
/// `| snapshot.json | … compared with snapshot.json`).
fn file_names(old: &Path, new: &Path) -> (String, String) {
    let name = |p: &Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    if name(old) == name(new) && old != new {
        (old.display().to_string(), new.display().to_string())
    } else {
        (name(old), name(new))
    }
}

/// What a flamegraph or an export shows: live bytes of one snapshot, or growth.
enum Selection {
    Live(Snapshot),
    Growth(Delta),
}

fn select(path: &Path, window: &Window) -> Result<Selection, Failure> {
    match window {
        Window {
            from: None,
            to: None,
        } => read_snapshot(path).map(Selection::Live),
        _ => growth_between(path, window).map(Selection::Growth),
    }
}

/// The growth between the checkpoints `window` names (`--from`, or the first; `--to`, or the
/// last) of the timeline file at `path`.
fn growth_between(path: &Path, window: &Window) -> Result<Delta, Failure> {
    let t = read_timeline(
        path,
        "--from/--to pick checkpoints of a timeline, and this is a snapshot file",
    )?;
    t.window(window.from.as_deref(), window.to.as_deref())
        .map_err(|e| fail(path, e))
}

/// The timeline in the file at `path`; `not_one` says why a snapshot file will not do.
fn read_timeline(path: &Path, not_one: &str) -> Result<Timeline, Failure> {
    match read(path)? {
        Contents::Timeline(t) => Ok(t),
        Contents::Snapshot(_) => Err(fail(path, not_one)),
    }
}

/// The growth over the timeline file at `path`: from its first checkpoint to its last (not the
/// `exit` snapshot `HEAPDELTA=report=` adds, taken once the program had freed its data).
fn whole_run(path: &Path) -> Result<Delta, Failure> {
    let t = read_timeline(
        path,
        "a snapshot file holds one state: give a second file to compare it with",
    )?;
    match (t.checkpoints().first(), t.step_ends().last()) {
        (Some(first), Some(last)) if !std::ptr::eq(first, last) => Ok(last.since(first)),
        _ => Err(fail(
            path,
            "the timeline has fewer than two checkpoints: nothing to compare",
        )),
    }
}

fn show(path: &Path, top: usize) -> Outcome {
    match read(path)? {
        Contents::Timeline(t) => print_out(&format!("{}\n", text::timeline_text(&t, top))),
        Contents::Snapshot(s) => print_out(&describe(&s, top)),
    }
}

/// The `show` text of a snapshot.
fn describe(s: &Snapshot, top: usize) -> String {
    let t = s.totals();
    let mut out = format!(
        "| {} | live {} | blocks {} | peak {} | allocated {} in {} |",
        OneLine(s.label().unwrap_or("snapshot")),
        bytes(t.live_bytes),
        thousands(t.live_blocks),
        bytes(t.peak_bytes),
        bytes(t.total_bytes),
        count(t.total_blocks, "block")
    );
    if let Some(p) = s.pool() {
        let _ = write!(out, " reserved {} |", bytes(p.bytes_reserved));
    }
    out.push('\n');
    if let Some(note) = estimates_note(s.sampled_mean) {
        let _ = writeln!(out, "{note}");
    }
    let holding: Vec<_> = by_leaf(snapshot_sites(s))
        .into_iter()
        .filter(|f| f.live_bytes > 0)
        .collect();
    let rows = holding
        .iter()
        .take(top)
        .map(|f| {
            [
                bytes(f.live_bytes as u64),
                thousands(f.live_blocks.max(0) as u64),
                thousands(f.alloc_blocks),
                format!("{}  [{}]", f.site, OneLine(f.site.type_name())),
            ]
        })
        .collect();
    out += &text::table_rows(["live bytes", "blocks", "allocs", "site"], rows);
    // An empty table says why (a user trial's `sites=off` snapshot showed only its header).
    if holding.is_empty() && t.total_blocks > 0 {
        let why = match (s.sites_recorded(), s.sampled_mean) {
            (false, _) => crate::report::folded::NO_SITE_RECORDED.to_string(),
            (true, Some(mean)) => format!(
                "no sampled call site holds live bytes: sampling, about once per {}, picked \
                 none of the live blocks",
                bytes(mean)
            ),
            (true, None) => "no call site holds live bytes".to_string(),
        };
        let _ = writeln!(out, "{:>12}  ({why})", "");
    }
    // The sites `top` cut are counted, as `diff` counts its rows (a README audit).
    if let Some(cut) = holding.get(top..).filter(|cut| !cut.is_empty()) {
        // Saturating: a file's sites are bounded one by one, not in sum (a fuzz run's two of
        // 8 EiB each wrapped to a negative sum, printed as 0 B, and overflowed in a debug build).
        let held = cut
            .iter()
            .map(|f| f.live_bytes)
            .fold(0i64, i64::saturating_add);
        let _ = writeln!(
            out,
            "{:>12}  (and {} more {} holding {})",
            "",
            thousands(cut.len() as u64),
            if cut.len() == 1 { "site" } else { "sites" },
            bytes(held.max(0) as u64)
        );
    }
    out
}

fn diff(old: &Path, new: Option<&Path>, window: &Window, by: By, top: usize) -> Outcome {
    let delta = match (new, &window.from, &window.to) {
        (Some(new), _, _) => {
            let (old_name, new_name) = file_names(old, new);
            let before = named_by_file(read_snapshot(old)?, old_name);
            named_by_file(read_snapshot(new)?, new_name).since(&before)
        }
        (None, None, None) => whole_run(old)?,
        (None, _, _) => growth_between(old, window)?,
    };
    print_out(&growth_table(&delta, by, top))
}

/// The `diff` text: the summary line, then one row per group, the largest changes first, growth
/// or fall.
fn growth_table(d: &Delta, by: By, top: usize) -> String {
    match comparison_note(d) {
        Some(note) => format!("{}\n{note}\n{}", d.summary(), d.table(by, top)),
        None => format!("{}\n{}", d.summary(), d.table(by, top)),
    }
}

fn flamegraph(path: &Path, output: &Path, window: &Window, folded: bool) -> Outcome {
    let selection = select(path, window)?;
    sites_recorded(path, &selection, "draw")?;
    let stacks = |folded: String| {
        if output.as_os_str() == "-" && !folded.is_empty() {
            return print_out(&folded);
        }
        write_folded(output, &folded).map_err(|e| drawing_failed(path, output, e))
    };
    let written = match (selection, folded) {
        (Selection::Live(s), true) => return stacks(s.folded()),
        (Selection::Growth(d), true) => return stacks(d.folded()),
        (Selection::Live(s), false) => s.write_flamegraph(output),
        (Selection::Growth(d), false) => d.write_flamegraph(output),
    };
    written.map_err(|e| drawing_failed(path, output, e))
}

/// Writes folded stacks to `output`; none at all is an error, as for the SVG.
fn write_folded(output: &Path, folded: &str) -> std::io::Result<()> {
    if folded.is_empty() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "nothing to write: no call site has live bytes (or growth)",
        ));
    }
    crate::report::write_file(output, |w| std::io::Write::write_all(w, folded.as_bytes()))
}

fn plot(path: &Path, output: &Path) -> Outcome {
    let timeline = read_timeline(path, "plot needs a timeline file, and this is a snapshot")?;
    timeline
        .write_plot(output)
        .map_err(|e| drawing_failed(path, output, e))
}

fn export(format: Format, path: &Path, output: &Path, window: &Window) -> Outcome {
    let selection = select(path, window)?;
    // The viewers would show a profile of nothing, its totals 0.
    sites_recorded(path, &selection, "export")?;
    let mut bytes = Vec::new();
    let made = match (selection, format) {
        (Selection::Live(s), Format::Pprof) => s.write_pprof_to(&mut bytes),
        (Selection::Live(s), Format::Dhat) => s.write_dhat_to(&mut bytes),
        (Selection::Growth(d), Format::Pprof) => d.write_pprof_to(&mut bytes),
        (Selection::Growth(d), Format::Dhat) => d.write_dhat_to(&mut bytes),
    };
    made.map_err(|e| Failure(format!("making the {}: {e}", format.name())))?;
    if output.as_os_str() == "-" {
        return print_bytes(&bytes);
    }
    crate::report::write_file(output, |w| {
        w.extend_from_slice(&bytes);
        Ok(())
    })
    .map_err(|e| fail(output, e))
}

/// An error naming the file read, when the run recorded no call site where it allocated: there
/// is nothing by site to `verb`, and the reason is the run's, not the output's.
fn sites_recorded(path: &Path, selection: &Selection, verb: &str) -> Outcome {
    let recorded = match selection {
        Selection::Live(s) => s.sites_recorded(),
        Selection::Growth(d) => d.sites_recorded(),
    };
    if recorded {
        return Ok(());
    }
    Err(fail(
        path,
        format!(
            "nothing to {verb}: {}",
            crate::report::folded::NO_SITE_RECORDED
        ),
    ))
}

/// Site figures as the text reports list them: told apart by first frame and type
/// (`Site::leaf`), call paths that differ further out added together, largest first.
fn by_leaf(sites: Vec<SiteFigures>) -> Vec<SiteFigures> {
    let mut merged: std::collections::HashMap<crate::Site, SiteFigures> =
        std::collections::HashMap::new();
    for f in sites {
        let leaf = f.site.leaf();
        let m = merged.entry(leaf.clone()).or_insert(SiteFigures {
            site: leaf,
            alloc_blocks: 0,
            alloc_bytes: 0,
            live_blocks: 0,
            live_bytes: 0,
        });
        m.alloc_blocks = m.alloc_blocks.saturating_add(f.alloc_blocks);
        m.alloc_bytes = m.alloc_bytes.saturating_add(f.alloc_bytes);
        m.live_blocks = m.live_blocks.saturating_add(f.live_blocks);
        m.live_bytes = m.live_bytes.saturating_add(f.live_bytes);
    }
    let mut v: Vec<SiteFigures> = merged.into_values().collect();
    sort_figures(&mut v);
    v
}
