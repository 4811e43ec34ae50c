//! Symbolisation of interned stacks into [`Site`]s, only when a report is made.
//!
//! Each return address is resolved at `addr - 1` (inside the call instruction, not after it)
//! with `backtrace::resolve`, inlined frames expanded (innermost first). The frame list is then:
//!
//! 1. **trimmed** at the inner end: frames of the global-allocator shims (`__rust_alloc`,
//!    `__rg_alloc` …), of heapdelta, of the standard library (`alloc`, `core`, `std`, std's
//!    vendored `hashbrown`) and of dependencies from the cargo registry or git (`serde_json`,
//!    `tokio` …) are dropped until the first frame of the program's own code, which becomes
//!    `frames()[0]` (a stack without one keeps its first dependency frame instead). The dropped
//!    frames go to [`typename::derive_marked`](super::typename::derive_marked);
//! 2. trimmed at the outer end: everything outside the outermost user frame (`main` wrappers,
//!    `lang_start`, libc's start routines, thread start glue);
//! 3. **folded**: consecutive frames of the same function in the same file (recursion) become one,
//!    the innermost;
//! 4. paths **shortened**: `crate-x.y.z/src/…` for the cargo registry, `<repo>-<hash>/<rev>/…`
//!    for git dependencies, `alloc/src/…` for `/rustc/<hash>/library/…`; a project's files
//!    relative to the outermost directory above them holding a `Cargo.toml` (so that runs from
//!    different directories name a site alike), prefixed with that directory's name when it is
//!    not the program's own project; else relative to the current directory when under it.
//!
//! Results are cached per [`SiteId`]. This runs outside the allocation hot path, under the
//! caller's reentrancy guard, so it may allocate and lock; it never panics (a poisoned cache is
//! recovered, a panic in symbolisation yields a site of unknown frames).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};

use super::buffer::STACK_WORDS;
use super::intern::{self, SiteId, NO_SITE, OVERFLOW};
use super::loaded;
use super::site::{shown_name, Frame, Site, CUT_MARK};
use super::typename;

/// Resolved sites, by id.
/// What `resolve` keeps between calls.
#[derive(Default)]
pub(crate) struct Cache {
    /// Every site resolved so far.
    sites: HashMap<SiteId, Site>,
    /// What resolving them worked out, which other sites share.
    known: Known,
}

/// What resolving a stack works out that other stacks share: the stacks of a program share most
/// of their outer frames, and many sites their inner ones.
#[derive(Default)]
struct Known {
    /// Every return address symbolised so far, with the frames it expands to.
    frames: HashMap<usize, Vec<RawFrame>>,
    /// Files as sites show them, when the working directory is `cwd`.
    paths: HashMap<String, String>,
    cwd: Option<String>,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// The resolved-site cache's lock, held for a whole `resolve` (for `crate::fork`: a fork while
/// another thread resolves would leave it held in the child). What `resolve` alone uses, the
/// project-root cache among it, is free whenever this is.
pub(crate) fn lock_cache() -> MutexGuard<'static, Option<Cache>> {
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where a frame's code comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// The program being profiled: its own project, and path dependencies.
    User,
    /// A dependency from the cargo registry or a git checkout.
    Dependency,
    /// `alloc`, `core`, `std` and what std vendors.
    Std,
    /// heapdelta itself, and the global-allocator shims.
    Allocator,
    /// Program and thread start-up, libc.
    Runtime,
}

/// A resolved frame before trimming: the frame with its full file path, and its origin.
#[derive(Clone, Debug)]
struct RawFrame {
    frame: Frame,
    origin: Origin,
    /// Expanded from inline debug info (exact generic arguments), as opposed to the compiled
    /// function the address lies in (whose name may be shared with merged twins).
    inlined: bool,
    /// Where the frame's return address is in the stack (`None` for frames built by hand).
    word: Option<usize>,
    /// Where the compiled function that return address lies in begins, when the unwind tables
    /// say: one function for the frame and all those inlined into it.
    start: Option<usize>,
}

impl RawFrame {
    /// Whether `self` and `other` are calls of one function, for `fold_recursion`: same origin,
    /// name and file, in two return addresses (a function is never inlined into itself, so two
    /// frames of one return address are two functions named alike), of one compiled function
    /// where both are known. Debug information limited to line tables names functions without
    /// their path, `new` or `{closure#0}`, and two of them in one file read as one (a user trial:
    /// `Inner::new` under `build_inner` under `Outer::new` lost the two frames between). The
    /// start of an inlined frame is that of the function it was inlined into, so a mutual
    /// recursion through a function inlined both into another member and into an outside caller
    /// (`#[inline(always)]`: a review saw no other hint do it) gives two sites, its first trip and
    /// the deeper ones, where names alone gave one; two sites named right rather than one site
    /// missing frames.
    fn same_function(&self, other: &RawFrame) -> bool {
        self.origin == other.origin
            && self.frame.function == other.frame.function
            && self.frame.file == other.frame.file
            && (self.word.is_none() || self.word != other.word)
            && match (self.start, other.start) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// The symbolised, trimmed site of `id` (cached).
pub fn resolve(id: SiteId) -> Site {
    crate::fork::install();
    let mut guard = lock_cache();
    let cache = guard.get_or_insert_with(Cache::default);
    if let Some(site) = cache.sites.get(&id) {
        return site.clone();
    }
    let site = match id {
        NO_SITE => Site::new(Vec::new()),
        OVERFLOW => Site::new(vec![Frame {
            function: "(other call sites: the site table is full)".to_string(),
            file: None,
            line: None,
        }]),
        _ => resolve_stack(
            intern::stack(id),
            intern::was_cut(id),
            own_source_dir(),
            &mut cache.known,
        ),
    };
    cache.sites.insert(id, site.clone());
    site
}

/// heapdelta's own source directory, whose frames are trimmed.
fn own_source_dir() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/src/")
}

/// Whether a stack of the main thread shows the program's `main` without a file: the program was
/// built without debug information (cargo's release profile by default), so its sites are named
/// by function alone, inlined code under the function it was inlined into, and their types mostly
/// unknown. Only `main` (the last frame of the program's before the runtime's
/// `__rust_begin_short_backtrace`, which runs it) is looked at: it is in the program's own
/// executable, where a frame of no file elsewhere can be a dependency's built without debug
/// information, which a frame without a file does not tell from the program's (a review).
fn without_line_tables(raw: &[RawFrame]) -> bool {
    let Some(start) = raw
        .iter()
        .position(|f| f.frame.function.contains("__rust_begin_short_backtrace"))
    else {
        return false;
    };
    raw[..start]
        .iter()
        .rev()
        .find(|f| f.origin == Origin::User)
        .is_some_and(|main| main.frame.file.is_none())
}

/// Says once on stderr how to get file:line and types into call sites (a user trial: a stock
/// release build named every site `app::main`, types unknown, and nothing said why).
fn hint_debug_information() {
    static SAID: AtomicBool = AtomicBool::new(false);
    const HINT: &[u8] = b"\
heapdelta: this program has no debug information, so call sites are named by function alone
heapdelta:   (code inlined into a function under that function's name: a closure given to a
heapdelta:   library, as to rayon's `for_each`, under the library's function) and most allocated
heapdelta:   types are unknown. For file:line and types, add to Cargo.toml:
heapdelta:     [profile.release]
heapdelta:     debug = \"line-tables-only\"
heapdelta:   (If it has that: `strip = \"debuginfo\"` removes it, a profile only takes effect in
heapdelta:   the workspace root, and a debug file split off must be where the binary names it.)
";
    crate::config::write_stderr_once(&SAID, HINT);
}

/// Whether `stack` ran through the program's own executable without any of its return addresses
/// there naming a function: the executable has no symbol table (cargo's `strip = true`, or
/// `strip` run on it), so nothing tells the program's frames from std's or heapdelta's, and every
/// site reads `(unknown)`. Two such addresses at least (every stack has a few: heapdelta's, the
/// allocator shim's, the program's), and no frame but the C runtime's resolved at all, so a
/// program with symbols, where an address or two may lie in code without one, is not taken for
/// a stripped one.
fn without_symbols(stack: &[usize], raw: &[RawFrame]) -> bool {
    if raw.iter().any(|f| f.origin != Origin::Runtime) {
        return false;
    }
    let in_program = |ip: &&usize| {
        loaded::object_of(ip.wrapping_sub(1)).is_some_and(|(path, _)| path.is_empty())
    };
    stack.iter().filter(in_program).take(2).count() == 2
}

/// Says once on stderr why every site is `(unknown)` when the executable has no symbols (a user
/// trial built the binary it ships, with `strip = true`, and got one `(unknown)` site for every
/// allocation and no word of why).
fn hint_symbols() {
    static SAID: AtomicBool = AtomicBool::new(false);
    const HINT: &[u8] = b"\
heapdelta: this program's executable has no symbols (built with `strip = true`, or stripped
heapdelta:   afterwards), so no call site can be named: each reads `(unknown)`. Totals, size
heapdelta:   classes and steps are unaffected. To name sites, profile a build that keeps them:
heapdelta:     [profile.release]
heapdelta:     strip = false
heapdelta:     debug = \"line-tables-only\"
";
    crate::config::write_stderr_once(&SAID, HINT);
}

/// Whether the program's executable file was deleted, or replaced by another (a rebuild, a
/// deploy), since it started: its symbols are read from the file, so none can be, and it is not
/// for lack of them that no site is named (a review saw a build with debug information told it
/// had no symbols).
fn executable_gone() -> bool {
    std::fs::read_link("/proc/self/exe")
        .is_ok_and(|path| path.to_string_lossy().ends_with(" (deleted)"))
}

/// Says once on stderr why every site is `(unknown)` when the executable file is gone.
fn hint_executable_gone() {
    static SAID: AtomicBool = AtomicBool::new(false);
    const HINT: &[u8] = b"\
heapdelta: this program's executable was deleted or replaced since it started (a rebuild, a
heapdelta:   deploy), and its symbols are read from that file, so no call site can be named:
heapdelta:   each reads `(unknown)`. Totals, size classes and steps are unaffected.
";
    crate::config::write_stderr_once(&SAID, HINT);
}

/// Symbolises, trims, folds and shortens `stack` (`cut`: it filled its capture's depth);
/// frames under `own_dir` count as heapdelta's. What `known` holds is taken from it, and what this
/// stack works out added to it.
fn resolve_stack(stack: &[usize], cut: bool, own_dir: &str, known: &mut Known) -> Site {
    // A panic leaves in `known` only addresses and paths whose entries were complete.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let raw = symbolise(stack, own_dir, &mut known.frames);
        if without_line_tables(&raw) {
            hint_debug_information();
        }
        if without_symbols(stack, &raw) {
            match executable_gone() {
                true => hint_executable_gone(),
                false => hint_symbols(),
            }
        }
        let cwd = std::env::current_dir()
            .ok()
            .map(|dir| format!("{}/", dir.display()));
        if known.cwd != cwd {
            known.paths.clear();
            known.cwd = cwd;
        }
        let main = main_root();
        let known_cwd = &known.cwd;
        let paths = RefCell::new(&mut known.paths);
        let cut_at = cut.then_some(stack.len());
        build_site(raw, cut_at, &|path| {
            if let Some(short) = paths.borrow().get(path) {
                return short.clone();
            }
            let project = project_root(path);
            let short = shorten_path(
                path,
                project.as_deref(),
                main.as_deref(),
                known_cwd.as_deref(),
            );
            paths.borrow_mut().insert(path.to_string(), short.clone());
            short
        })
    }))
    .unwrap_or_else(|_| Site::unknown())
}

