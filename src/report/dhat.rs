//! DHAT's JSON format (`dhatFileVersion` 2, `mode` `rust-heap`), which Valgrind's `dh_view.html`
//! opens: one program point per call site, its frames innermost first, indexes into a frame
//! table whose entry 0 is `[root]`.
//!
//! heapdelta keeps no per-site maxima nor block lifetimes, so a site's "max" and "at t-gmax"
//! figures are its figures at the end (t-gmax is set to the end), and lifetimes are 0; the
//! command line the viewer shows says so (and, for sampled call sites, that the figures are
//! estimates).

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::diff::Delta;
use crate::report::text::estimates_note_beside;
use crate::report::{
    delta_sites, of_program, snapshot_sites, write_file, SiteFigures, UNKNOWN_SITE,
};
use crate::snapshot::Snapshot;

/// One program point.
#[derive(Serialize, Default)]
struct Pp {
    /// Total bytes and blocks allocated.
    tb: u64,
    tbk: u64,
    /// Total lifetimes of the blocks (unknown: 0).
    tl: u64,
    /// Maximum live bytes and blocks.
    mb: u64,
    mbk: u64,
    /// Live bytes and blocks at the global maximum.
    gb: u64,
    gbk: u64,
    /// Live bytes and blocks at the end.
    eb: u64,
    ebk: u64,
    /// Frames, innermost first, as indexes into `ftbl`.
    fs: Vec<usize>,
}

#[derive(Serialize)]
#[allow(non_snake_case)]
struct DhatFile {
    dhatFileVersion: u32,
    mode: &'static str,
    verb: &'static str,
    bklt: bool,
    bkacc: bool,
    bu: &'static str,
    bsu: &'static str,
    bksu: &'static str,
    tu: &'static str,
    Mtu: &'static str,
    tuth: u64,
    cmd: String,
    pid: u32,
    tg: u64,
    te: u64,
    pps: Vec<Pp>,
    ftbl: Vec<String>,
}

/// Builds the file: program points with unique frame lists. The innermost frame names the
/// allocated type too, when known (`model::encode (src/model.rs:61) [Vec<f32>]`), as the text
/// reports do, so that sites of one location that allocate two types stay apart; sites that map
/// to the same frames are merged, as the viewer rejects a repeated location.
/// `pid` is the id of the process that took the snapshot (0 when not known, as for snapshots read
/// from files written before it was kept).
fn build(sites: &[SiteFigures], cmd: String, seconds: f64, pid: Option<u32>) -> DhatFile {
    let mut ftbl = vec!["[root]".to_string()];
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut by_fs: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut pps: Vec<Pp> = Vec::new();
    for s in sites {
        let mut names: Vec<String> = s
            .site
            .shown_stack()
            .into_iter()
            .map(|(name, f)| {
                crate::callsite::Frame {
                    function: name.into_owned(),
                    ..f.clone()
                }
                .to_string()
            })
            .collect();
        match (names.first_mut(), s.site.known_type()) {
            (None, _) => names.push(UNKNOWN_SITE.to_string()),
            (Some(innermost), Some(type_name)) => *innermost += &format!(" [{type_name}]"),
            (Some(_), None) => {}
        }
        let fs: Vec<usize> = names
            .into_iter()
            .map(|name| {
                *index.entry(name.clone()).or_insert_with(|| {
                    ftbl.push(name);
                    ftbl.len() - 1
                })
            })
            .collect();
        let at = *by_fs.entry(fs.clone()).or_insert_with(|| {
            pps.push(Pp {
                fs,
                ..Pp::default()
            });
            pps.len() - 1
        });
        let pp = &mut pps[at];
        let live_bytes = s.live_bytes.max(0) as u64;
        let live_blocks = s.live_blocks.max(0) as u64;
        pp.tb = pp.tb.saturating_add(s.alloc_bytes);
        pp.tbk = pp.tbk.saturating_add(s.alloc_blocks);
        for (bytes, blocks) in [
            (&mut pp.mb, &mut pp.mbk),
            (&mut pp.gb, &mut pp.gbk),
            (&mut pp.eb, &mut pp.ebk),
        ] {
            *bytes = bytes.saturating_add(live_bytes);
            *blocks = blocks.saturating_add(live_blocks);
        }
    }
    // The viewer divides by the duration to show rates.
    let micros = ((seconds * 1e6) as u64).max(1);
    DhatFile {
        dhatFileVersion: 2,
        mode: "rust-heap",
        verb: "Allocated",
        bklt: true,
        bkacc: false,
        bu: "byte",
        bsu: "bytes",
        bksu: "blocks",
        tu: "µs",
        Mtu: "s",
        tuth: 10,
        cmd,
        pid: pid.unwrap_or(0),
        tg: micros,
        te: micros,
        pps,
        ftbl,
    }
}

