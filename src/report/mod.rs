//! Reports: the terminal text (`Display` of `Delta` and `Timeline`), and file formats.
//!
//! Every file format is written from the same two views of the data: a [`Snapshot`]'s live
//! figures per resolved call site, and a [`Delta`]'s growth per site.

#[cfg(feature = "cli")]
pub mod cli;
pub(crate) mod dhat;
pub(crate) mod folded;
pub(crate) mod json;
#[cfg(feature = "plot")]
pub(crate) mod plot;
#[cfg(feature = "pprof")]
pub(crate) mod pprof;
pub(crate) mod text;

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::callsite::{self, Site};
use crate::checkpoint;
use crate::snapshot::Snapshot;
use crate::stats::{Counts, UNIT};
use crate::thread;

/// What every exporter needs to know about one call site.
#[derive(Clone, Debug)]
pub(crate) struct SiteFigures {
    pub site: Site,
    /// Blocks allocated (in the window, for a delta; ever, for a snapshot).
    pub alloc_blocks: u64,
    /// Bytes allocated.
    pub alloc_bytes: u64,
    /// Live blocks (growth, for a delta).
    pub live_blocks: i64,
    /// Live bytes (growth, for a delta).
    pub live_bytes: i64,
}

/// Rounds a block figure in `UNIT`s to whole blocks.
pub(crate) fn units_to_blocks(units: u64) -> u64 {
    units.saturating_add(UNIT / 2) / UNIT
}

/// A snapshot's counters per resolved site (sites that resolve alike merged), most live bytes
/// first.
pub(crate) fn snapshot_sites(s: &Snapshot) -> Vec<SiteFigures> {
    let here = s.run == checkpoint::run_id();
    let mut merged: HashMap<Site, Counts> = HashMap::new();
    thread::untracked(|| {
        for c in &s.sites {
            let site = match (&c.site, here) {
                (Some(site), _) => site.clone(),
                (None, true) => callsite::resolve(c.id),
                (None, false) => Site::unknown(),
            };
            merged.entry(site).or_default().add(&c.counts);
        }
    });
    let mut v: Vec<SiteFigures> = merged
        .into_iter()
        .map(|(site, c)| SiteFigures {
            site,
            alloc_blocks: units_to_blocks(c.alloc_blocks),
            alloc_bytes: c.alloc_bytes,
            live_blocks: units_to_blocks(c.live_blocks()) as i64,
            live_bytes: c.live_bytes() as i64,
        })
        .collect();
    sort_figures(&mut v);
    v
}

/// A delta's growth per site, most growth first.
pub(crate) fn delta_sites(d: &crate::Delta) -> Vec<SiteFigures> {
    let mut v: Vec<SiteFigures> = d
        .sites()
        .iter()
        .map(|s| SiteFigures {
            site: s.site.clone(),
            alloc_blocks: s.allocs,
            alloc_bytes: s.allocated_bytes,
            live_blocks: s.live_blocks,
            live_bytes: s.live_bytes,
        })
        .collect();
    sort_figures(&mut v);
    v
}

fn sort_figures(v: &mut [SiteFigures]) {
    v.sort_by(|x, y| {
        y.live_bytes
            .cmp(&x.live_bytes)
            .then_with(|| y.alloc_bytes.cmp(&x.alloc_bytes))
            .then_with(|| x.site.to_string().cmp(&y.site.to_string()))
    });
}

/// The name used for a site whose frames are not known.
pub(crate) const UNKNOWN_SITE: &str = "(unknown site)";

/// Creates `path` and hands a buffered writer to `write`, flushing at the end.
pub(crate) fn write_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut w = BufWriter::new(File::create(path)?);
    write(&mut w)?;
    w.flush()
}