/// Resolves every address, inlined frames expanded, innermost first; the addresses in `known`
/// are taken from it, the others added to it.
fn symbolise(
    stack: &[usize],
    own_dir: &str,
    known: &mut HashMap<usize, Vec<RawFrame>>,
) -> Vec<RawFrame> {
    let mut raw = Vec::with_capacity(stack.len() * 2);
    for (word, &ip) in stack.iter().enumerate() {
        let frames = known
            .entry(ip)
            .or_insert_with(|| symbolise_address(ip, own_dir));
        raw.extend(frames.iter().map(|f| RawFrame {
            word: Some(word),
            ..f.clone()
        }));
    }
    raw
}

/// Where the compiled function holding return address `ip` begins, as the unwind tables give it
/// (libgcc's `_Unwind_FindEnclosingFunction`, which looks up `ip - 1` itself); `None` where no
/// table covers it, and on targets without libgcc.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn compiled_function_start(ip: usize) -> Option<usize> {
    extern "C" {
        fn _Unwind_FindEnclosingFunction(pc: *mut c_void) -> *mut c_void;
    }
    // SAFETY: libgcc (linked into every program std is, for unwinding) looks the address up in
    // the loaded objects' unwind tables, under the loader's lock, and returns null for an address
    // no table covers; it dereferences nothing at `ip` itself.
    let start = unsafe { _Unwind_FindEnclosingFunction(ip as *mut c_void) };
    (!start.is_null()).then_some(start as usize)
}

/// Without libgcc the start is not known; `fold_recursion` then compares names and files alone.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn compiled_function_start(_ip: usize) -> Option<usize> {
    None
}

/// The frames the return address `ip` lies in, inlined ones expanded, innermost first.
fn symbolise_address(ip: usize, own_dir: &str) -> Vec<RawFrame> {
    if let Some(frame) = system_library_frame(ip) {
        return vec![frame];
    }
    let mut raw = Vec::with_capacity(2);
    let start = compiled_function_start(ip);
    // The return address follows the call; `ip - 1` lies within the call instruction.
    let pc = ip.wrapping_sub(1) as *mut c_void;
    backtrace::resolve(pc, |symbol| {
        let function = symbol
            .name()
            .map(|name| format!("{name:#}"))
            .unwrap_or_else(|| format!("{ip:#x}"));
        let file = symbol.filename().map(|path| path.display().to_string());
        let line = symbol.lineno();
        let origin = origin(&function, file.as_deref(), line, own_dir);
        raw.push(RawFrame {
            frame: Frame {
                function,
                file,
                line,
            },
            origin,
            inlined: true,
            word: None,
            start,
        });
    });
    // The last symbol of an address is the compiled function itself.
    match raw.last_mut() {
        Some(outermost) => {
            outermost.inlined = false;
            program_frames_of_merged_code(&mut raw);
            std_frames_without_location(&mut raw);
        }
        None => raw.push(RawFrame {
            frame: Frame {
                function: format!("{ip:#x}"),
                file: None,
                line: None,
            },
            origin: Origin::Runtime,
            inlined: false,
            word: None,
            start,
        }),
    }
    raw
}

/// The file names the system's C runtime libraries start with (glibc's `libc.so.6`, older
/// `libc-2.31.so`, the dynamic loader, libgcc's unwinder, musl, libstdc++); see
/// `system_library_frame`.
const C_RUNTIME_LIBRARIES: &[&str] = &[
    "libc.so",
    "libc-",
    "ld-linux",
    "ld-musl",
    "libgcc_s",
    "libpthread",
    "libdl.so",
    "libdl-",
    "libm.so",
    "libm-",
    "librt",
    "libstdc++",
];

/// The frame of a return address in one of the system's C runtime libraries (libc's start
/// routines under every stack, libgcc's unwinder, libc calling back into the program), named
/// after its library and offset, `libc.so.6+0x29d90`, as the runtime's: its debug information is
/// not read. Reading it, where it is installed (Debian's `libc6-dbg`, which valgrind asks for),
/// cost 30 MB of heap for libc alone, for a frame trimmed as the runtime's anyway. Libraries are
/// told by their file name, never by their directory: a program (or a Rust library) installed
/// under `/usr/lib` keeps its frames. `None` for any other address.
fn system_library_frame(ip: usize) -> Option<RawFrame> {
    let (path, base) = loaded::object_of(ip.wrapping_sub(1))?;
    let library = path.rsplit('/').next().unwrap_or(&path);
    if !C_RUNTIME_LIBRARIES.iter().any(|l| library.starts_with(l)) {
        return None;
    }
    Some(RawFrame {
        frame: Frame {
            function: format!("{library}+{:#x}", ip.wrapping_sub(base)),
            file: None,
            line: None,
        },
        origin: Origin::Runtime,
        inlined: false,
        word: None,
        start: None,
    })
}

/// Whether `f`, a stack's outermost frame, is where a thread starts: in libc (its start routines,
/// named after the library when its debug information is not read, see
/// `system_library_frame`), or a start routine by name.
fn is_thread_start(f: &RawFrame) -> bool {
    let function = f.frame.function.as_str();
    f.origin == Origin::Runtime
        && (function.starts_with("libc.so")
            || function.starts_with("libc-")
            || RUNTIME_NAMES.contains(&function)
            || function.starts_with("__libc_start")
            || function.contains("lang_start"))
}

/// Gives back to the program the frames of merged code inside its own compiled functions that
/// heapdelta's files claim. Where the compiler merged two calls into one (two `Box::new` in one
/// function), the merged code's inlined frames have no line (or line 0) and the file of whatever
/// was inlined there, here heapdelta's: such a frame, not named as heapdelta's, in the inline chain
/// of a compiled function of the program's, is the program's, of unknown file and line; or std's,
/// when its name is (`RawVecInner::try_allocate_in`, once the allocator shim and the tracker are
/// inlined into the program's function), so that it is trimmed with std's other frames.
fn program_frames_of_merged_code(raw: &mut [RawFrame]) {
    if raw.last().is_none_or(|f| f.origin != Origin::User) {
        return;
    }
    for f in raw.iter_mut() {
        let heapdelta_named = f.frame.function.starts_with("heapdelta::")
            || f.frame.function.starts_with("<heapdelta::");
        let no_line = matches!(f.frame.line, None | Some(0));
        if f.inlined && f.origin == Origin::Allocator && no_line && !heapdelta_named {
            f.origin = if is_std_name(&f.frame.function) {
                Origin::Std
            } else {
                Origin::User
            };
            f.frame.file = None;
            f.frame.line = None;
        }
    }
}

/// Gives std the frames without a file that were inlined into std's own. Line-tables-only debug
/// information names an inlined function without its path (`try_allocate_in<alloc::alloc::Global>`)
/// and, where the compiler left its code without a line (line 0), without a file either: neither
/// tells whose it is, and such a frame was taken as the program's, naming the site after std's
/// raw-vector code (a user trial: a program's busiest site, `to_string` at two lines of its own,
/// was counted at `try_allocate_in`). Its caller, the function it was inlined into, is std's; the
/// program's code inlined there (a closure passed to an iterator) has its own file and line, so a
/// frame of it is taken as std's only when it lacks both, and the site is then named one frame
/// further out, still in the program. Only a name without a path: fuller debug information
/// names a function with its path (`app::summarize::{{closure}}`), which `origin` reads already.
/// A frame with a file but line 0 tells no more: the file is the compiled function's, the
/// program's (a cross-check against DHAT: `String::with_capacity` in a program's `churn` was
/// counted at `try_allocate_in (src/bin/steps.rs)`); but not a closure's body (`{closure#0}`),
/// which is the program's. Outermost first, so a run of such frames goes to std.
fn std_frames_without_location(raw: &mut [RawFrame]) {
    for i in (0..raw.len().saturating_sub(1)).rev() {
        let caller_is_std = raw[i + 1].origin == Origin::Std;
        let f = &mut raw[i];
        let name = &f.frame.function;
        let pathless = !name[..name.find('<').unwrap_or(name.len())].contains("::");
        // A closure's or an async body's frame in the program's file is the program's, line 0 or
        // not: std has no bodies of its own to inline with the program's file (a review).
        let bare_body_of_the_programs = f.frame.file.is_some() && name.starts_with('{');
        if caller_is_std
            && f.inlined
            && matches!(f.frame.line, None | Some(0))
            && f.origin == Origin::User
            && pathless
            && !bare_body_of_the_programs
        {
            f.origin = Origin::Std;
        }
    }
}

/// The site of a stack whose every captured frame is the allocator's.
const ALLOCATOR_ONLY: &str =
    "(only allocator frames captured: raise Tracker::depth or HEAPDELTA=depth=)";

/// Allocator shims rustc generates for `#[global_allocator]` (their debug info points at the
/// user's `static`, so they are recognised by name).
const SHIM_PREFIXES: &[&str] = &["__rust_", "__rg_", "__rdl_", "__rde_", "__rg_oom"];

/// Start-up and libc functions outside the user's code.
const RUNTIME_NAMES: &[&str] = &["_start", "start_thread", "clone", "clone3", "thread_start"];

/// Prefixes of the unwinder's and the C library's internal functions (libgcc's `_Unwind_Backtrace`,
/// glibc's `__GI___dl_iterate_phdr` and `__libc_start_main`), whatever file their debug
/// information gives (`./elf/…`).
const RUNTIME_PREFIXES: &[&str] = &["_Unwind_", "__GI_", "_dl_", "__libc_"];

/// Path prefixes of std's names when there is no file (no debug information): its own crates and
/// those it vendors (a panic's backtrace is symbolised with std's copies of gimli and addr2line).
const STD_NAME_PREFIXES: &[&str] = &[
    "std::",
    "core::",
    "alloc::",
    "<std::",
    "<core::",
    "<alloc::",
    "hashbrown::",
    "<hashbrown::",
    "gimli::",
    "<gimli::",
    "addr2line::",
    "<addr2line::",
    "miniz_oxide::",
    "<miniz_oxide::",
    "rustc_demangle::",
    "<rustc_demangle::",
    "object::",
    "<object::",
    "<&",
    "<[",
    "<(",
];

fn origin(function: &str, file: Option<&str>, line: Option<u32>, own_dir: &str) -> Origin {
    // (Before the shims: `__rust_begin_short_backtrace` starts as they do.)
    if RUNTIME_NAMES.contains(&function)
        || RUNTIME_PREFIXES.iter().any(|p| function.starts_with(p))
        || function.contains("lang_start")
        || function.starts_with("__rust_begin_short_backtrace")
    {
        return Origin::Runtime;
    }
    if is_shim_name(function) {
        return Origin::Allocator;
    }
    match file {
        Some(file) if is_std_path(file) => Origin::Std,
        Some(file) if file.starts_with(own_dir) => Origin::Allocator,
        // Limited debug information can give a std function inlined into the program the
        // program's file and no line: its name says whose it is.
        Some(_) if line.unwrap_or(0) == 0 && is_std_name(function) => Origin::Std,
        Some(file) if dependency_path(file).is_some() => Origin::Dependency,
        Some(_) => Origin::User,
        None if function == "main" => Origin::Runtime,
        None if function.starts_with("heapdelta::") || function.starts_with("<heapdelta::") => {
            Origin::Allocator
        }
        None if is_std_name(function) => Origin::Std,
        None if function.starts_with("0x") => Origin::Runtime,
        None => Origin::User,
    }
}

