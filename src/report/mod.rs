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
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
            merged.entry(site).or_default().add_saturating(&c.counts);
        }
    });
    let mut v: Vec<SiteFigures> = merged
        .into_iter()
        .map(|(site, c)| SiteFigures {
            site,
            alloc_blocks: units_to_blocks(c.alloc_blocks),
            alloc_bytes: c.alloc_bytes,
            live_blocks: i64::try_from(units_to_blocks(c.live_blocks())).unwrap_or(i64::MAX),
            live_bytes: i64::try_from(c.live_bytes()).unwrap_or(i64::MAX),
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

pub(crate) fn sort_figures(v: &mut [SiteFigures]) {
    // (Each site named once, not at every comparison: see `diff::sort_sites`.)
    v.sort_by_cached_key(|s| {
        (
            std::cmp::Reverse((s.live_bytes, s.alloc_bytes)),
            s.site.to_string(),
        )
    });
}

/// Text heapdelta makes for the program: made inside heapdelta's guard (its working memory is
/// not the program's), then copied out of it, so that what the program keeps is the program's
/// and counted as such.
pub(crate) fn text_for_program(make: impl FnOnce() -> String) -> String {
    let text = thread::untracked(make);
    text.as_str().to_owned()
}

/// Writes what `make` writes to the program's writer `w`: made inside heapdelta's guard, written
/// outside it, so that a buffer of the program's that `w` grows is counted as the program's.
pub(crate) fn write_for_program(
    mut w: impl Write,
    make: impl FnOnce(&mut Vec<u8>) -> io::Result<()>,
) -> io::Result<()> {
    let bytes = thread::untracked(|| {
        let mut bytes = Vec::new();
        make(&mut bytes).map(|()| bytes)
    })?;
    w.write_all(&bytes)
}

/// A report's title with the program it describes, when known: `heapdelta growth … of
/// /path/to/program`.
pub(crate) fn of_program(title: String, program: Option<&str>) -> String {
    match program {
        Some(p) => format!("{title} of {p}"),
        None => title,
    }
}

/// The name used for a site whose frames are not known.
pub(crate) const UNKNOWN_SITE: &str = "(unknown site)";

/// Writes to `path` what `write` writes, all of it made first (in heapdelta's guard), so a report
/// that cannot be made leaves the file alone. A regular file that is only this one name and is
/// ours to replace, or a new one, is written beside it under a temporary name and renamed over it
/// once complete, so a write that fails (a full disk, a size limit) leaves the earlier file
/// whole and no partial one; a symbolic link is followed to the file it names, which is
/// replaced so (the link stays). Anything else is written in place: a device, a pipe, a link
/// into the process's descriptors (`/dev/stdout`), a file with other names (hard links) or
/// another owner, and a file no temporary can be made beside or renamed over (a directory that
/// refuses new files, a name at the length limit, a sticky directory). A file the program may
/// not write is refused, as a plain write would be.
pub(crate) fn write_file(
    path: &Path,
    write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>,
) -> io::Result<()> {
    thread::untracked(|| {
        let mut bytes = Vec::new();
        write(&mut bytes)?;
        store(path, &bytes).map_err(|e| naming(path, e))
    })
}

/// An error of the file `path` that says which file (a user trial's program, writing several
/// reports, got `No such file or directory (os error 2)`): the same kind, the path before the
/// message.
pub(crate) fn naming(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        FileError {
            path: path.to_path_buf(),
            error: e,
        },
    )
}

/// An I/O error and the file it was about (see [`naming`]).
#[derive(Debug)]
struct FileError {
    path: std::path::PathBuf,
    error: io::Error,
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

// The system's message is in the text already: its source is the system error's own (none, for an
// OS error), so that a chain of errors printed one by one says it once (a review).
impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// `message` without the `path: ` that [`naming`] put before it, for a line that names the path
/// itself.
pub(crate) fn unnamed<'a>(path: &Path, message: &'a str) -> &'a str {
    message
        .strip_prefix(path.display().to_string().as_str())
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(message)
}

/// Puts `bytes` in the file `path` (see `write_file`).
fn store(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let resolved = link_target(path);
    let path = resolved.as_deref().unwrap_or(path);
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {
            // Opening it for writing (without truncating) asks the system whether we may.
            let existing = std::fs::OpenOptions::new().write(true).open(path)?;
            if replaceable(&m) && write_beside(path, bytes, Some(m.permissions()))? {
                return Ok(());
            }
            existing.set_len(0)?;
            write_all_to(existing, bytes)
        }
        Ok(_) => write_all_to(File::create(path)?, bytes),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if write_beside(path, bytes, None)? {
                return Ok(());
            }
            write_all_to(File::create(path)?, bytes)
        }
        Err(e) => Err(e),
    }
}

