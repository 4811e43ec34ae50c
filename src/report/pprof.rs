//! pprof's format: a gzipped `profile.proto` message, which `go tool pprof`, Pyroscope, Parca and
//! the other fleet-wide profilers read. The messages are declared here with `prost`'s derive
//! macros (field numbers as in pprof's `profile.proto`), so no `protoc` is needed to build.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use crate::diff::Delta;
use crate::report::text::estimates_note_beside;
use crate::report::{delta_sites, snapshot_sites, write_file, SiteFigures, UNKNOWN_SITE};
use crate::snapshot::Snapshot;

#[derive(Clone, PartialEq, Message)]
struct Profile {
    #[prost(message, repeated, tag = "1")]
    sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    time_nanos: i64,
    #[prost(int64, tag = "10")]
    duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    period: i64,
    #[prost(int64, repeated, tag = "13")]
    comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    default_sample_type: i64,
}

#[derive(Clone, PartialEq, Message)]
struct ValueType {
    #[prost(int64, tag = "1")]
    r#type: i64,
    #[prost(int64, tag = "2")]
    unit: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(uint64, repeated, tag = "1")]
    location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    label: Vec<Label>,
}

#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(int64, tag = "1")]
    key: i64,
    #[prost(int64, tag = "2")]
    str: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Mapping {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "5")]
    filename: i64,
    #[prost(bool, tag = "7")]
    has_functions: bool,
    #[prost(bool, tag = "8")]
    has_filenames: bool,
    #[prost(bool, tag = "9")]
    has_line_numbers: bool,
}

#[derive(Clone, PartialEq, Message)]
struct Location {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(uint64, tag = "2")]
    mapping_id: u64,
    #[prost(message, repeated, tag = "4")]
    line: Vec<Line>,
}

#[derive(Clone, PartialEq, Message)]
struct Line {
    #[prost(uint64, tag = "1")]
    function_id: u64,
    #[prost(int64, tag = "2")]
    line: i64,
}

#[derive(Clone, PartialEq, Message)]
struct Function {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(int64, tag = "2")]
    name: i64,
    #[prost(int64, tag = "3")]
    system_name: i64,
    #[prost(int64, tag = "4")]
    filename: i64,
}

/// Builds a profile's string table, functions and locations, each entry once.
#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<Function>,
    function_ids: HashMap<(i64, i64), u64>,
    locations: Vec<Location>,
    location_ids: HashMap<(u64, i64), u64>,
}

impl Builder {
    fn new() -> Builder {
        let mut b = Builder::default();
        b.string(""); // index 0 is always the empty string
        b
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    fn location(&mut self, function: &str, file: Option<&str>, line: Option<u32>) -> u64 {
        let name = self.string(function);
        let filename = self.string(file.unwrap_or(""));
        let next_function = self.functions.len() as u64 + 1;
        let function_id = *self
            .function_ids
            .entry((name, filename))
            .or_insert(next_function);
        if function_id == next_function {
            self.functions.push(Function {
                id: function_id,
                name,
                // No system name: pprof demangles a function whose system name equals its name,
                // and its C++ demangler strips the `<…>` of Rust names such as
                // `<[u8; 32] as Digest>::digest`.
                system_name: 0,
                filename,
            });
        }
        let line = line.map_or(0, i64::from);
        let next_location = self.locations.len() as u64 + 1;
        let location_id = *self
            .location_ids
            .entry((function_id, line))
            .or_insert(next_location);
        if location_id == next_location {
            self.locations.push(Location {
                id: location_id,
                mapping_id: 1,
                line: vec![Line { function_id, line }],
            });
        }
        location_id
    }

    /// Names each function that shares its name with a function of another file after its file
    /// too (`build (src/model.rs)`): pprof adds functions up by name alone, and without qualified
    /// names (debug info of line tables only) two `build`s or `new`s would be one.
    fn tell_same_names_apart(&mut self) {
        let mut files_of: HashMap<i64, Vec<i64>> = HashMap::new();
        for f in &self.functions {
            let files = files_of.entry(f.name).or_default();
            if !files.contains(&f.filename) {
                files.push(f.filename);
            }
        }
        for i in 0..self.functions.len() {
            let Function { name, filename, .. } = self.functions[i];
            if files_of.get(&name).is_some_and(|files| files.len() > 1) && filename != 0 {
                let qualified = format!(
                    "{} ({})",
                    self.strings[name as usize], self.strings[filename as usize]
                );
                self.functions[i].name = self.string(&qualified);
            }
        }
    }
}

/// When and how the figures were counted: the window ending at `end_unix_nanos` (wall clock, 0:
/// not known) and lasting `seconds`; the sampling mean when the sites' figures are estimates; the
/// program they were counted in.
struct Window<'a> {
    seconds: f64,
    end_unix_nanos: u64,
    sampled_mean: Option<u64>,
    /// The program's path, the profile's main mapping (empty when not known).
    program: Option<&'a str>,
}