/// For a file of a registry or git dependency, its path from the crate's directory:
/// `~/.cargo/registry/src/<index>/crate-x.y.z/src/lib.rs` → `crate-x.y.z/src/lib.rs`,
/// `~/.cargo/git/checkouts/<repo>-<hash>/<rev>/src/lib.rs` → `<repo>-<hash>/<rev>/src/lib.rs`.
/// Cargo names an index directory `<registry>-<hash>` and a checkout `<repo>-<hash>`, with 16 hex
/// digits, which a project of the user's under a directory named `registry` is unlikely to copy.
fn dependency_path(path: &str) -> Option<&str> {
    let hashed = |dir: &str| {
        dir.rsplit_once('-')
            .is_some_and(|(_, h)| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    for marker in ["/registry/src/", "/git/checkouts/"] {
        for (at, _) in path.match_indices(marker) {
            let after = &path[at + marker.len()..];
            let Some((dir, rest)) = after.split_once('/') else {
                continue;
            };
            if hashed(dir) && rest.contains('/') {
                return Some(if marker == "/git/checkouts/" {
                    after
                } else {
                    rest
                });
            }
        }
    }
    None
}

fn is_std_name(function: &str) -> bool {
    STD_NAME_PREFIXES.iter().any(|p| function.starts_with(p))
        || is_primitive_impl(function)
        || is_blanket_std_impl(function)
}

/// Whether `function` is a method of a standard-library trait implemented for a bare type
/// parameter (`<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem`): such a blanket
/// implementation can only be written in the trait's own crate. Parameters are told by their
/// name, a capital letter, as rustc's symbols print them (`T`, `A`, `I`).
fn is_blanket_std_impl(function: &str) -> bool {
    let Some((param, rest)) = function
        .strip_prefix('<')
        .and_then(|f| f.split_once(" as "))
    else {
        return false;
    };
    let mut chars = param.chars();
    let is_param =
        chars.next().is_some_and(|c| c.is_ascii_uppercase()) && chars.all(|c| c.is_ascii_digit());
    is_param && is_std_crate_path(rest)
}

/// Whether a path starts in one of the standard library's crates (`core::fmt::Display`).
fn is_std_crate_path(path: &str) -> bool {
    ["core::", "alloc::", "std::"]
        .iter()
        .any(|c| path.starts_with(c))
}

/// Whether `function` is a method of a primitive type: inherent (`<str>::to_lowercase`), which
/// only the standard library can define, or of a standard-library trait without generic
/// arguments (`<usize as core::fmt::Display>::fmt`), which the orphan rule leaves to it too (a
/// program may implement `From<Meters>` for `f64`: a trait with arguments is not told apart).
fn is_primitive_impl(function: &str) -> bool {
    const PRIMITIVES: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "bool", "char", "str",
    ];
    let Some(rest) = function.strip_prefix('<') else {
        return false;
    };
    PRIMITIVES.iter().any(|p| match rest.strip_prefix(p) {
        Some(after) if after.starts_with(">::") => true,
        Some(after) => after.strip_prefix(" as ").is_some_and(|t| {
            let trait_path = t.split(">::").next().unwrap_or(t);
            is_std_crate_path(trait_path) && !trait_path.contains('<')
        }),
        None => false,
    })
}

fn is_std_path(file: &str) -> bool {
    (file.starts_with("/rustc/") && file.contains("/library/"))
        || file.starts_with("/rust/deps/")
        || file.contains("/lib/rustlib/src/rust/library/")
}

/// How many of `raw`'s innermost frames are the allocator's: all those inward of where the request
/// entered the global allocator. That is the shim rustc generates (`__rust_alloc`, `__rg_alloc`
/// …) where a frame of it is left, else the first of `alloc`'s allocation functions
/// (`alloc::alloc::alloc`), which call the shims. Inward of it lie heapdelta's frames and those of
/// any allocator around the tracker, its helpers included (a user trial found every site named
/// after its wrapper's `alloc`, a review after the wrapper's helper); outward of it, a
/// `GlobalAlloc` method is a program's own allocator type, called by its code, and keeps its
/// frames. A wrapper that ends in a call (a tail call) leaves no frame of the shim, nor of its
/// `alloc`: then the request entered where the standard library's frames begin, if a few frames
/// at most lie between them and heapdelta's, and otherwise right after heapdelta's.
fn allocator_frames(raw: &[RawFrame]) -> usize {
    /// The most frames of a wrapper's taken as its own when nothing marks where it ends.
    const WRAPPER_FRAMES: usize = 4;
    let is_request = |f: &RawFrame| {
        f.origin == Origin::Std
            && ["alloc::alloc::", "<alloc::alloc::Global", "std::alloc::"]
                .iter()
                .any(|p| f.frame.function.starts_with(p))
    };
    let heapdelta = raw
        .iter()
        .position(|f| f.origin != Origin::Allocator)
        .unwrap_or(raw.len());
    if heapdelta == 0 {
        // Not captured inside the allocator.
        return 0;
    }
    match raw.iter().position(|f| is_shim(f) || is_request(f)) {
        Some(i) if is_shim(&raw[i]) => i + 1,
        Some(i) => i,
        None => match raw.iter().position(|f| f.origin == Origin::Std) {
            Some(i) if i <= heapdelta + WRAPPER_FRAMES => i,
            _ => heapdelta,
        },
    }
}

/// Whether `f` is one of the allocator shims rustc generates for `#[global_allocator]` (`origin`
/// gives the runtime's `__rust_begin_short_backtrace`, named alike, to the runtime).
fn is_shim(f: &RawFrame) -> bool {
    f.origin == Origin::Allocator && is_shim_name(&f.frame.function)
}

/// Whether `function` is named as an allocator shim (rustc 1.9x: `__rustc::__rust_alloc` …).
fn is_shim_name(function: &str) -> bool {
    let bare = function.strip_prefix("__rustc::").unwrap_or(function);
    SHIM_PREFIXES.iter().any(|p| bare.starts_with(p))
}

/// Whether a std frame is in the `alloc` or `core` crate: `Box::new`, `RawVec`,
/// `Global::allocate` and the like.
fn is_alloc_plumbing(f: &RawFrame) -> bool {
    match &f.frame.file {
        Some(file) => file.contains("/library/alloc/") || file.contains("/library/core/"),
        None => ["alloc::", "core::", "<alloc::", "<core::"]
            .iter()
            .any(|p| f.frame.function.starts_with(p)),
    }
}

/// The first frame of a site whose capture stopped at its depth of `frames` frames before reaching
/// any frame of the program's (see `build_site`).
fn cut_marker(frames: usize) -> Frame {
    let advice = if frames >= STACK_WORDS {
        "the most heapdelta keeps"
    } else {
        "raise Tracker::depth or HEAPDELTA=depth="
    };
    let plural = if frames == 1 { "" } else { "s" };
    Frame {
        function: format!(
            "{CUT_MARK}{frames} frame{plural}, before any of the program's: {advice})"
        ),
        file: None,
        line: None,
    }
}

/// Trims, folds and shortens resolved frames into a site with its derived type. `cut_at`: the
/// capture filled its depth, of that many frames. Such a site without a frame of the program's
/// (whose stack has not reached the thread's start, see `is_thread_start`) opens with
/// [`cut_marker`], so that it does not read like an allocation made by library code alone.
fn build_site(raw: Vec<RawFrame>, cut_at: Option<usize>, shorten: &dyn Fn(&str) -> String) -> Site {
    // The frames a request went through into the tracker are the allocator's, a program's own
    // `GlobalAlloc` around the tracker among them (a user trial found every site named after its
    // wrapper's `alloc`); the program's frames are looked for past them.
    let allocator_end = allocator_frames(&raw);
    let outside = &raw[allocator_end..];
    let cut = cut_at.filter(|_| {
        !raw.last().is_some_and(is_thread_start)
            && !outside.iter().any(|f| f.origin == Origin::User)
    });
    // The program's own code, else (an allocation made only in its dependencies' code, a
    // runtime's worker thread, say) theirs.
    let is_code = |f: &RawFrame| matches!(f.origin, Origin::User | Origin::Dependency);
    let past_allocator = |found: Option<usize>| found.map(|i| i + allocator_end);
    let first_user = past_allocator(outside.iter().position(|f| f.origin == Origin::User))
        .or_else(|| past_allocator(outside.iter().position(is_code)));
    let last_user = past_allocator(outside.iter().rposition(is_code));
    let (trimmed, kept): (Vec<RawFrame>, Vec<RawFrame>) = match (first_user, last_user) {
        // heapdelta's own frames between the program's (`measure`, which calls the code it
        // measures) are left out too: a user trial found `measure<…> (src/checkpoint.rs:337)` in
        // every stack its tests recorded.
        (Some(first), Some(last)) => {
            let trimmed = raw[..first].to_vec();
            let mut kept: Vec<RawFrame> = raw[first..=last]
                .iter()
                .filter(|f| f.origin != Origin::Allocator)
                .cloned()
                .collect();
            if let Some(outermost) = kept.last_mut() {
                name_from_outside(outermost, &raw[last + 1..], shorten);
            }
            (trimmed, kept)
        }
        // No user frame (an allocation of std's own start-up, say): keep the std frames outside
        // the allocator's, so the site still says something (inside them, std frames such as
        // `LocalKey::try_with` can be heapdelta's own machinery), from the first that is not the
        // `alloc`/`core` plumbing between a request and the allocator, which would name every
        // such site `alloc::alloc::alloc`.
        _ => {
            let outside = raw
                .iter()
                .rposition(|f| f.origin == Origin::Allocator)
                .map_or(0, |i| i + 1)
                .max(allocator_end);
            let mut kept: Vec<RawFrame> = raw
                .iter()
                .skip(outside)
                .filter(|f| f.origin == Origin::Std)
                .cloned()
                .collect();
            if let Some(named) = kept.iter().position(|f| !is_alloc_plumbing(f)) {
                kept.drain(..named);
            }
            (raw, kept)
        }
    };
    if kept.is_empty() && allocator_end > 0 && allocator_end == trimmed.len() {
        // The capture stopped inside the allocator: `Tracker::depth` below the frames between a
        // request and the program.
        return Site::new(vec![Frame {
            function: ALLOCATOR_ONLY.to_string(),
            file: None,
            line: None,
        }]);
    }
    let shorten_all = |frames: Vec<RawFrame>| -> Vec<Frame> {
        frames
            .into_iter()
            .map(|f| Frame {
                file: f.frame.file.map(|file| shorten(&file)),
                ..f.frame
            })
            .collect()
    };
    // The type is that of the innermost code's request: a dependency's frames name what the
    // dependency allocated through, and the scan stops at the first of them as it does at the
    // program's own.
    let mut trimmed = trimmed;
    if let Some(dependency) = trimmed
        .iter()
        .skip(allocator_end)
        .position(|f| f.origin == Origin::Dependency)
    {
        trimmed.truncate(allocator_end + dependency);
    }
    let inlined: Vec<bool> = trimmed.iter().map(|f| f.inlined).collect();
    let trimmed = shorten_all(trimmed);
    let type_name = typename::derive_marked(&trimmed, &inlined);
    let marker = cut.map(cut_marker);
    // Std's frames between the program's keep their names, not their generic arguments: an
    // iterator chain's `collect<core::iter::adapters::map::Map<…>>` ran to hundreds of characters
    // per frame in a flamegraph (a user trial); the program's own frames keep theirs. Only between
    // the program's (or a dependency's) frames, and after recursion is folded: a site of std's
    // frames alone keeps them whole, where two instances of one generic function, named alike
    // without their arguments, read as recursion and lost the frames between them (a review).
    let between_code = kept.first().is_some_and(is_code);
    let kept: Vec<RawFrame> = fold_recursion(kept)
        .into_iter()
        .map(|mut f| {
            if between_code && f.origin == Origin::Std {
                f.frame.function = without_generics(&f.frame.function);
            }
            f
        })
        .collect();
    let kept = marker
        .into_iter()
        .chain(shorten_all(kept).into_iter().map(|f| Frame {
            function: plain_path(&f.function),
            ..f
        }))
        .collect();
    Site::with_type(kept, type_name)
}

/// Names the program's outermost frame, when it is a closure named without its path
/// (`{closure#0}`, as line tables name it), after the function that wrote it, as the frames
/// outward of it tell and the site will not keep: a closure a thread runs is called by std's
/// thread start, whose frames carry its state (`__rust_begin_short_backtrace<app::{impl#4}::new::
/// {closure_env#0}, …>`), and was shown bare (a user trial's worker, `{closure#0}
/// (src/lib.rs:235)`; now `{closure#0} in new`). See `site::shown_name`, which tells std's
/// frames by their shortened paths (`std/src/…`): the frames are given to it so.
fn name_from_outside(
    outermost: &mut RawFrame,
    outside: &[RawFrame],
    shorten: &dyn Fn(&str) -> String,
) {
    if !outermost.frame.function.starts_with('{') {
        return;
    }
    let shortened = |f: &Frame| Frame {
        file: f.file.as_deref().map(shorten),
        ..f.clone()
    };
    let outside: Vec<Frame> = outside.iter().map(|f| shortened(&f.frame)).collect();
    let named = shown_name(&shortened(&outermost.frame), &outside).into_owned();
    if named != outermost.frame.function {
        outermost.frame.function = named;
    }
}

/// `function` without its generic arguments: every `<…>` that follows a name
/// (`from_iter<(String, u64), Map<…>>` → `from_iter`, `alloc::vec::Vec<T,A>::push` →
/// `alloc::vec::Vec::push`), while a qualified path's own brackets stay
/// (`<alloc::vec::Vec<T> as core::ops::Drop>::drop` → `<alloc::vec::Vec as core::ops::Drop>::drop`).
/// The `>` of a function type's `->` closes nothing.
fn without_generics(function: &str) -> String {
    let mut out = String::with_capacity(function.len());
    let mut depth = 0usize;
    let mut prev = ' ';
    for c in function.chars() {
        match c {
            '<' if depth > 0 || prev.is_alphanumeric() || prev == '_' || prev == '}' => {
                depth += 1;
            }
            '>' if depth > 0 && prev != '-' => depth -= 1,
            _ if depth > 0 => {}
            _ => out.push(c),
        }
        prev = c;
    }
    // Unbalanced brackets (a name cut short) are kept as they were.
    if depth > 0 {
        return function.to_string();
    }
    out
}

/// `<app::Node>::forward` (v0 demangling of an inherent method) → `app::Node::forward`; trait
/// methods (`<T as Trait>::f`) and other names are left as they are.
fn plain_path(function: &str) -> String {
    if let Some(rest) = function.strip_prefix('<') {
        if let Some(end) = rest.find(">::") {
            let ty = &rest[..end];
            if !ty.contains(" as ") && !ty.contains('<') && !ty.contains('&') {
                return format!("{ty}::{}", &rest[end + 3..]);
            }
        }
    }
    function.to_string()
}

/// Folds recursion: when a function of the site's own code (of the origin of its first frame: the
/// program's, or a `cargo install`ed program's dependency frames) appears again further out
/// ([`RawFrame::same_function`]), the frames from its inner occurrence out to the repeat are one trip around the
/// recursion and are dropped, so every depth of a recursive path (direct, or through closures and
/// iterator adapters) gives the same site. A library function met twice is not recursion of the
/// program's: the frames between two calls of it (a `par_iter` closure that runs another, a
/// runtime's task run inside its worker's) are kept. (Names carry no generic arguments, so two
/// instantiations of one library function look alike.)
fn fold_recursion(frames: Vec<RawFrame>) -> Vec<RawFrame> {
    let own = frames.first().map(|f| f.origin);
    let mut out: Vec<RawFrame> = Vec::with_capacity(frames.len());
    for f in frames {
        let earlier = if Some(f.origin) == own {
            out.iter().position(|prev| prev.same_function(&f))
        } else {
            None
        };
        match earlier {
            Some(i) => out.truncate(i + 1),
            None => out.push(f),
        }
    }
    out
}

/// A path as shown in reports (see the module docs). `project` is the file's `project_root` and
/// `main` the program's (`main_root`), both with a trailing `/`; `cwd` is the current directory.
fn shorten_path(
    path: &str,
    project: Option<&str>,
    main: Option<&str>,
    cwd: Option<&str>,
) -> String {
    if let Some(rest) = dependency_path(path) {
        return rest.to_string();
    }
    // /rustc/<hash>/library/alloc/src/vec/mod.rs → alloc/src/vec/mod.rs
    if let Some(at) = path.find("/library/") {
        if path.starts_with("/rustc/") || path.contains("/lib/rustlib/src/rust/") {
            return path[at + "/library/".len()..].to_string();
        }
    }
    // /rust/deps/hashbrown-0.16.1/src/map.rs → hashbrown-0.16.1/src/map.rs
    if let Some(rest) = path.strip_prefix("/rust/deps/") {
        return rest.to_string();
    }
    if let Some((project, rest)) = project.and_then(|p| Some((p, path.strip_prefix(p)?))) {
        // Another project's files (a path dependency outside the program's tree) are named
        // with their project's directory, so they are not taken for the program's own.
        return match main {
            Some(main) if main != project => {
                let name = std::path::Path::new(project).file_name();
                let name = name.map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                format!("{name}/{rest}")
            }
            _ => rest.to_string(),
        };
    }
    if let Some(rest) = cwd.and_then(|cwd| path.strip_prefix(cwd)) {
        return rest.to_string();
    }
    path.to_string()
}

/// The directory, with a trailing `/`, that a source file is shown relative to, so that a site is
/// named alike whatever directory the program runs in: the outermost directory above the file
/// holding a `Cargo.toml` (a workspace's root, or the package that holds the file's package as a
/// path dependency, or the file's package). `None` for a relative path or one outside any
/// package on this machine. Cached per directory, since every frame of every site asks.
fn project_root(path: &str) -> Option<String> {
    static ROOTS: Mutex<Option<HashMap<String, Option<String>>>> = Mutex::new(None);
    let dir = std::path::Path::new(path).parent()?;
    if !dir.is_absolute() {
        return None;
    }
    let key = dir.display().to_string();
    let mut roots = ROOTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let roots = roots.get_or_insert_with(HashMap::new);
    if let Some(root) = roots.get(&key) {
        return root.clone();
    }
    let root = dir
        .ancestors()
        .filter(|d| d.join("Cargo.toml").is_file())
        .last()
        .map(|root| {
            let mut root = root.display().to_string();
            if !root.ends_with('/') {
                root.push('/');
            }
            root
        });
    roots.insert(key, root.clone());
    root
}

/// The program's own project root (see `main_root_of`), found once.
fn main_root() -> Option<String> {
    static MAIN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    MAIN.get_or_init(|| {
        let exe = std::env::current_exe().ok();
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR");
        main_root_of(
            exe.as_deref().and_then(std::path::Path::to_str),
            manifest.as_deref().and_then(std::ffi::OsStr::to_str),
        )
    })
    .clone()
}

/// The program's own project root: `project_root` of its executable (`target/…` usually lies in
/// the project); else, for a target directory elsewhere (`CARGO_TARGET_DIR`), that of the package
/// `cargo run` or `cargo test` started it for (`manifest`, their `CARGO_MANIFEST_DIR`); `None`
/// for a program installed elsewhere. Without it, a user trial's path dependency was taken for the
/// program's own code, and its `build (src/lib.rs:233)` counted as one site with the program's.
///
/// The fallback holds only for an executable cargo built (a `.fingerprint` directory beside it or
/// one level up, in the profile's directory): a program installed elsewhere that a `cargo run` of
/// another project starts inherits that project's `CARGO_MANIFEST_DIR` (a review).
fn main_root_of(exe: Option<&str>, manifest: Option<&str>) -> Option<String> {
    exe.and_then(project_root).or_else(|| {
        let built_by_cargo = std::path::Path::new(exe?)
            .ancestors()
            .skip(1)
            .take(2)
            .any(|dir| dir.join(".fingerprint").is_dir());
        if !built_by_cargo {
            return None;
        }
        let manifest = std::path::Path::new(manifest?).join("Cargo.toml");
        project_root(manifest.to_str()?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heapdelta_frames_between_the_programs_are_left_out() {
        let own = "/work/heapdelta/src/checkpoint.rs";
        let site = build(
            vec![
                raw("app::parse", Some("/work/app/src/lib.rs"), 10),
                raw("{closure#0}", Some("/work/app/tests/t.rs"), 5),
                raw("heapdelta::checkpoint::measure", Some(own), 337),
                raw("t::measured", Some("/work/app/tests/t.rs"), 4),
            ],
            Some("/work/app/"),
        );
        let functions: Vec<&str> = site.frames().iter().map(|f| f.function.as_str()).collect();
        assert_eq!(functions, ["app::parse", "{closure#0}", "t::measured"]);
    }

    #[test]
    fn a_program_built_outside_its_project_takes_its_root_from_cargo() {
        // A target directory outside the project (`CARGO_TARGET_DIR`): the executable tells
        // nothing, the package cargo ran it for does.
        let project = tempfile::tempdir().unwrap();
        std::fs::write(project.path().join("Cargo.toml"), "").unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(elsewhere.path().join("debug/.fingerprint")).unwrap();
        let exe = elsewhere.path().join("debug/deps/t-0123");
        let root = format!("{}/", project.path().display());
        assert_eq!(
            main_root_of(exe.to_str(), project.path().to_str()),
            Some(root.clone())
        );
        assert_eq!(main_root_of(exe.to_str(), None), None);
        // A program installed elsewhere, started from another project's `cargo run`, inherits
        // that project's `CARGO_MANIFEST_DIR`: not its own.
        let installed = tempfile::tempdir().unwrap();
        let exe = installed.path().join("bin/tool");
        assert_eq!(main_root_of(exe.to_str(), project.path().to_str()), None);
        // An executable inside a project is that project's, whatever cargo says.
        let inside = project.path().join("target/debug/t");
        assert_eq!(main_root_of(inside.to_str(), None), Some(root));
    }

    /// `build_site` with paths shortened against `cwd` only.
    fn build(raw: Vec<RawFrame>, cwd: Option<&str>) -> Site {
        build_site(raw, None, &|path| shorten_path(path, None, None, cwd))
    }

    fn raw(function: &str, file: Option<&str>, line: u32) -> RawFrame {
        RawFrame {
            inlined: true,
            word: None,
            start: None,
            origin: origin(function, file, Some(line), "/work/heapdelta/src/"),
            frame: Frame {
                function: function.to_string(),
                file: file.map(str::to_string),
                line: Some(line),
            },
        }
    }

    /// A frame without a file or line (no debug information, or code without a line), its
    /// origin read from its name; `inlined` into the frame after it.
    fn fileless(function: &str, inlined: bool) -> RawFrame {
        RawFrame {
            inlined,
            word: None,
            start: None,
            origin: origin(function, None, None, "/work/heapdelta/src/"),
            frame: Frame {
                function: function.to_string(),
                file: None,
                line: None,
            },
        }
    }

    /// The functions of `site`'s frames, innermost first.
    fn names_of(site: &Site) -> Vec<&str> {
        site.frames().iter().map(|f| f.function.as_str()).collect()
    }

    const STD: &str = "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library";

    /// The frames of one return address (innermost first) in a program's compiled function
    /// (`outermost`), with an inlined frame `(function, line)` given heapdelta's file.
    fn merged_code(inlined: (&str, u32), outermost: &str) -> Vec<RawFrame> {
        let own = "/work/heapdelta/src/tracker.rs";
        let mut frames = vec![
            raw(inlined.0, Some(own), inlined.1),
            raw(outermost, Some("/home/u/app/src/parser.rs"), 212),
        ];
        frames[1].inlined = false;
        program_frames_of_merged_code(&mut frames);
        frames
    }

    #[test]
    fn a_frame_of_merged_code_in_the_programs_function_is_the_programs() {
        let frames = merged_code(("make_event_box", 0), "parse_line");
        assert_eq!(frames[0].origin, Origin::User);
        assert_eq!(
            (frames[0].frame.file.as_deref(), frames[0].frame.line),
            (None, None)
        );
    }

    #[test]
    fn a_frame_of_merged_code_without_a_line_is_the_programs_too() {
        let mut frames = merged_code(("make_event_box", 0), "parse_line");
        frames[0].frame.line = None;
        frames[0].origin = Origin::Allocator;
        frames[0].frame.file = Some("/work/heapdelta/src/tracker.rs".into());
        program_frames_of_merged_code(&mut frames);
        assert_eq!(frames[0].origin, Origin::User);
    }

    #[test]
    fn the_unwinder_and_libc_internals_are_the_runtime_whatever_their_file() {
        let own = "/x/";
        for (function, file, line) in [
            ("_Unwind_Backtrace", None, None),
            ("__libc_start_main", None, None),
            (
                "__GI___dl_iterate_phdr",
                Some("./elf/dl-iteratephdr.c"),
                Some(74),
            ),
            (
                "__libc_start_call_main",
                Some("../sysdeps/nptl/libc_start_call_main.h"),
                Some(58),
            ),
        ] {
            assert_eq!(
                origin(function, file, line, own),
                Origin::Runtime,
                "{function}"
            );
        }
    }

    /// Checks that each of `functions`, without a file (no debug information), has `expected`
    /// as its origin.
    fn origins_without_file(functions: &[&str], expected: Origin) {
        for f in functions {
            assert_eq!(origin(f, None, None, "/x/"), expected, "{f}");
        }
    }

    #[test]
    fn the_crates_std_vendors_are_stds_without_debug_information() {
        origins_without_file(
            &[
                "gimli::read::abbrev::Attributes::push",
                "addr2line::line::path_push",
                "<gimli::read::abbrev::Abbreviations>::insert",
            ],
            Origin::Std,
        );
    }

    #[test]
    fn a_std_trait_implemented_for_a_bare_type_parameter_is_stds() {
        origins_without_file(
            &["<T as alloc::vec::spec_from_elem::SpecFromElem>::from_elem"],
            Origin::Std,
        );
        // A type of the program's that implements a std trait stays the program's.
        origins_without_file(&["<Record as core::clone::Clone>::clone"], Origin::User);
    }

    #[test]
    fn allocations_of_a_panics_backtrace_are_named_after_the_line_that_panicked() {
        // Frames of a caught panic whose hook printed a backtrace (RUST_BACKTRACE=1; a user
        // trial: 140,000 allocations were named after gimli, addr2line and _Unwind_Backtrace).
        let std = |f: &str| raw(f, Some(&format!("{STD}/std/src/panicking.rs")), 1);
        let bare = |f: &str| fileless(f, false);
        let app = |f: &str, line| raw(f, Some("/home/u/app/src/main.rs"), line);
        let stack = |inner: Vec<RawFrame>| {
            let mut frames = inner;
            frames.extend([
                std("std::backtrace_rs::symbolize::gimli::resolve"),
                bare("_Unwind_Backtrace"),
                std("std::panicking::default_hook"),
                std("core::panicking::panic_fmt"),
                app("app::main::{{closure}}", 127),
                app("app::main", 125),
            ]);
            build(frames, Some("/home/u/app/"))
        };
        for inner in [
            vec![bare("gimli::read::abbrev::Attributes::push")],
            vec![bare("addr2line::line::path_push")],
            vec![],
        ] {
            let site = stack(inner);
            assert_eq!(site.to_string(), "app::main::{{closure}} (src/main.rs:127)");
        }
    }

    #[test]
    fn a_std_frame_of_merged_code_is_stds() {
        let frames = merged_code(
            ("alloc::raw_vec::RawVecInner<A>::try_allocate_in", 0),
            "parse_line",
        );
        assert_eq!(frames[0].origin, Origin::Std);
    }

    #[test]
    fn a_site_inlined_with_the_allocator_is_the_programs_first_frame_not_a_std_one() {
        // One return address in `app::tokenize`, into which `String::from`, std's raw-vector
        // code, the allocator shim and the tracker were inlined; the innermost std frame came out
        // with heapdelta's file and no line (a user trial: 9% of a program's allocations were
        // counted at `RawVecInner::try_allocate_in`).
        let own = "/work/heapdelta/src/tracker.rs";
        let std = |f: &str, file: &str| raw(f, Some(&format!("{STD}/alloc/src/{file}")), 1);
        let mut frames = vec![
            raw("heapdelta::tracker::Tracker<A>::place", Some(own), 212),
            raw("__rustc::__rust_alloc", Some("/home/u/app/src/main.rs"), 9),
            raw(
                "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
                Some(own),
                0,
            ),
            std(
                "alloc::raw_vec::RawVecInner<A>::with_capacity_in",
                "raw_vec/mod.rs",
            ),
            std("alloc::vec::Vec<T,A>::with_capacity_in", "vec/mod.rs"),
            std("<str as alloc::borrow::ToOwned>::to_owned", "str.rs"),
            std(
                "<alloc::string::String as core::convert::From<&str>>::from",
                "string.rs",
            ),
            raw("app::tokenize", Some("/home/u/app/src/main.rs"), 143),
        ];
        if let Some(compiled) = frames.last_mut() {
            compiled.inlined = false;
        }
        program_frames_of_merged_code(&mut frames);
        frames.push(raw("app::run_batch", Some("/home/u/app/src/main.rs"), 316));
        let site = build(frames, Some("/home/u/app/"));
        assert_eq!(site.to_string(), "app::tokenize (src/main.rs:143)");
    }

    #[test]
    fn a_frame_without_a_location_named_with_the_programs_path_stays_the_programs() {
        // Fuller debug information names the closure with its path (a review).
        let mut frames = vec![
            fileless("app::summarize::{{closure}}", true),
            raw(
                "core::iter::adapters::map::map_fold::{{closure}}",
                Some(&format!("{STD}/core/src/iter/adapters/map.rs")),
                88,
            ),
            raw("app::summarize", Some("/home/u/app/src/main.rs"), 66),
        ];
        frames[2].inlined = false;
        std_frames_without_location(&mut frames);
        assert_eq!(frames[0].origin, Origin::User);
    }

    #[test]
    fn a_site_of_std_frames_alone_keeps_its_generic_functions_apart() {
        // Two instances of `call_once`, named alike without their generic arguments, read as
        // recursion and lost `std::rt::init` between them (a review).
        let s = |f: &str, file: &str| raw(f, Some(&format!("{STD}/{file}")), 1);
        let frames = vec![
            s(
                "alloc::raw_vec::finish_grow<alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            s(
                "std::sys::thread_local::Storage<T>::initialize",
                "std/src/sys/tl.rs",
            ),
            s(
                "core::ops::function::FnOnce::call_once<A, ()>",
                "core/src/ops/function.rs",
            ),
            s("std::rt::init", "std/src/rt.rs"),
            s(
                "core::ops::function::FnOnce::call_once<B, ()>",
                "core/src/ops/function.rs",
            ),
            s("std::rt::lang_start_internal", "std/src/rt.rs"),
        ];
        let site = build(frames, Some("/home/u/app/"));
        let names = names_of(&site);
        assert!(names.contains(&"std::rt::init"), "{names:?}");
    }

    #[test]
    fn generic_arguments_are_left_out_of_std_names() {
        for (name, short) in [
            (
                "collect<core::iter::adapters::map::Map<std::collections::hash::map::Iter<alloc::string::String, u64>, app::summarize::{closure_env#0}>, alloc::vec::Vec<(alloc::string::String, u64), alloc::alloc::Global>>",
                "collect",
            ),
            ("alloc::vec::Vec<T,A>::push", "alloc::vec::Vec::push"),
            (
                "<alloc::vec::Vec<T> as core::ops::drop::Drop>::drop",
                "<alloc::vec::Vec as core::ops::drop::Drop>::drop",
            ),
            ("call_once<fn() -> u32, ()>", "call_once"),
            ("{closure#0}<u8>", "{closure#0}"),
            ("spec_extend", "spec_extend"),
            ("cut<short", "cut<short"),
        ] {
            assert_eq!(without_generics(name), short, "{name}");
        }
    }

    /// Frames for `allocator_frames`: heapdelta's, then `rest`, each a function and a file
    /// (`None`: std's alloc crate).
    fn allocation_stack(rest: &[(&str, Option<&str>)]) -> Vec<RawFrame> {
        let own = Some("/work/heapdelta/src/tracker.rs");
        let std_file = format!("{STD}/alloc/src/alloc.rs");
        let mut frames = vec![
            raw("<heapdelta::record::Recording>::on_alloc", own, 10),
            raw(
                "<heapdelta::tracker::Tracker as core::alloc::global::GlobalAlloc>::alloc",
                own,
                20,
            ),
        ];
        frames.extend(
            rest.iter()
                .map(|(f, file)| raw(f, Some(file.unwrap_or(&std_file)), 30)),
        );
        frames
    }

    const APP: Option<&str> = Some("/home/u/app/src/main.rs");

    #[test]
    fn the_allocator_runs_to_the_shim_with_a_wrapper_inside_it() {
        let frames = allocation_stack(&[
            (
                "<app::Counting as core::alloc::global::GlobalAlloc>::alloc",
                APP,
            ),
            ("__rustc::__rg_alloc", APP),
            ("alloc::alloc::alloc", None),
            ("app::load", APP),
        ]);
        assert_eq!(allocator_frames(&frames), 4);
    }

    #[test]
    fn the_allocator_runs_to_allocs_functions_when_no_shim_is_left() {
        let frames = allocation_stack(&[
            ("<app::Budget>::within_budget", APP),
            (
                "<app::Budget as core::alloc::global::GlobalAlloc>::alloc",
                APP,
            ),
            ("alloc::alloc::alloc", None),
            ("app::load", APP),
        ]);
        assert_eq!(allocator_frames(&frames), 4);
    }

    #[test]
    fn a_programs_allocator_outward_of_the_request_is_the_programs() {
        let frames = allocation_stack(&[
            ("__rustc::__rg_alloc", APP),
            ("alloc::alloc::alloc", None),
            (
                "<app::Arena as core::alloc::global::GlobalAlloc>::alloc",
                APP,
            ),
            ("app::parse", APP),
        ]);
        assert_eq!(allocator_frames(&frames), 3);
    }

    #[test]
    fn a_wrapper_that_left_no_shim_ends_where_std_begins_within_four_frames() {
        let near = allocation_stack(&[
            ("<app::Budget>::within_budget", APP),
            ("<alloc::raw_vec::RawVecInner>::finish_grow", None),
            ("app::load", APP),
        ]);
        assert_eq!(allocator_frames(&near), 3);
        // Five frames of the program's before std's: a program calling the allocator itself, not
        // a wrapper; heapdelta's frames alone are the allocator's.
        let mut far = allocation_stack(&[("app::a", APP); 5]);
        let raw_vec = format!("{STD}/alloc/src/raw_vec/mod.rs");
        far.push(raw(
            "<alloc::raw_vec::RawVecInner>::finish_grow",
            Some(&raw_vec),
            1,
        ));
        assert_eq!(far[7].origin, Origin::Std);
        assert_eq!(allocator_frames(&far), 2);
    }

    #[test]
    fn a_stack_not_captured_inside_the_allocator_has_no_allocator_frames() {
        let frames = vec![
            raw("app::load", APP, 1),
            raw(
                "alloc::alloc::alloc",
                Some(&format!("{STD}/alloc/src/alloc.rs")),
                2,
            ),
        ];
        assert_eq!(allocator_frames(&frames), 0);
    }

    #[test]
    fn std_frames_between_the_programs_lose_their_generic_arguments_and_the_programs_keep_theirs() {
        let app = |f: &str, line| raw(f, Some("/home/u/app/src/main.rs"), line);
        let frames = vec![
            app("app::summarize::{{closure}}", 67),
            raw(
                "from_iter<(alloc::string::String, u64), core::iter::adapters::map::Map<I, F>>",
                Some(&format!("{STD}/alloc/src/vec/spec_from_iter.rs")),
                33,
            ),
            app("app::summarize<app::Key>", 66),
        ];
        let site = build(frames, Some("/home/u/app/"));
        let names = names_of(&site);
        assert_eq!(
            names,
            [
                "app::summarize::{{closure}}",
                "from_iter",
                "app::summarize<app::Key>"
            ]
        );
    }

    /// One return address in the program's `gen_text` (innermost first): `u64::to_string`,
    /// inlined with std's raw-vector code, whose innermost frame has neither a file nor a path in
    /// its name (line-tables-only debug information, code without a line).
    fn to_string_inlined_without_a_location() -> Vec<RawFrame> {
        let std = |f: &str, file: &str| raw(f, Some(&format!("{STD}/alloc/src/{file}")), 1);
        let mut frames = vec![
            fileless("try_allocate_in<alloc::alloc::Global>", true),
            std("with_capacity_in<alloc::alloc::Global>", "raw_vec/mod.rs"),
            std("to_owned", "str.rs"),
            std("to_string<u64>", "string.rs"),
            raw("gen_text", Some("/home/u/app/src/main.rs"), 45),
        ];
        if let Some(compiled) = frames.last_mut() {
            compiled.inlined = false;
        }
        frames
    }

    #[test]
    fn a_frame_without_a_location_inlined_into_std_is_stds() {
        let mut frames = to_string_inlined_without_a_location();
        assert_eq!(frames[0].origin, Origin::User);
        std_frames_without_location(&mut frames);
        assert_eq!(frames[0].origin, Origin::Std);
        frames.push(raw("process", Some("/home/u/app/src/main.rs"), 80));
        let site = build(frames, Some("/home/u/app/"));
        assert_eq!(site.to_string(), "gen_text (src/main.rs:45)");
    }

    #[test]
    fn a_frame_with_the_programs_file_at_line_0_inlined_into_std_is_stds() {
        let mut frames = to_string_inlined_without_a_location();
        frames[0] = raw(
            "try_allocate_in<alloc::alloc::Global>",
            Some("/home/u/app/src/main.rs"),
            0,
        );
        assert_eq!(frames[0].origin, Origin::User);
        std_frames_without_location(&mut frames);
        assert_eq!(frames[0].origin, Origin::Std);
        let site = build(frames, Some("/home/u/app/"));
        assert_eq!(site.to_string(), "gen_text (src/main.rs:45)");
    }

    #[test]
    fn a_closure_of_the_programs_inlined_into_std_stays_the_programs_at_any_line() {
        // A closure of the program's inlined into std's iterator code, in merged code at line 0
        // too.
        for line in [44, 0] {
            let mut frames = to_string_inlined_without_a_location();
            frames[0] = raw("{closure#0}", Some("/home/u/app/src/main.rs"), line);
            std_frames_without_location(&mut frames);
            assert_eq!(frames[0].origin, Origin::User, "line {line}");
        }
    }

    #[test]
    fn a_closure_a_thread_runs_is_named_after_the_function_its_state_names() {
        let std = |f: &str, file: &str, line| raw(f, Some(&format!("{STD}/std/src/{file}")), line);
        let frames = vec![
            raw("{closure#0}", Some("/home/u/app/src/lib.rs"), 235),
            std(
                "__rust_begin_short_backtrace<app::{impl#4}::new::{closure_env#0}, ()>",
                "sys/backtrace.rs",
                152,
            ),
            std(
                "{closure#0}<app::{impl#4}::new::{closure_env#0}, ()>",
                "thread/mod.rs",
                559,
            ),
            raw("start_thread", None, 0),
        ];
        let site = build(frames.clone(), Some("/home/u/app/"));
        assert_eq!(site.to_string(), "{closure#0} in new (src/lib.rs:235)");
        // Through a frame of std's that does not carry the state (a review).
        let mut through = frames;
        through.insert(1, std("call_once<()>", "ops/function.rs", 250));
        let site = build(through, Some("/home/u/app/"));
        assert_eq!(site.to_string(), "{closure#0} in new (src/lib.rs:235)");
    }

    #[test]
    fn a_frame_without_a_location_inlined_into_the_programs_stays_the_programs() {
        // The compiled function itself and its callees inlined into it: no file anywhere (a
        // program built without debug information) is the program's, as before.
        let mut frames = vec![
            fileless("app::parse::{{closure}}", true),
            fileless("app::parse", false),
        ];
        std_frames_without_location(&mut frames);
        assert_eq!(frames[0].origin, Origin::User);
        assert_eq!(frames[1].origin, Origin::User);
    }

    #[test]
    fn heapdelta_frames_with_a_line_or_its_name_stay_heapdeltas() {
        for inlined in [("place", 40), ("heapdelta::tracker::place", 0)] {
            let frames = merged_code(inlined, "parse_line");
            assert_eq!(frames[0].origin, Origin::Allocator, "{inlined:?}");
        }
    }

    #[test]
    fn a_frame_in_libc_is_the_runtimes_named_after_the_library() {
        // A return address just inside `getpid`.
        let ip = libc::getpid as *const () as usize + 1;
        let frame = system_library_frame(ip).expect("libc is a system library here");
        assert_eq!(frame.origin, Origin::Runtime);
        assert!(frame.frame.function.starts_with("libc"), "{frame:?}");
        assert!(frame.frame.function.contains("+0x"), "{frame:?}");
        assert!(is_thread_start(&frame));
        assert_eq!((frame.frame.file, frame.frame.line), (None, None));
    }

    #[test]
    fn a_frame_in_the_program_is_not_a_system_librarys() {
        let ip = a_frame_in_the_program_is_not_a_system_librarys as *const () as usize + 1;
        assert!(system_library_frame(ip).is_none());
    }

    #[test]
    fn a_stack_of_allocator_frames_alone_says_to_raise_the_depth() {
        let ours = |f: &str| raw(f, Some("/work/heapdelta/src/tracker.rs"), 1);
        let site = build(
            vec![
                ours("heapdelta::tracker::Tracker::on_alloc_exact"),
                ours("<heapdelta::tracker::Tracker as core::alloc::global::GlobalAlloc>::alloc"),
                raw("__rustc::__rust_alloc", Some("src/main.rs"), 3),
            ],
            None,
        );
        assert_eq!(site.to_string(), ALLOCATOR_ONLY);
        assert!(site.to_string().contains("raise Tracker::depth"));
    }

    #[test]
    fn a_site_without_user_frames_keeps_only_the_std_frames_outside_the_allocator() {
        let std = |f: &str| raw(f, Some(&format!("{STD}/std/src/lib.rs")), 1);
        let alloc = |f: &str| raw(f, Some(&format!("{STD}/alloc/src/alloc.rs")), 1);
        let ours = |f: &str| raw(f, Some("/work/heapdelta/src/thread.rs"), 1);
        let site = build(
            vec![
                std("<core::option::Option<_>>::map"),
                std("<std::thread::local::LocalKey<heapdelta::thread::State>>::try_with"),
                ours("heapdelta::thread::record_slow"),
                alloc("alloc::alloc::alloc"),
                std("std::thread_info::set_current_info"),
                std("std::rt::init"),
            ],
            None,
        );
        let names = names_of(&site);
        assert_eq!(
            names,
            ["std::thread_info::set_current_info", "std::rt::init"]
        );
    }

    /// A rayon worker's stack as a capture of `depth` frames cut it: the allocator's frames, std's,
    /// then rayon's, and `outermost` as the last frame.
    fn library_stack(outermost: RawFrame) -> Vec<RawFrame> {
        let std = |f: &str| raw(f, Some(&format!("{STD}/alloc/src/vec/mod.rs")), 1);
        let rayon = |f: &str| {
            let file = "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-core-1.12.1/src/registry.rs";
            raw(f, Some(file), 7)
        };
        vec![
            raw("__rustc::__rust_alloc", Some("src/main.rs"), 3),
            std("alloc::vec::Vec<T>::push"),
            rayon("rayon_core::registry::Registry::new"),
            outermost,
        ]
    }

    fn rayon_frame(f: &str) -> RawFrame {
        let file = "/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-core-1.12.1/src/lib.rs";
        raw(f, Some(file), 9)
    }

    #[test]
    fn a_cut_stack_without_a_frame_of_the_programs_says_it_was_cut() {
        let raw = library_stack(rayon_frame("rayon_core::ThreadPoolBuilder::build"));
        let site = build_site(raw, Some(32), &|path| shorten_path(path, None, None, None));
        assert_eq!(
            site.to_string(),
            "(stack cut at 32 frames, before any of the program's: raise Tracker::depth or HEAPDELTA=depth=)"
        );
        let names: Vec<&str> = site.frames()[1..]
            .iter()
            .map(|f| f.function.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "rayon_core::registry::Registry::new",
                "rayon_core::ThreadPoolBuilder::build"
            ]
        );
        assert!(site.frames()[0].is_cut_mark());
    }

    #[test]
    fn a_stack_cut_at_the_most_frames_kept_does_not_say_to_raise_the_depth() {
        let raw = library_stack(rayon_frame("rayon_core::ThreadPoolBuilder::build"));
        let site = build_site(raw, Some(STACK_WORDS), &|path| {
            shorten_path(path, None, None, None)
        });
        assert_eq!(
            site.to_string(),
            "(stack cut at 64 frames, before any of the program's: the most heapdelta keeps)"
        );
    }

    #[test]
    fn a_cut_stack_with_a_frame_of_the_programs_is_named_after_it() {
        let raw = library_stack(raw(
            "app::spawn_workers",
            Some("/home/u/app/src/main.rs"),
            21,
        ));
        let site = build_site(raw, Some(32), &|path| shorten_path(path, None, None, None));
        assert_eq!(site.frames()[0].function, "app::spawn_workers");
    }

    #[test]
    fn a_full_stack_that_reaches_the_threads_start_is_not_said_cut() {
        for start in [
            "start_thread",
            "__libc_start_call_main",
            "libc.so.6+0x29d90",
        ] {
            let mut outermost = raw(start, None, 0);
            outermost.origin = Origin::Runtime;
            let raw = library_stack(outermost);
            let site = build_site(raw, Some(32), &|path| shorten_path(path, None, None, None));
            assert_eq!(
                site.frames()[0].function,
                "rayon_core::registry::Registry::new",
                "{start}"
            );
        }
    }

    #[test]
    fn a_stack_cut_in_the_unwinders_library_is_said_cut() {
        // The runtime's, but not where a thread starts: libgcc's `_Unwind_Backtrace` under a
        // `Backtrace::force_capture`, cut there by the depth.
        let mut outermost = raw("libgcc_s.so.1+0x1a2b3", None, 0);
        outermost.origin = Origin::Runtime;
        let site = build_site(library_stack(outermost), Some(8), &|path| {
            shorten_path(path, None, None, None)
        });
        assert!(
            site.to_string().starts_with("(stack cut at 8 frames"),
            "{site}"
        );
    }

    #[test]
    fn a_site_of_alloc_frames_only_keeps_them() {
        let alloc = |f: &str| raw(f, Some(&format!("{STD}/alloc/src/alloc.rs")), 1);
        let site = build(vec![alloc("alloc::alloc::alloc")], None);
        assert_eq!(
            site.to_string(),
            "alloc::alloc::alloc (alloc/src/alloc.rs:1)"
        );
    }

    fn realistic_vec_push() -> Vec<RawFrame> {
        vec![
            raw(
                "alloc<std::alloc::System>",
                Some("/work/heapdelta/src/tracker.rs"),
                40,
            ),
            raw("__rust_alloc", Some("/home/u/app/src/main.rs"), 3),
            raw(
                "alloc::alloc::alloc",
                Some(&format!("{STD}/alloc/src/alloc.rs")),
                95,
            ),
            raw(
                "<alloc::raw_vec::RawVecInner>::finish_grow",
                Some(&format!("{STD}/alloc/src/raw_vec/mod.rs")),
                558,
            ),
            raw(
                "<alloc::raw_vec::RawVec<u8>>::grow_one",
                Some(&format!("{STD}/alloc/src/raw_vec/mod.rs")),
                188,
            ),
            raw(
                "push<u8, alloc::alloc::Global>",
                Some(&format!("{STD}/alloc/src/vec/mod.rs")),
                992,
            ),
            raw("model::compose", Some("/home/u/app/src/model.rs"), 88),
            raw("main", Some("/home/u/app/src/main.rs"), 12),
            raw(
                "call_once<fn(), ()>",
                Some(&format!("{STD}/core/src/ops/function.rs")),
                250,
            ),
            raw(
                "__rust_begin_short_backtrace<fn(), ()>",
                Some(&format!("{STD}/std/src/sys/backtrace.rs")),
                166,
            ),
            raw(
                "std::rt::lang_start_internal",
                Some(&format!("{STD}/std/src/rt.rs")),
                171,
            ),
            raw("main", None, 0),
            raw(
                "__libc_start_call_main",
                Some("./csu/../sysdeps/nptl/libc_start_call_main.h"),
                58,
            ),
            raw("_start", None, 0),
        ]
    }

    #[test]
    fn first_frame_is_the_users_after_trimming() {
        let site = build(realistic_vec_push(), Some("/home/u/app/"));
        assert_eq!(site.frames()[0].function, "model::compose");
        assert_eq!(site.to_string(), "model::compose (src/model.rs:88)");
    }

    const SERDE_JSON: &str =
        "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_json-1.0.154/src";

    /// A `String` made by serde_json's deserializer, called from the program's `parse`.
    fn string_made_in_a_dependency(with_user_frame: bool) -> Vec<RawFrame> {
        let mut frames = vec![
            raw(
                "<alloc::raw_vec::RawVecInner>::try_allocate_in",
                Some(&format!("{STD}/alloc/src/raw_vec/mod.rs")),
                476,
            ),
            raw(
                "<alloc::string::String as core::convert::From<&str>>::from",
                Some(&format!("{STD}/alloc/src/string.rs")),
                2826,
            ),
            raw(
                "<serde_json::de::Deserializer<_>>::parse_str",
                Some(&format!("{SERDE_JSON}/de.rs")),
                1570,
            ),
            raw(
                "serde_json::de::from_str<app::Record>",
                Some(&format!("{SERDE_JSON}/de.rs")),
                2699,
            ),
        ];
        if with_user_frame {
            frames.push(raw("app::parse", Some("/home/u/app/src/main.rs"), 38));
        }
        frames.push(raw(
            "std::rt::lang_start_internal",
            Some(&format!("{STD}/std/src/rt.rs")),
            175,
        ));
        frames
    }

    #[test]
    fn frames_of_registry_dependencies_are_trimmed_up_to_the_programs_own() {
        let site = build(string_made_in_a_dependency(true), Some("/home/u/app/"));
        assert_eq!(site.to_string(), "app::parse (src/main.rs:38)");
        assert_eq!(site.type_name(), "String");
    }

    #[test]
    fn a_stack_in_dependencies_only_keeps_their_frames() {
        let site = build(string_made_in_a_dependency(false), Some("/home/u/app/"));
        assert_eq!(
            site.to_string(),
            "<serde_json::de::Deserializer<_>>::parse_str (serde_json-1.0.154/src/de.rs:1570)"
        );
        assert_eq!(site.frames().len(), 2);
    }

    #[test]
    fn path_and_workspace_dependencies_are_the_programs_own_code() {
        let file = Some("/home/u/mylib/src/lib.rs");
        assert_eq!(origin("mylib::make", file, Some(3), "/x/"), Origin::User);
        let file = Some("/home/u/registry/src/my-app/src/main.rs");
        assert_eq!(origin("my_app::main", file, Some(3), "/x/"), Origin::User);
        let file = Some(
            "/home/u/registry/src/app/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde-1.0.200/src/de.rs",
        );
        assert_eq!(
            origin("serde::de::f", file, Some(3), "/x/"),
            Origin::Dependency
        );
        let file =
            Some("/root/.cargo/git/checkouts/tokio-1a2b3c4d5e6f7a8b/abc123/tokio/src/lib.rs");
        assert_eq!(
            origin("tokio::spawn", file, Some(3), "/x/"),
            Origin::Dependency
        );
    }

    #[test]
    fn start_up_frames_are_trimmed_from_the_outer_end() {
        let site = build(realistic_vec_push(), Some("/home/u/app/"));
        let names = names_of(&site);
        assert_eq!(names, ["model::compose", "main"]);
    }

    #[test]
    fn type_is_derived_from_the_trimmed_frames() {
        let site = build(realistic_vec_push(), Some("/home/u/app/"));
        assert_eq!(site.type_name(), "Vec<u8>");
    }

    #[test]
    fn recursion_is_folded_into_one_frame() {
        let mut frames = realistic_vec_push();
        let deep = raw("walk", Some("/home/u/app/src/tree.rs"), 10);
        for _ in 0..5 {
            frames.insert(6, deep.clone());
        }
        let site = build(frames, Some("/home/u/app/"));
        let names = names_of(&site);
        assert_eq!(names, ["walk", "model::compose", "main"]);
    }

    #[test]
    fn allocator_shims_with_the_rustc_prefix_are_trimmed() {
        let mut frames = realistic_vec_push();
        frames[1] = raw("__rustc::__rust_alloc", Some("/home/u/app/src/main.rs"), 3);
        let site = build(frames, Some("/home/u/app/"));
        assert_eq!(site.frames()[0].function, "model::compose");
        assert_eq!(site.type_name(), "Vec<u8>");
    }

    #[test]
    fn inherent_methods_are_shown_as_plain_paths() {
        assert_eq!(plain_path("<app::Node>::forward"), "app::Node::forward");
        assert_eq!(
            plain_path("<app::Node as app::Layer>::forward"),
            "<app::Node as app::Layer>::forward"
        );
        assert_eq!(
            plain_path("<alloc::vec::Vec<u8>>::push"),
            "<alloc::vec::Vec<u8>>::push"
        );
        assert_eq!(plain_path("app::main"), "app::main");
    }

    /// `raw` frames of the program's file `src/main.rs` from the return address at `word`, in the
    /// compiled function starting at `start`.
    fn compiled(function: &str, line: u32, word: usize, start: usize) -> RawFrame {
        RawFrame {
            word: Some(word),
            start: Some(start),
            ..raw(function, Some("/home/u/app/src/main.rs"), line)
        }
    }

    /// The frames under a program's `main` on the main thread.
    fn under_main() -> [RawFrame; 3] {
        [
            fileless("std::sys::backtrace::__rust_begin_short_backtrace", false),
            fileless("std::rt::lang_start_internal", false),
            fileless("main", false),
        ]
    }

    #[test]
    fn a_main_without_a_file_is_a_program_without_line_tables() {
        let mut stack = vec![fileless("app::load", false), fileless("app::main", false)];
        stack.extend(under_main());
        assert!(without_line_tables(&stack));
    }

    #[test]
    fn a_main_with_a_file_is_a_program_with_line_tables_whatever_its_dependencies() {
        let mut stack = vec![
            fileless("dep::parse", false),
            raw("app::main", Some("/home/u/app/src/main.rs"), 3),
        ];
        stack.extend(under_main());
        assert!(!without_line_tables(&stack));
    }

    #[test]
    fn a_stack_off_the_main_thread_says_nothing_of_line_tables() {
        let stack = [
            fileless("dep::worker", false),
            fileless("start_thread", false),
        ];
        assert!(!without_line_tables(&stack));
    }

    #[test]
    fn functions_named_alike_in_two_compiled_functions_are_not_folded() {
        // `Inner::new` (line 11) under `build_inner` under `Outer::new` (line 20), as
        // line-tables-only debug information names them.
        let frames = vec![
            compiled("new", 11, 0, 0x1000),
            compiled("build_inner", 28, 1, 0x2000),
            compiled("new", 20, 2, 0x3000),
            compiled("main", 35, 3, 0x4000),
        ];
        let site = build(frames, Some("/home/u/app/"));
        assert_eq!(names_of(&site), ["new", "build_inner", "new", "main"]);
    }

    #[test]
    fn functions_named_alike_inlined_at_one_return_address_are_not_folded() {
        let frames = vec![
            compiled("new", 11, 0, 0x4000),
            compiled("build_inner", 28, 0, 0x4000),
            compiled("new", 20, 0, 0x4000),
            compiled("main", 35, 0, 0x4000),
        ];
        let site = build(frames, Some("/home/u/app/"));
        assert_eq!(names_of(&site), ["new", "build_inner", "new", "main"]);
    }

    #[test]
    fn recursion_of_one_compiled_function_is_folded() {
        let frames = vec![
            compiled("walk", 10, 0, 0x1000),
            compiled("walk", 12, 1, 0x1000),
            compiled("walk", 12, 2, 0x1000),
            compiled("main", 35, 3, 0x4000),
        ];
        let site = build(frames, Some("/home/u/app/"));
        assert_eq!(names_of(&site), ["walk", "main"]);
        assert_eq!(site.frames()[0].line, Some(10));
    }

    #[test]
    fn recursion_through_closures_and_iterators_is_folded_into_one_frame() {
        let mut frames = realistic_vec_push();
        // innermost first: the closure and the iterator adapter, then the recursive call
        let level = [
            raw(
                "Node::forward::{{closure}}",
                Some("/home/u/app/src/model.rs"),
                41,
            ),
            raw(
                "fold<f32>",
                Some(&format!("{STD}/core/src/iter/adapters/map.rs")),
                128,
            ),
            raw("Node::forward", Some("/home/u/app/src/model.rs"), 41),
        ];
        for _ in 0..3 {
            for (k, f) in level.iter().enumerate() {
                frames.insert(6 + k, f.clone());
            }
        }
        frames.insert(
            6,
            raw("Node::forward", Some("/home/u/app/src/model.rs"), 40),
        );
        let site = build(frames, Some("/home/u/app/"));
        let names = names_of(&site);
        assert_eq!(names, ["Node::forward", "model::compose", "main"]);
        assert_eq!(site.frames()[0].line, Some(40));
    }

    #[test]
    fn program_frames_between_two_calls_of_one_library_function_are_kept() {
        // A `par_iter` closure that runs another: rayon's `bridge` is on the stack twice, with
        // the outer closure between (an audit saw tokio's task layers folded away likewise).
        let bridge = raw(
            "rayon::iter::plumbing::bridge",
            Some("/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rayon-1.12.0/src/iter/plumbing/mod.rs"),
            380,
        );
        let app = |f: &str, line| raw(f, Some("/home/u/app/src/main.rs"), line);
        let frames = vec![
            app("app::main::{{closure}}::{{closure}}", 20),
            bridge.clone(),
            app("app::main::{{closure}}", 18),
            bridge,
            app("app::main", 17),
        ];
        let site = build(frames, Some("/home/u/app/"));
        let names = names_of(&site);
        assert_eq!(
            names,
            [
                "app::main::{{closure}}::{{closure}}",
                "rayon::iter::plumbing::bridge",
                "app::main::{{closure}}",
                "rayon::iter::plumbing::bridge",
                "app::main"
            ]
        );
    }

    #[test]
    fn frames_of_std_between_user_frames_are_kept() {
        let mut frames = realistic_vec_push();
        frames.insert(
            7,
            raw(
                "for_each<i32>",
                Some(&format!("{STD}/core/src/iter/traits/iterator.rs")),
                800,
            ),
        );
        let site = build(frames, Some("/home/u/app/"));
        assert_eq!(site.frames().len(), 3);
    }

    #[test]
    fn paths_under_the_current_directory_become_relative() {
        assert_eq!(
            shorten_path("/home/u/app/src/model.rs", None, None, Some("/home/u/app/")),
            "src/model.rs"
        );
    }

    #[test]
    fn paths_in_the_programs_project_are_relative_to_it_wherever_it_runs() {
        let app = Some("/home/u/app/");
        assert_eq!(
            shorten_path("/home/u/app/src/model.rs", app, app, Some("/tmp/")),
            "src/model.rs"
        );
        assert_eq!(
            shorten_path("/home/u/app/src/model.rs", app, app, Some("/home/")),
            "src/model.rs"
        );
    }

    #[test]
    fn another_projects_files_are_named_with_its_directory() {
        assert_eq!(
            shorten_path(
                "/home/u/other/src/lib.rs",
                Some("/home/u/other/"),
                Some("/home/u/app/"),
                None
            ),
            "other/src/lib.rs"
        );
    }

    #[test]
    fn a_project_in_a_directory_named_registry_is_not_a_registry_crate() {
        let root = Some("/home/u/registry/");
        assert_eq!(
            shorten_path("/home/u/registry/src/handlers/mod.rs", root, root, None),
            "src/handlers/mod.rs"
        );
    }

    #[test]
    fn registry_paths_start_at_the_crate() {
        assert_eq!(
            shorten_path(
                "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_json-1.0.154/src/de.rs",
                Some("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/serde_json-1.0.154/"),
                Some("/home/u/app/"),
                Some("/home/u/app/")
            ),
            "serde_json-1.0.154/src/de.rs"
        );
    }

    #[test]
    fn git_dependencies_start_at_their_checkout() {
        assert_eq!(
            shorten_path(
                "/root/.cargo/git/checkouts/tool-1a2b3c4d5e6f7a8b/5e6f7a8/src/lib.rs",
                Some("/root/.cargo/git/checkouts/tool-1a2b3c4d5e6f7a8b/5e6f7a8/"),
                Some("/home/u/app/"),
                None
            ),
            "tool-1a2b3c4d5e6f7a8b/5e6f7a8/src/lib.rs"
        );
    }

    #[test]
    fn std_paths_start_at_the_library_crate() {
        assert_eq!(
            shorten_path(&format!("{STD}/alloc/src/vec/mod.rs"), None, None, None),
            "alloc/src/vec/mod.rs"
        );
        assert_eq!(
            shorten_path("/rust/deps/hashbrown-0.16.1/src/map.rs", None, None, None),
            "hashbrown-0.16.1/src/map.rs"
        );
    }

    #[test]
    fn other_paths_are_left_alone() {
        assert_eq!(
            shorten_path("/opt/x/src/a.rs", None, None, Some("/home/u/app/")),
            "/opt/x/src/a.rs"
        );
    }

    /// A fresh directory with no `Cargo.toml` above it, or `None` (the test then has nothing to
    /// check: the machine's temporary directory lies inside a cargo package).
    fn bare_temp_dir() -> Option<tempfile::TempDir> {
        let dir = tempfile::tempdir().unwrap();
        let inside_a_package = dir
            .path()
            .ancestors()
            .any(|d| d.join("Cargo.toml").is_file());
        if inside_a_package {
            eprintln!("skipped: the temporary directory is inside a cargo package");
            return None;
        }
        Some(dir)
    }

    #[test]
    fn a_package_is_the_root_of_its_files() {
        let Some(dir) = bare_temp_dir() else { return };
        let app = dir.path().join("app");
        std::fs::create_dir_all(app.join("src/bin")).unwrap();
        std::fs::write(app.join("Cargo.toml"), "[package]\nname = \"app\"\n").unwrap();
        let file = app.join("src/bin/leak.rs").display().to_string();
        let root = project_root(&file).unwrap();
        assert_eq!(root, format!("{}/", app.display()));
        assert_eq!(
            shorten_path(&file, Some(&root), Some(&root), None),
            "src/bin/leak.rs"
        );
    }

    #[test]
    fn a_package_inside_another_is_shown_from_the_outer_one() {
        // A workspace member, or a path dependency kept inside the program's tree.
        let Some(dir) = bare_temp_dir() else { return };
        let app = dir.path().join("app");
        let util = app.join("util");
        std::fs::create_dir_all(util.join("src")).unwrap();
        std::fs::write(app.join("Cargo.toml"), "[package]\nname = \"app\"\n").unwrap();
        std::fs::write(util.join("Cargo.toml"), "[package]\nname = \"util\"\n").unwrap();
        let file = util.join("src/lib.rs").display().to_string();
        let root = project_root(&file).unwrap();
        assert_eq!(
            shorten_path(&file, Some(&root), Some(&root), None),
            "util/src/lib.rs"
        );
    }

    #[test]
    fn a_file_outside_any_package_has_no_project_root() {
        let Some(dir) = bare_temp_dir() else { return };
        let file = dir.path().join("loose.rs").display().to_string();
        assert_eq!(project_root(&file), None);
        assert_eq!(project_root("src/relative.rs"), None);
    }

    #[test]
    fn the_short_backtrace_marker_is_runtime_not_an_allocator_shim() {
        let file = format!("{STD}/std/src/sys/backtrace.rs");
        let marker = "__rust_begin_short_backtrace<app::main::{closure_env#2}, ()>";
        assert_eq!(
            origin(marker, Some(&file), Some(166), "/x/"),
            Origin::Runtime
        );
    }

    #[test]
    fn allocator_shims_are_recognised_by_name() {
        assert_eq!(
            origin(
                "__rg_alloc",
                Some("/home/u/app/src/main.rs"),
                Some(3),
                "/x/"
            ),
            Origin::Allocator
        );
        assert_eq!(
            origin("__rust_realloc", None, None, "/x/"),
            Origin::Allocator
        );
        assert_eq!(
            origin(
                "__rustc::__rust_alloc",
                Some("/home/u/app/src/main.rs"),
                Some(3),
                "/x/"
            ),
            Origin::Allocator
        );
    }

    #[test]
    fn a_std_function_given_the_programs_file_without_a_line_is_std() {
        let vec_buffer = "alloc::raw_vec::RawVecInner<A>::try_allocate_in";
        let file = Some("/home/u/app/src/bin/workers.rs");
        assert_eq!(origin(vec_buffer, file, None, "/x/"), Origin::Std);
        assert_eq!(origin(vec_buffer, file, Some(0), "/x/"), Origin::Std);
        assert_eq!(origin("workers::make_job", file, None, "/x/"), Origin::User);
    }

    #[test]
    fn methods_of_primitive_types_are_std_without_debug_info() {
        origins_without_file(
            &[
                "<usize as core::fmt::Display>::fmt",
                "<str>::to_lowercase",
                "<u8 as alloc::borrow::ToOwned>::to_owned",
            ],
            Origin::Std,
        );
        origins_without_file(
            &[
                "<usize as app::Weigh>::weigh",
                "<f64 as core::convert::From<app::Meters>>::from",
                "<u8x4 as core::fmt::Display>::fmt",
                "<strand::Rope>::push",
            ],
            Origin::User,
        );
    }

    #[test]
    fn a_site_without_user_frames_keeps_the_std_frames() {
        let frames = vec![
            raw("__rust_alloc", None, 0),
            raw("std::rt::init", Some(&format!("{STD}/std/src/rt.rs")), 1),
            raw("_start", None, 0),
        ];
        let site = build(frames, None);
        assert_eq!(site.to_string(), "std::rt::init (std/src/rt.rs:1)");
    }

    #[test]
    fn no_site_resolves_to_an_empty_site() {
        assert_eq!(resolve(NO_SITE).to_string(), "(unknown)");
    }

    #[test]
    fn overflow_resolves_to_an_explanation() {
        assert!(resolve(OVERFLOW).to_string().contains("table is full"));
    }

    #[inline(never)]
    fn allocation_site_for_test(out: &mut [usize]) -> usize {
        // A code of its own: identical functions elsewhere in the tests (`capture.rs` has one)
        // could be merged with this one, and then be named in its place.
        std::hint::black_box("symbols.rs");
        let n = super::super::capture::capture(out, 0);
        std::hint::black_box(n)
    }

    #[test]
    fn a_captured_stack_resolves_to_the_capturing_function() {
        let mut stack = [0usize; 32];
        let n = allocation_site_for_test(&mut stack);
        // Frames of this file count as the user's here (a directory that matches nothing).
        let site = resolve_stack(&stack[..n], false, "/nonexistent/", &mut Known::default());
        let first = &site.frames()[0];
        assert!(
            first.function.contains("allocation_site_for_test"),
            "{site:?}"
        );
        assert_eq!(first.file.as_deref(), Some("src/callsite/symbols.rs"));
    }

    #[test]
    fn the_same_id_resolves_once_and_is_cached() {
        let mut stack = [0usize; 32];
        let n = allocation_site_for_test(&mut stack);
        let id = intern::intern(&stack[..n]);
        let a = resolve(id);
        let b = resolve(id);
        assert_eq!(a, b);
        assert!(CACHE
            .lock()
            .unwrap()
            .as_ref()
            .unwrap()
            .sites
            .contains_key(&id));
    }

    #[test]
    fn odd_addresses_do_not_panic() {
        let site = resolve_stack(
            &[0, 1, usize::MAX],
            false,
            "/nonexistent/",
            &mut Known::default(),
        );
        assert_eq!(site.type_name(), "(unknown)");
    }
}