/// The viewer shows `cmd` at the top of the page: it says there what the figures are, since the
/// viewer shows fields heapdelta does not record (lifetimes, maxima, t-gmax) as if measured.
fn with_notes(cmd: String, at_end: &str, estimates: Option<String>) -> String {
    let mut cmd = format!(
        "{cmd} (\"At t-end\": {at_end}; lifetimes, \"Max\" and t-gmax are not recorded: \
         they repeat the t-end figures"
    );
    if let Some(note) = estimates {
        cmd += &format!("; {note}");
    }
    cmd.push(')');
    cmd
}

fn write_dhat(file: &DhatFile, w: impl Write) -> io::Result<()> {
    serde_json::to_writer(w, file).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

impl Snapshot {
    /// Writes the snapshot in DHAT's format, for Valgrind's `dh_view.html`: per call site, the
    /// bytes and blocks ever allocated ("total") and those live at the snapshot ("at t-end").
    /// A run without call sites (`CallSites::Off`, or sampled with no sample) gives a file
    /// without any; `heapdelta export` refuses such a run instead.
    ///
    /// ```
    /// let path = std::env::temp_dir().join("heapdelta-doc-dhat.json");
    /// heapdelta::snapshot().write_dhat(&path)?;
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_dhat(&self, path: impl AsRef<Path>) -> io::Result<()> {
        write_file(path.as_ref(), |w| self.dhat_into(w))
    }

    /// Writes the snapshot in DHAT's format to `w` (see [`write_dhat`](Snapshot::write_dhat)).
    ///
    /// ```
    /// let mut out = Vec::new();
    /// heapdelta::snapshot().write_dhat_to(&mut out)?;
    /// assert!(String::from_utf8_lossy(&out).contains("\"dhatFileVersion\":2"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_dhat_to(&self, w: impl Write) -> io::Result<()> {
        crate::report::write_for_program(w, |w| self.dhat_into(w))
    }

    /// The DHAT file's bytes, made into `w` (in heapdelta's guard).
    fn dhat_into(&self, w: &mut Vec<u8>) -> io::Result<()> {
        let cmd = match self.label() {
            Some(label) => format!("heapdelta snapshot {label:?}"),
            None => "heapdelta snapshot".to_string(),
        };
        let cmd = of_program(cmd, self.program.as_deref());
        let estimates = estimates_note_beside(self.sampled_mean, || self.exact_live());
        let cmd = with_notes(cmd, "live at the snapshot", estimates);
        write_dhat(
            &build(&snapshot_sites(self), cmd, self.seconds, self.pid),
            w,
        )
    }
}

impl Delta {
    /// Writes the growth in DHAT's format: per call site, the bytes and blocks allocated in the
    /// window ("total") and the growth of its live bytes ("at t-end"; a site that shrank shows 0).
    /// A run without call sites (`CallSites::Off`, or sampled with no sample) gives a file
    /// without any; `heapdelta export` refuses such a run instead.
    ///
    /// ```
    /// let step = heapdelta::checkpoint("step 1");
    /// let path = std::env::temp_dir().join("heapdelta-doc-dhat-delta.json");
    /// step.write_dhat(&path)?;
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_dhat(&self, path: impl AsRef<Path>) -> io::Result<()> {
        write_file(path.as_ref(), |w| self.dhat_into(w))
    }

    /// Writes the growth in DHAT's format to `w` (see [`write_dhat`](Delta::write_dhat)).
    ///
    /// ```
    /// let (_, d) = heapdelta::measure(|| vec![0u8; 64]);
    /// let mut out = Vec::new();
    /// d.write_dhat_to(&mut out)?;
    /// assert!(String::from_utf8_lossy(&out).contains("\"[root]\""));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_dhat_to(&self, w: impl Write) -> io::Result<()> {
        crate::report::write_for_program(w, |w| self.dhat_into(w))
    }

    /// The DHAT file's bytes, made into `w` (in heapdelta's guard).
    fn dhat_into(&self, w: &mut Vec<u8>) -> io::Result<()> {
        let cmd = format!("heapdelta growth {}", self.window_name());
        let cmd = of_program(cmd, self.program.as_deref());
        let estimates = estimates_note_beside(self.sampled_mean, || self.exact_growth());
        let cmd = with_notes(cmd, "growth of live bytes", estimates);
        write_dhat(&build(&delta_sites(self), cmd, self.seconds, self.pid), w)
    }

    /// `"step 1" → "step 2"`, naming the window in report titles.
    pub(crate) fn window_name(&self) -> String {
        match (self.from_label.as_deref(), self.label()) {
            (Some(from), Some(to)) => format!("{from:?} \u{2192} {to:?}"),
            (None, Some(to)) => format!("to {to:?}"),
            (Some(from), None) => format!("since {from:?}"),
            (None, None) => "(unlabelled window)".to_string(),
        }
    }
}