impl<'a> Window<'a> {
    /// The window of figures counted over `seconds` up to `end_unix_nanos` (0: not known), by
    /// `program`, sampled with `sampled_mean` when they are estimates.
    fn of(
        seconds: f64,
        end_unix_nanos: u64,
        sampled_mean: Option<u64>,
        program: &'a Option<String>,
    ) -> Window<'a> {
        Window {
            seconds,
            end_unix_nanos,
            sampled_mean,
            program: program.as_deref(),
        }
    }

    fn duration_nanos(&self) -> i64 {
        (self.seconds * 1e9) as i64
    }

    /// The window's start in nanoseconds since the Unix epoch, as pprof's `time_nanos`; 0 (not
    /// written) when the end is not known.
    fn start_nanos(&self) -> i64 {
        match i64::try_from(self.end_unix_nanos) {
            Ok(0) | Err(_) => 0,
            Ok(end) => end.saturating_sub(self.duration_nanos()).max(0),
        }
    }
}

/// What a profile's samples hold beside the allocations: the live figures of a snapshot, or the
/// change in them over a delta's window.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Figures {
    Live,
    Growth,
}

/// The profile of per-site figures: allocations (count and bytes) and live or grown (count and
/// bytes, negative where a delta's site shrank). A delta's profile also has the growth of the
/// sites that grew alone (`grown_objects`, `grown_space`, never negative), its default and last
/// sample type: viewers that show one type (speedscope takes the default, or the last) refuse
/// negative values.
fn build(sites: &[SiteFigures], figures: Figures, window: Window, comment: &str) -> Profile {
    let mut b = Builder::new();
    let value_type = |b: &mut Builder, t: &str, unit: &str| ValueType {
        r#type: b.string(t),
        unit: b.string(unit),
    };
    let mut sample_type = vec![
        value_type(&mut b, "alloc_objects", "count"),
        value_type(&mut b, "alloc_space", "bytes"),
        value_type(&mut b, "inuse_objects", "count"),
        value_type(&mut b, "inuse_space", "bytes"),
    ];
    if figures == Figures::Growth {
        sample_type.push(value_type(&mut b, "grown_objects", "count"));
        sample_type.push(value_type(&mut b, "grown_space", "bytes"));
    }
    let period_type = value_type(&mut b, "space", "bytes");
    let type_key = b.string("type");
    let mut samples = Vec::with_capacity(sites.len());
    for s in sites {
        let location_id: Vec<u64> = if s.site.frames().is_empty() {
            vec![b.location(UNKNOWN_SITE, None, None)]
        } else {
            s.site
                .shown_stack()
                .into_iter()
                .map(|(name, f)| b.location(&name, f.file.as_deref(), f.line))
                .collect()
        };
        let type_name = b.string(s.site.type_name());
        let mut value = vec![
            i64::try_from(s.alloc_blocks).unwrap_or(i64::MAX),
            i64::try_from(s.alloc_bytes).unwrap_or(i64::MAX),
            s.live_blocks,
            s.live_bytes,
        ];
        if figures == Figures::Growth {
            value.extend([s.live_blocks.max(0), s.live_bytes.max(0)]);
        }
        samples.push(Sample {
            location_id,
            value,
            label: vec![Label {
                key: type_key,
                str: type_name,
            }],
        });
    }
    b.tell_same_names_apart();
    let mapping_file = b.string(window.program.unwrap_or(""));
    let comment = b.string(comment);
    let default_sample_type = b.string(match figures {
        Figures::Live => "inuse_space",
        Figures::Growth => "grown_space",
    });
    Profile {
        sample_type,
        sample: samples,
        mapping: vec![Mapping {
            id: 1,
            filename: mapping_file,
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
        }],
        location: b.locations,
        function: b.functions,
        string_table: b.strings,
        time_nanos: window.start_nanos(),
        duration_nanos: window.duration_nanos(),
        period_type: Some(period_type),
        // As Go's heap profiles: the sampling rate; the values are already scaled estimates.
        period: window
            .sampled_mean
            .map_or(1, |m| i64::try_from(m).unwrap_or(i64::MAX)),
        comment: vec![comment],
        default_sample_type,
    }
}