/// Removes the temporaries that processes killed while writing a file left in the directory of
/// `path` (`write_beside`'s `.NAME.PID-N.heapdelta-tmp`), once per directory and process: a
/// service killed by the out-of-memory killer during a rewrite of its report left a copy of it
/// there at every such kill. Only regular files untouched for `LEFT_FOR` (a writer's temporary is
/// written at once, so one that old is no writer's, whatever process ids another namespace or
/// host sees), of a process not running here or of this one's id (a container's program restarted
/// as the same pid 1).
fn remove_left_temporaries(path: &Path) {
    const LEFT_FOR: std::time::Duration = std::time::Duration::from_secs(600);
    static DONE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let dir = directory_of(path);
    {
        let mut done = DONE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if done.iter().any(|d| d == dir) {
            return;
        }
        done.push(dir.to_path_buf());
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = std::process::id() as libc::pid_t;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name.to_str().and_then(temporary_of) else {
            continue;
        };
        let left = entry.metadata().is_ok_and(|m| {
            m.is_file()
                && m.modified()
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age >= LEFT_FOR)
        });
        if left && (pid == me || !running(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The process id in the name of a temporary `write_beside` makes, `.NAME.PID-N.heapdelta-tmp`.
fn temporary_of(name: &str) -> Option<libc::pid_t> {
    let (_, tail) = name
        .strip_prefix('.')?
        .strip_suffix(".heapdelta-tmp")?
        .rsplit_once('.')?;
    let (pid, n) = tail.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok().filter(|&pid| pid > 0)
}

/// Whether a process `pid` exists (also when it is another user's).
fn running(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 sends nothing; `kill` only checks that the process exists and may be
    // signalled.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// `write_file` for a file that must never be seen half written (the report `HEAPDELTA=rewrite=on`
/// rewrites while the program runs): written beside `path` and renamed over it only, never in
/// place. `Ok(false)`, having written nothing, when `path` cannot be replaced so: it is not a
/// regular file, has other names or another owner, or its directory refuses new files (all asked
/// before `write` runs), or the directory refuses the rename.
pub(crate) fn replace_file(
    path: &Path,
    write: impl FnOnce(&mut Vec<u8>) -> io::Result<()>,
) -> io::Result<bool> {
    thread::untracked(|| {
        let permissions = match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_file() && replaceable(&m) => Some(m.permissions()),
            Ok(_) => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if !may_access(directory_of(path), libc::W_OK | libc::X_OK) {
            return Ok(false);
        }
        let mut bytes = Vec::new();
        write(&mut bytes)?;
        write_beside(path, &bytes, permissions)
    })
}

/// The file a symbolic link at `path` names, to be replaced in its place (`None` when `path` is
/// not a link). A link to no file yet names the file a write through it would make. `None` too
/// (the write then goes through the link, as a plain `open` would) for:
/// - a link in `/dev` or `/proc` or leading there, wherever the directories on the way lead (a
///   review: `d/../../proc/self/fd/1`, or `fds/1` with `fds` a link to `/proc/self/fd`):
///   `/dev/stdout` → `/proc/self/fd/1` names the file a shell redirected the output to, which must
///   not be replaced by another under its name, or a pipe;
/// - a link the kernel's `protected_symlinks` would not follow for this process: in a sticky
///   directory that others may write (`/tmp`), owned neither by us nor by the directory's owner
///   (a review: another user's link `/tmp/report.json` → `~/.bashrc` had it replaced);
/// - a chain of links too long to follow, which the write then meets as the system's error.
pub(crate) fn link_target(path: &Path) -> Option<PathBuf> {
    /// Links followed at most, as Linux does (`ELOOP` past 40).
    const MAX_LINKS: usize = 40;
    let mut at = path.to_path_buf();
    for followed in 0..=MAX_LINKS {
        // Where the name really is: its directory with every link on the way resolved.
        let real_dir = std::fs::canonicalize(directory_of(&at)).ok();
        let special = |dir: &Path| dir.starts_with("/dev") || dir.starts_with("/proc");
        if real_dir.as_deref().is_some_and(special) {
            return None;
        }
        let link = std::fs::symlink_metadata(&at)
            .ok()
            .filter(|m| m.file_type().is_symlink());
        let Some(link) = link else {
            return (followed > 0).then_some(at);
        };
        if followed == MAX_LINKS || !may_follow(&link, real_dir.as_deref()?) {
            return None;
        }
        let next = real_dir?.join(std::fs::read_link(&at).ok()?);
        at = next;
    }
    None
}

/// Whether the kernel's `protected_symlinks` rule lets this process follow a link (`link`, its
/// metadata) in `dir`: always, unless `dir` is sticky and others may write it; then only a link
/// of ours or of the directory's owner.
fn may_follow(link: &std::fs::Metadata, dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(d) = std::fs::metadata(dir) else {
        return false;
    };
    let sticky_and_open = d.mode() & 0o1002 == 0o1002;
    !sticky_and_open || link.uid() == effective_uid() || link.uid() == d.uid()
}

/// The user this process acts as, for files.
fn effective_uid() -> u32 {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The directory `path` names a file in (`.` for a bare name).
pub(crate) fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Whether this process may use `path` as `mode` asks (`libc::W_OK` and so on), as `access(2)`
/// answers; `false` for a path holding a NUL, which no call can name.
pub(crate) fn may_access(path: &Path, mode: libc::c_int) -> bool {
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `path` is a NUL-terminated path; `access` only reads it.
    unsafe { libc::access(path.as_ptr(), mode) == 0 }
}

/// Whether a regular file may be replaced by a new one of the same name without anyone noticing
/// but by its contents: it has no other name, and we own it.
fn replaceable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    m.nlink() == 1 && m.uid() == effective_uid()
}

/// Writes `bytes` to a new file beside `path` and renames it over `path`: `Ok(false)`, leaving
/// nothing behind, when no such file can be made or the directory refuses the rename (write in
/// place instead); an error, leaving `path` as it was, when writing the bytes failed.
fn write_beside(
    path: &Path,
    bytes: &[u8],
    permissions: Option<std::fs::Permissions>,
) -> io::Result<bool> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let Some(name) = path.file_name() else {
        return Ok(false);
    };
    let mut temporary = std::ffi::OsString::from(".");
    temporary.push(name);
    temporary.push(format!(
        ".{}-{}.heapdelta-tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let temporary = path.with_file_name(temporary);
    // A name of our own, never an existing file (nor a link someone left there).
    let Ok(file) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
    else {
        return Ok(false);
    };
    let written = permissions
        .map_or(Ok(()), |p| file.set_permissions(p))
        .and_then(|()| write_all_to(file, bytes));
    let renamed = match written {
        Ok(()) => {
            remove_left_temporaries(path);
            std::fs::rename(&temporary, path)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&temporary);
            return Err(e);
        }
    };
    match renamed {
        Ok(()) => Ok(true),
        Err(e) => {
            let _ = std::fs::remove_file(&temporary);
            // A sticky directory lets us write the file but not replace it; a temporary that
            // another process removed meanwhile is not written either.
            match e.kind() {
                io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound => Ok(false),
                _ => Err(e),
            }
        }
    }
}

fn write_all_to(mut file: File, bytes: &[u8]) -> io::Result<()> {
    file.write_all(bytes)?;
    file.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail_after_writing_some(w: &mut Vec<u8>) -> io::Result<()> {
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
    #[cfg(target_os = "linux")]
    fn a_write_removes_the_temporaries_left_by_processes_no_longer_running() {
        let dir = tempfile::tempdir().unwrap();
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        // Above the largest process id Linux gives (2^22): never running.
        let files = [
            (".report.json.999999999-3.heapdelta-tmp", true, false),
            (".other.json.999999999-0.heapdelta-tmp", true, false),
            // Written just now: a writer's, whose process this one may not see.
            (".report.json.999999998-0.heapdelta-tmp", false, true),
            (".report.json.tmp", true, true),
        ];
        let running = format!(
            ".report.json.{}-0.heapdelta-tmp",
            std::os::unix::process::parent_id()
        );
        for (name, old, _) in files.iter().chain([&(running.as_str(), true, true)]) {
            let file = std::fs::File::create(dir.path().join(name)).unwrap();
            if *old {
                file.set_modified(hour_ago).unwrap();
            }
        }
        write_file(&dir.path().join("report.json"), |w| w.write_all(b"new")).unwrap();
        let mut kept: Vec<String> = files
            .iter()
            .filter(|(_, _, kept)| *kept)
            .map(|(name, _, _)| name.to_string())
            .chain([running, "report.json".to_string()])
            .collect();
        kept.sort();
        assert_eq!(names(dir.path()), kept);
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
    fn a_file_with_another_name_is_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let (path, other) = (
            dir.path().join("report.json"),
            dir.path().join("other.json"),
        );
        std::fs::write(&path, "earlier").unwrap();
        std::fs::hard_link(&path, &other).unwrap();
        write_file(&path, |w| w.write_all(b"new")).unwrap();
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "new");
    }

    #[test]
    fn writers_on_several_threads_each_leave_a_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let texts: Vec<String> = (0..4).map(|t| t.to_string().repeat(100_000)).collect();
        std::thread::scope(|s| {
            for text in &texts {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..20 {
                        write_file(path, |w| w.write_all(text.as_bytes())).unwrap();
                    }
                });
            }
        });
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(texts.contains(&last), "a file mixed from several writes");
        assert_eq!(names(dir.path()), ["report.json"]);
    }

    #[test]
    #[cfg(unix)]
    fn a_file_named_by_a_symbolic_link_is_replaced_whole_not_rewritten_in_place() {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        let link = dir.path().join("link.json");
        std::fs::write(&target, "earlier").unwrap();
        std::os::unix::fs::symlink("target.json", &link).unwrap();
        let mut reader = File::open(&target).unwrap();
        write_file(&link, |w| w.write_all(b"new")).unwrap();
        let mut seen = String::new();
        reader.read_to_string(&mut seen).unwrap();
        assert_eq!(seen, "earlier", "a reader of the file met it rewritten");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(names(dir.path()), ["link.json", "target.json"]);
    }

    #[test]
    #[cfg(unix)]
    fn a_symbolic_link_to_no_file_makes_the_file_it_names() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("sub/target.json", &link).unwrap();
        write_file(&link, |w| w.write_all(b"new")).unwrap();
        let made = dir.path().join("sub/target.json");
        assert_eq!(std::fs::read_to_string(made).unwrap(), "new");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    }

    #[test]
    #[cfg(unix)]
    fn links_are_followed_to_the_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("first.json");
        std::os::unix::fs::symlink("second.json", &first).unwrap();
        std::os::unix::fs::symlink("target.json", dir.path().join("second.json")).unwrap();
        assert_eq!(link_target(&first), Some(dir.path().join("target.json")));
    }

    #[test]
    #[cfg(unix)]
    fn a_link_through_the_process_descriptors_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let direct = dir.path().join("direct");
        let chained = dir.path().join("chained");
        std::os::unix::fs::symlink("/dev/stdout", &direct).unwrap();
        std::os::unix::fs::symlink(&direct, &chained).unwrap();
        assert_eq!(link_target(&direct), None);
        assert_eq!(link_target(&chained), None);
        assert_eq!(link_target(Path::new("/dev/stdout")), None);
    }

    #[test]
    #[cfg(unix)]
    fn a_link_that_climbs_into_proc_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("out");
        // More `..` than the temporary directory is deep: the root's `..` is the root.
        let climb = format!("{}proc/self/fd/1", "../".repeat(64));
        std::os::unix::fs::symlink(climb, &link).unwrap();
        assert_eq!(link_target(&link), None);
    }

    #[test]
    #[cfg(unix)]
    fn a_link_in_a_directory_that_leads_into_proc_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let fds = dir.path().join("fds");
        std::os::unix::fs::symlink("/proc/self/fd", &fds).unwrap();
        assert_eq!(link_target(&fds.join("1")), None);
    }

    #[test]
    #[cfg(unix)]
    fn another_users_link_in_a_sticky_directory_open_to_all_is_not_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("tmp");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let mine = dir.path().join("mine.json");
        std::fs::write(&mine, "mine").unwrap();
        let link = shared.join("report.json");
        std::os::unix::fs::symlink(&mine, &link).unwrap();
        // Ours: followed, as the kernel would.
        assert_eq!(link_target(&link), Some(mine.clone()));
        // Another user's (only root can give it away; others check the half above).
        if std::os::unix::fs::lchown(&link, Some(12345), None).is_err() {
            return;
        }
        assert_eq!(link_target(&link), None);
        // And in a directory that is not sticky, followed.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(link_target(&link), Some(mine));
    }

    #[test]
    #[cfg(unix)]
    fn a_loop_of_links_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::os::unix::fs::symlink(&b, &a).unwrap();
        std::os::unix::fs::symlink(&a, &b).unwrap();
        assert_eq!(link_target(&a), None);
        assert!(write_file(&a, |w| w.write_all(b"new")).is_err());
    }

    #[test]
    fn a_path_that_is_no_link_has_no_target() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file.json");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(link_target(&file), None);
        assert_eq!(link_target(&dir.path().join("missing.json")), None);
    }
}
