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

/// Writes `path` through the buffered writer handed to `write`. A new file, or one that replaces
/// a regular file, is written beside it under a temporary name and renamed over it once complete,
/// so a write that fails (a full disk, a size limit) leaves the earlier file whole and no partial
/// one. Anything else (a device, a pipe, a symbolic link) is written in place, and so is a file
/// no temporary can be made beside (a directory that refuses new files, a name at the length
/// limit).
pub(crate) fn write_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let permissions = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => Some(m.permissions()),
        Ok(_) => return write_to(File::create(path)?, write),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let Some(name) = path.file_name() else {
        return write_to(File::create(path)?, write);
    };
    let mut temporary = std::ffi::OsString::from(".");
    temporary.push(name);
    temporary.push(format!(".{}.heapdelta-tmp", std::process::id()));
    let temporary = path.with_file_name(temporary);
    let Ok(file) = File::create(&temporary) else {
        // No temporary file beside it (a directory that refuses new files while the file may be
        // written, a name too long for the suffix): in place, whose error, if any, names `path`.
        return write_to(File::create(path)?, write);
    };
    let written = (|| {
        if let Some(p) = permissions {
            file.set_permissions(p)?;
        }
        write_to(file, write)?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

fn write_to(
    file: File,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> io::Result<()> {
    let mut w = BufWriter::new(file);
    write(&mut w)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail_after_writing_some(w: &mut BufWriter<File>) -> io::Result<()> {
        w.write_all(b"partial")?;
        Err(io::Error::other("the disk is full"))
    }

    /// The names in `dir`.
    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failed_write_leaves_the_earlier_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "earlier").unwrap();
        assert!(write_file(&path, fail_after_writing_some).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "earlier");
        assert_eq!(names(dir.path()), ["report.json"]);
    }

    #[test]
    fn a_failed_write_of_a_new_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        assert!(write_file(&dir.path().join("new.json"), fail_after_writing_some).is_err());
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    #[cfg(unix)]
    fn a_write_replaces_the_file_and_keeps_its_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "earlier, longer text").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_file(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(names(dir.path()), ["report.json"]);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_file_in_a_directory_that_refuses_new_files_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "earlier").unwrap();
        // An immutable directory refuses new entries, even to root, while its files stay
        // writable. Setting it needs `chattr` and the right to use it: without, nothing to test.
        let chattr = |flag: &str| {
            std::process::Command::new("chattr")
                .arg(flag)
                .arg(dir.path())
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if !chattr("+i") {
            eprintln!("skipped: `chattr +i` is not available here");
            return;
        }
        let written = write_file(&path, |w| w.write_all(b"new"));
        assert!(chattr("-i"), "the directory must be made mutable again");
        written.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
    }

    #[test]
    fn a_file_whose_name_leaves_no_room_for_a_temporary_suffix_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r".repeat(250));
        write_file(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        write_file(&path, |w| w.write_all(b"newer")).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "newer");
    }

    #[test]
    #[cfg(unix)]
    fn a_symbolic_link_is_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        let link = dir.path().join("link.json");
        std::fs::write(&target, "earlier").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_file(&link, |w| w.write_all(b"new")).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }
}