fn write_gzipped(profile: &Profile, w: impl Write) -> io::Result<()> {
    let mut gz = GzEncoder::new(w, Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

/// `comment`, followed by the note that the figures are sampled estimates, when they are, with
/// the exact figures beside (`exact`), which the sites' samples add up to only roughly.
fn with_estimates(
    comment: String,
    sampled_mean: Option<u64>,
    exact: impl FnOnce() -> String,
) -> String {
    match estimates_note_beside(sampled_mean, exact) {
        Some(note) => format!("{comment}; {note}"),
        None => comment,
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "pprof")))]
impl Snapshot {
    /// Writes the snapshot as a pprof profile (gzipped `profile.proto`, feature `pprof`) with
    /// the sample types `alloc_objects`, `alloc_space` (everything allocated so far),
    /// `inuse_objects` and `inuse_space` (live now), per call site, so `go tool pprof`,
    /// Pyroscope and Parca read it. Each sample carries a `type` label: the allocated type. The
    /// profile's time and duration are those of the window its allocations were counted in, from
    /// heapdelta's start to the snapshot (no time for a snapshot read from a file written before
    /// snapshots kept theirs).
    /// A run without call sites (`CallSites::Off`, or sampled with no sample) gives a profile
    /// without samples; `heapdelta export` refuses such a run instead.
    ///
    /// ```
    /// let path = std::env::temp_dir().join("heapdelta-doc.pb.gz");
    /// heapdelta::snapshot().write_pprof(&path)?;
    /// // a program would keep the file, for `go tool pprof -top <path>`
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_pprof(&self, path: impl AsRef<Path>) -> io::Result<()> {
        write_file(path.as_ref(), |w| self.pprof_into(w))
    }

    /// Writes the snapshot as a gzipped pprof profile to `w` (see
    /// [`write_pprof`](Snapshot::write_pprof)).
    ///
    /// ```
    /// let mut out = Vec::new();
    /// heapdelta::snapshot().write_pprof_to(&mut out)?;
    /// assert_eq!(&out[..2], &[0x1f, 0x8b]); // gzip
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_pprof_to(&self, w: impl Write) -> io::Result<()> {
        crate::report::write_for_program(w, |w| self.pprof_into(w))
    }

    /// The gzipped profile's bytes, made into `w` (in heapdelta's guard).
    fn pprof_into(&self, w: &mut Vec<u8>) -> io::Result<()> {
        let comment = match self.label() {
            Some(label) => format!("heapdelta snapshot {label:?}"),
            None => "heapdelta snapshot".to_string(),
        };
        let comment = with_estimates(comment, self.sampled_mean, || self.exact_live());
        let window = Window::of(
            self.seconds,
            self.unix_nanos,
            self.sampled_mean,
            &self.program,
        );
        write_gzipped(
            &build(&snapshot_sites(self), Figures::Live, window, &comment),
            w,
        )
    }
}

#[cfg_attr(docsrs, doc(cfg(feature = "pprof")))]
impl Delta {
    /// Writes the growth as a pprof profile (feature `pprof`): `alloc_objects`/`alloc_space`
    /// count what was allocated in the window, `inuse_objects`/`inuse_space` the change in live
    /// blocks and bytes (negative where a site shrank, as in `pprof -diff_base`), and
    /// `grown_objects`/`grown_space`, the default, that change where it is growth (0 where a site
    /// shrank), which viewers that refuse negative values open. The profile's time is the
    /// window's start, and its duration the window's length.
    /// A run without call sites (`CallSites::Off`, or sampled with no sample) gives a profile
    /// without samples; `heapdelta export` refuses such a run instead.
    ///
    /// ```
    /// let step = heapdelta::checkpoint("step 1");
    /// let path = std::env::temp_dir().join("heapdelta-doc-step.pb.gz");
    /// step.write_pprof(&path)?;
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_pprof(&self, path: impl AsRef<Path>) -> io::Result<()> {
        write_file(path.as_ref(), |w| self.pprof_into(w))
    }

    /// Writes the growth as a gzipped pprof profile to `w` (see
    /// [`write_pprof`](Delta::write_pprof)).
    ///
    /// ```
    /// let (_, d) = heapdelta::measure(|| vec![0u8; 64]);
    /// let mut out = Vec::new();
    /// d.write_pprof_to(&mut out)?;
    /// assert!(!out.is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_pprof_to(&self, w: impl Write) -> io::Result<()> {
        crate::report::write_for_program(w, |w| self.pprof_into(w))
    }

    /// The gzipped profile's bytes, made into `w` (in heapdelta's guard).
    fn pprof_into(&self, w: &mut Vec<u8>) -> io::Result<()> {
        let comment = format!("heapdelta growth {}", self.window_name());
        let comment = with_estimates(comment, self.sampled_mean, || self.exact_growth());
        let window = Window::of(
            self.seconds,
            self.unix_nanos,
            self.sampled_mean,
            &self.program,
        );
        write_gzipped(
            &build(&delta_sites(self), Figures::Growth, window, &comment),
            w,
        )
    }
}
