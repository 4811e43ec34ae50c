//! The allocated type, derived from the standard-library frames an allocation went through.
//!
//! Input: the frames trimmed from the inner end of a site (innermost first), with file paths
//! already shortened by `symbols` (`alloc/src/vec/mod.rs`, `std/src/collections/hash/map.rs`,
//! `hashbrown-0.16.1/src/raw/mod.rs` for std's vendored hashbrown). With line-table debug
//! information, inlined std frames are named like `from_elem<f32>` or
//! `insert<alloc::string::String, u32, std::hash::random::RandomState, alloc::alloc::Global>`
//! (short name, generic arguments); non-inlined ones like `<alloc::raw_vec::RawVec<u8>>::grow_one`
//! (std is built with v0 mangling, which keeps generic arguments).
//!
//! The scan goes outward from the allocation. The innermost frame that names a type gives a
//! candidate (`RawVec<u8>` → a `Vec<u8>` buffer); an outer frame replaces it when it is the
//! known owner of exactly that allocation (`String` owns a `Vec<u8>` buffer, `HashMap` owns a
//! hashbrown table, `Arc<T>` is a `Box<ArcInner<T>>` …), or when it is a method that allocates
//! only its collection's storage (`push`, `push_back`, `reserve`, …), whose element type then
//! wins over the frames inside it (compiled functions may be merged twins; see `derive_marked`).
//! Any other typed frame further out is a *container of* the allocated value, not the allocation
//! (`Vec<String>::clone` cloning one `String`), and ends the scan. When nothing determines the
//! type: `None`. Where only a merged compiled function names it, the type can be a twin of the
//! same layout.

use std::borrow::Cow;

use super::site::Frame;

/// What a standard-library module allocates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    RawVec,
    Vec,
    String,
    Boxed,
    Arc,
    Rc,
    BTree,
    VecDeque,
    BinaryHeap,
    LinkedList,
    HashTable,
    HashMap,
    HashSet,
    /// A type without parameters that owns a byte buffer (`CString`, `OsString`, `PathBuf`).
    Named(&'static str),
}

/// `(shortened file prefix, path in the function's name, kind)`; the name form is used when a
/// frame has no file.
const MODULES: &[(&str, &str, Kind)] = &[
    ("alloc/src/raw_vec", "alloc::raw_vec::", Kind::RawVec),
    ("alloc/src/vec/", "alloc::vec::", Kind::Vec),
    ("alloc/src/slice.rs", "alloc::slice::", Kind::Vec),
    ("alloc/src/string.rs", "alloc::string::", Kind::String),
    ("alloc/src/fmt.rs", "alloc::fmt::", Kind::String),
    ("alloc/src/str.rs", "alloc::str::", Kind::String),
    ("alloc/src/boxed", "alloc::boxed::", Kind::Boxed),
    ("alloc/src/sync.rs", "alloc::sync::", Kind::Arc),
    ("alloc/src/rc.rs", "alloc::rc::", Kind::Rc),
    (
        "alloc/src/collections/btree/",
        "alloc::collections::btree::",
        Kind::BTree,
    ),
    (
        "alloc/src/collections/vec_deque/",
        "alloc::collections::vec_deque::",
        Kind::VecDeque,
    ),
    (
        "alloc/src/collections/binary_heap/",
        "alloc::collections::binary_heap::",
        Kind::BinaryHeap,
    ),
    (
        "alloc/src/collections/linked_list.rs",
        "alloc::collections::linked_list::",
        Kind::LinkedList,
    ),
    ("hashbrown-", "hashbrown::", Kind::HashTable),
    (
        "std/src/collections/hash/map.rs",
        "std::collections::hash::map::",
        Kind::HashMap,
    ),
    (
        "std/src/collections/hash/set.rs",
        "std::collections::hash::set::",
        Kind::HashSet,
    ),
    (
        "alloc/src/ffi/c_str.rs",
        "alloc::ffi::c_str::",
        Kind::Named("CString"),
    ),
    (
        "std/src/ffi/os_str.rs",
        "std::ffi::os_str::",
        Kind::Named("OsString"),
    ),
    ("std/src/path.rs", "std::path::", Kind::Named("PathBuf")),
];

/// The allocation as known so far.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Candidate {
    /// A `RawVec<T>` / `Vec<T>` buffer.
    Buffer(String),
    String,
    Boxed(String),
    /// A hashbrown table, owner not yet seen.
    Table,
    /// A finished answer.
    Done(String),
}

/// The allocated type for the trimmed frames (innermost first), or `None` when they do not
/// determine it, knowing which frames were inlined (`inlined[i]` for `trimmed[i]`; missing entries
/// count as inlined). The generic arguments of a frame that was *not* inlined come from the
/// symbol of a compiled function, and LLVM merges functions whose code is identical: a
/// `RawVec<String>::grow_one` may carry the name `RawVec<Vec<u8>>::grow_one`, since both only
/// depend on the element's layout. So a buffer type read from such a frame gives way to an inlined
/// frame further out that names another element type; and a compiled frame without debug
/// information (no file), which no inlined frame can correct, names no type at all.
///
/// Merging reaches compiled frames with debug information too (their name is that of the twin
/// the debug information describes), and a debug build calls the standard library's own compiled
/// copies of common instantiations, merged when it was built. So a frame of a method that
/// allocates nothing but its collection's own storage (`push`, `push_back`, `reserve`, … see
/// `owns_only_its_storage`) names the allocation whatever the frames inside it said: the
/// outermost such frame gives the element type, unless it was compiled and the type came from an
/// inlined frame.
pub(crate) fn derive_marked(trimmed: &[Frame], inlined: &[bool]) -> Option<String> {
    let mut candidate: Option<Candidate> = None;
    let mut candidate_inlined = true;
    // The collection whose storage method gave the candidate, which an outer storage method of
    // the same collection may correct.
    let mut owner: Option<Kind> = None;
    for (i, frame) in trimmed.iter().enumerate() {
        let Some(kind) = classify(frame) else {
            continue;
        };
        let this_inlined = inlined.get(i).copied().unwrap_or(true);
        let method = method_name(&frame.function);
        // A closure carries the generic arguments of the function it is written in, which for
        // `Arc`/`Rc` (`allocate_for_slice<T>`'s) do not say what is allocated.
        if matches!(kind, Kind::Arc | Kind::Rc) && method.starts_with('{') {
            continue;
        }
        let mut args = generic_args(&frame.function);
        // Names from limited debug information and legacy mangling can carry the declaration's
        // parameters (`RawVec<T, A>::with_capacity_in`): those name no type. Nor does a compiled
        // function without debug information: it may be any of its merged twins.
        if args.iter().any(|arg| is_parameter(arg)) || (!this_inlined && frame.file.is_none()) {
            args.clear();
        }
        if let (Kind::Arc | Kind::Rc, Some(t)) = (kind, args.first_mut()) {
            // `Arc::<[T]>::allocate_for_slice::<T>` and its kin allocate a slice of `T`.
            if (method.contains("slice") || method == "from_iter_exact") && !t.starts_with('[') {
                *t = format!("[{t}]");
            }
        }
        if let (Some(t), true) = (args.first(), owns_only_its_storage(kind, method)) {
            let correctable = this_inlined || !candidate_inlined || candidate.is_none();
            if let (Some(next), true) = (as_storage_of(kind, t, &candidate, owner), correctable) {
                candidate = Some(next);
                candidate_inlined = this_inlined;
                owner = Some(kind);
                continue;
            }
        }
        if let (Some(Candidate::Buffer(_)), Kind::RawVec | Kind::Vec, Some(t)) =
            (&candidate, kind, args.first())
        {
            if this_inlined && !candidate_inlined {
                // An inlined frame either confirms the element type or, unconfirmed so far,
                // corrects it.
                candidate = Some(Candidate::Buffer(t.clone()));
                candidate_inlined = true;
                continue;
            }
        }
        let was_empty = candidate.is_none();
        match step(candidate.clone(), kind, &args) {
            Step::Continue(next) => candidate = next,
            Step::Stop => break,
        }
        if was_empty && candidate.is_some() {
            candidate_inlined = this_inlined;
        }
        if let (Some(Candidate::Done(_)), None) = (&candidate, owner) {
            break;
        }
    }
    match candidate? {
        Candidate::Buffer(t) => Some(format!("Vec<{}>", pretty(&t))),
        Candidate::String => Some("String".to_string()),
        Candidate::Boxed(t) => Some(format!("Box<{}>", pretty(&t))),
        Candidate::Table => None,
        Candidate::Done(t) => Some(t),
    }
}

/// Whether `method` of a `kind` frame allocates nothing but the collection's own storage: it takes
/// elements by value or no elements, and runs no code of the program's that could allocate (no
/// closure, no `Clone`; `BinaryHeap::push` compares elements, which a program's frame inside it
/// would show), so an allocation made inside it is that storage.
fn owns_only_its_storage(kind: Kind, method: &str) -> bool {
    const GROWING: &[&str] = &[
        "reserve",
        "reserve_exact",
        "try_reserve",
        "try_reserve_exact",
        "with_capacity",
        "with_capacity_in",
        "shrink_to",
        "shrink_to_fit",
        "append",
        "insert",
        "insert_mut",
    ];
    match kind {
        Kind::RawVec => {
            matches!(method, "grow_one" | "grow_amortized" | "grow_exact")
                || GROWING.contains(&method)
        }
        Kind::Vec => {
            matches!(method, "push" | "push_mut" | "push_within_capacity")
                || GROWING.contains(&method)
        }
        Kind::VecDeque => {
            matches!(
                method,
                "push_back" | "push_front" | "push_back_mut" | "push_front_mut" | "grow"
            ) || GROWING.contains(&method)
        }
        Kind::BinaryHeap => method == "push" || GROWING.contains(&method),
        _ => false,
    }
}

/// The candidate when an `owns_only_its_storage` frame of `kind` with element type `t` meets
/// `candidate` (which `owner`'s storage method gave, if any): that storage, or `None` when the
/// candidate is not something such a frame allocates (leave it to `step`).
fn as_storage_of(
    kind: Kind,
    t: &str,
    candidate: &Option<Candidate>,
    owner: Option<Kind>,
) -> Option<Candidate> {
    let name = match kind {
        Kind::RawVec | Kind::Vec => {
            return matches!(candidate, None | Some(Candidate::Buffer(_)))
                .then(|| Candidate::Buffer(t.to_string()));
        }
        Kind::VecDeque => "VecDeque",
        Kind::BinaryHeap => "BinaryHeap",
        _ => return None,
    };
    let fits = match candidate {
        None | Some(Candidate::Buffer(_)) => true,
        Some(Candidate::Done(_)) => owner == Some(kind),
        Some(_) => false,
    };
    fits.then(|| Candidate::Done(format!("{name}<{}>", pretty(t))))
}

/// The last segment of a function's path, without generic arguments: `push_back<usize, Global>`
/// → `push_back`, `<alloc::collections::vec_deque::VecDeque<u8>>::grow` → `grow`.
fn method_name(function: &str) -> &str {
    let end = match function.strip_suffix('>') {
        Some(_) => trailing_args(function).map_or(function.len(), |a| function.len() - a.len() - 2),
        None => function.len(),
    };
    let path = function.get(..end).unwrap_or(function);
    path.rsplit("::").next().unwrap_or(path)
}

enum Step {
    /// Keep scanning with this candidate.
    Continue(Option<Candidate>),
    /// The frame belongs to a container of the allocated value: the candidate is the answer.
    Stop,
}

fn step(candidate: Option<Candidate>, kind: Kind, args: &[String]) -> Step {
    use Candidate as C;
    let first = args.first().cloned();
    match kind {
        Kind::RawVec | Kind::Vec => match (candidate, first) {
            (cand, None) => Step::Continue(cand),
            (None, Some(t)) => Step::Continue(Some(C::Buffer(t))),
            (Some(C::Buffer(u)), Some(t)) if u == t => Step::Continue(Some(C::Buffer(u))),
            _ => Step::Stop,
        },
        Kind::String => match candidate {
            None | Some(C::String) => Step::Continue(Some(C::String)),
            Some(C::Buffer(u)) if u == "u8" => Step::Continue(Some(C::String)),
            _ => Step::Stop,
        },
        Kind::Boxed => match (candidate, first) {
            (cand, None) => Step::Continue(cand),
            (None, Some(t)) => Step::Continue(Some(C::Boxed(t))),
            (Some(C::Boxed(u)), Some(t)) if u == t => Step::Continue(Some(C::Boxed(u))),
            _ => Step::Stop,
        },
        Kind::Arc | Kind::Rc => {
            let (name, inner) = if kind == Kind::Arc {
                ("Arc", "ArcInner")
            } else {
                ("Rc", "RcInner")
            };
            let param = match &candidate {
                None => None,
                Some(C::Boxed(boxed)) => match unwrap_type(boxed, inner) {
                    Some(t) => Some(t),
                    None => return Step::Stop,
                },
                Some(_) => return Step::Stop,
            };
            let param = param.or(first).map(|t| pretty(&t));
            let param = param.as_deref().unwrap_or("_");
            Step::Continue(Some(C::Done(format!("{name}<{param}>"))))
        }
        Kind::BTree => {
            let node_params = match &candidate {
                None => None,
                Some(C::Boxed(boxed)) => {
                    match unwrap_type(boxed, "LeafNode")
                        .or_else(|| unwrap_type(boxed, "InternalNode"))
                    {
                        Some(params) => Some(split_args(&params)),
                        None => return Step::Stop,
                    }
                }
                Some(_) => return Step::Stop,
            };
            let params = if args.len() >= 2 {
                Some(args.to_vec())
            } else {
                node_params.filter(|p| p.len() >= 2)
            };
            let answer = match params {
                Some(p) if p[1].ends_with("SetValZST") => format!("BTreeSet<{}>", pretty(&p[0])),
                Some(p) => format!("BTreeMap<{}, {}>", pretty(&p[0]), pretty(&p[1])),
                None => return Step::Continue(candidate),
            };
            Step::Continue(Some(C::Done(answer)))
        }
        Kind::VecDeque | Kind::BinaryHeap => {
            let name = if kind == Kind::VecDeque {
                "VecDeque"
            } else {
                "BinaryHeap"
            };
            match (candidate, first) {
                (None, Some(t)) => Step::Continue(Some(C::Done(format!("{name}<{}>", pretty(&t))))),
                (Some(C::Buffer(u)), t) if t.as_ref().is_none_or(|t| *t == u) => {
                    Step::Continue(Some(C::Done(format!("{name}<{}>", pretty(&u)))))
                }
                (cand @ None, None) => Step::Continue(cand),
                _ => Step::Stop,
            }
        }
        Kind::LinkedList => match (candidate, first) {
            (None, Some(t)) => Step::Continue(Some(C::Done(format!("LinkedList<{}>", pretty(&t))))),
            (Some(C::Boxed(boxed)), _) => match unwrap_type(&boxed, "Node") {
                Some(t) => Step::Continue(Some(C::Done(format!("LinkedList<{}>", pretty(&t))))),
                None => Step::Stop,
            },
            (cand @ None, None) => Step::Continue(cand),
            _ => Step::Stop,
        },
        Kind::HashTable => match candidate {
            None | Some(C::Table) => Step::Continue(Some(C::Table)),
            _ => Step::Stop,
        },
        Kind::HashMap | Kind::HashSet => match candidate {
            None | Some(C::Table) => {
                let answer = if kind == Kind::HashMap {
                    match args {
                        [k, v, ..] => format!("HashMap<{}, {}>", pretty(k), pretty(v)),
                        _ => "HashMap<_, _>".to_string(),
                    }
                } else {
                    match args {
                        [t, ..] => format!("HashSet<{}>", pretty(t)),
                        _ => "HashSet<_>".to_string(),
                    }
                };
                Step::Continue(Some(C::Done(answer)))
            }
            _ => Step::Stop,
        },
        Kind::Named(name) => match candidate {
            None | Some(C::String) => Step::Continue(Some(C::Done(name.to_string()))),
            Some(C::Buffer(u)) if u == "u8" => Step::Continue(Some(C::Done(name.to_string()))),
            _ => Step::Stop,
        },
    }
}

/// The standard-library module of a frame, by file or, without one, by the path in its name.
fn classify(frame: &Frame) -> Option<Kind> {
    match &frame.file {
        Some(file) => MODULES
            .iter()
            .find(|(prefix, _, _)| file.starts_with(prefix))
            .map(|&(_, _, kind)| kind),
        None => {
            let path = strip_generics(&frame.function);
            let path = path.trim_start_matches('<');
            MODULES
                .iter()
                .find(|(_, name, _)| path.starts_with(name))
                .map(|&(_, _, kind)| kind)
        }
    }
}

/// The generic arguments a frame's name carries, without allocator arguments: `push<u8,
/// alloc::alloc::Global>` → `["u8"]`; `<alloc::raw_vec::RawVec<u8>>::grow_one` → `["u8"]`
/// (those of the `impl`'s type); `<Global as Allocator>::allocate` → `[]`.
fn generic_args(function: &str) -> Vec<String> {
    let inner = if let Some(rest) = function.strip_prefix('<') {
        // `<Type>::method` or `<Type as Trait>::method`: the type's arguments.
        match matching_close(rest) {
            Some(end) => {
                let qualified = &rest[..end];
                let ty = split_top_level(qualified, " as ")
                    .into_iter()
                    .next()
                    .unwrap_or(qualified);
                trailing_args(ty)
            }
            None => None,
        }
    } else {
        trailing_args(function)
    };
    inner
        .map(split_args)
        .unwrap_or_default()
        .into_iter()
        .filter(|arg| !is_allocator(arg))
        .collect()
}

/// Whether a generic argument is a parameter's name (`T`, `K`) rather than a type: a bare name
/// that is not a primitive type (the types of a crate are named with their path) nor a number (a
/// const argument).
fn is_parameter(arg: &str) -> bool {
    const PRIMITIVES: &[&str] = &[
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "bool", "char", "str",
    ];
    !arg.is_empty()
        && arg.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !arg.chars().all(|c| c.is_ascii_digit())
        && !PRIMITIVES.contains(&arg)
}

fn is_allocator(arg: &str) -> bool {
    arg == "alloc::alloc::Global" || arg == "Global"
}

/// The text between the `<` … `>` that ends `path`, if it ends with one.
fn trailing_args(path: &str) -> Option<&str> {
    let path = path.trim_end();
    if !path.ends_with('>') {
        return None;
    }
    // Walk back to the matching '<'.
    let bytes = path.as_bytes();
    let mut depth = 0i32;
    for i in (0..bytes.len()).rev() {
        match bytes[i] {
            b'>' if i == 0 || bytes[i - 1] != b'-' => depth += 1,
            b'<' => {
                depth -= 1;
                if depth == 0 {
                    return path.get(i + 1..path.len() - 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// The index in `s` of the `>` closing a `<` that precedes `s`.
fn matching_close(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut depth = 1i32;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' if i == 0 || bytes[i - 1] != b'-' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Splits `s` at top-level occurrences of `sep` (outside any brackets).
fn split_top_level<'a>(s: &'a str, sep: &str) -> Vec<&'a str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut prev = ' ';
    let mut skip_until = 0;
    for (i, c) in s.char_indices() {
        if i < skip_until {
            prev = c;
            continue;
        }
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' if prev != '-' => depth -= 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        prev = c;
        if depth == 0 && s[i..].starts_with(sep) {
            parts.push(&s[start..i]);
            start = i + sep.len();
            skip_until = start;
        }
    }
    parts.push(s.get(start..).unwrap_or(""));
    parts
}

fn split_args(args: &str) -> Vec<String> {
    split_top_level(args, ",")
        .into_iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect()
}

/// `name` without any `<…>` groups.
fn strip_generics(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth = 0i32;
    let mut prev = ' ';
    for (i, c) in name.char_indices() {
        match c {
            '<' if i > 0 => depth += 1,
            '>' if prev != '-' && depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
        prev = c;
    }
    out
}

/// `T` when `ty` is `…::wrapper<T>` (any path), else `None`.
fn unwrap_type(ty: &str, wrapper: &str) -> Option<String> {
    let args = trailing_args(ty)?;
    let head = &ty[..ty.len() - args.len() - 2];
    let last = head.rsplit("::").next().unwrap_or(head);
    (last == wrapper).then(|| args.to_string())
}

/// A type as shown to users: paths shortened to their last segment
/// (`alloc::string::String` → `String`) and allocator arguments dropped
/// (`Vec<u8, alloc::alloc::Global>` → `Vec<u8>`). A closure's or an async function's state keeps
/// the function it belongs to (`app::handle::{async_fn_env#0}` → `handle::{async_fn_env#0}`:
/// a user trial's task cells all read `{async_fn_env#0}`).
pub(crate) fn pretty(ty: &str) -> String {
    let ty = without_impl_blocks(ty);
    let mut out = String::with_capacity(ty.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        let last = match token.strip_suffix("::") {
            Some(owner) => {
                &token[owner
                    .rsplit("::")
                    .next()
                    .map_or(0, |l| owner.len() - l.len())..]
            }
            None => token.rsplit("::").next().unwrap_or(token),
        };
        out.push_str(last);
        token.clear();
    };
    for c in ty.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            token.push(c);
        } else {
            flush(&mut token, &mut out);
            out.push(c);
        }
    }
    flush(&mut token, &mut out);
    out.replace(", Global>", ">")
}

/// `ty` without the impl blocks in its paths (`app::{impl#4}::new::{closure_env#0}` is
/// `app::new::{closure_env#0}`), which name no type: a path through one was cut at its `}`, and
/// `pretty` showed the rest without its `::` (`app::{impl#4}new::{closure_env#0}`, a user trial).
fn without_impl_blocks(ty: &str) -> Cow<'_, str> {
    const OPEN: &str = "{impl#";
    if !ty.contains(OPEN) {
        return Cow::Borrowed(ty);
    }
    let mut out = String::with_capacity(ty.len());
    let mut rest = ty;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        match after[digits..].strip_prefix("}::") {
            Some(tail) if digits > 0 => {
                out.push_str(&rest[..at]);
                rest = tail;
            }
            _ => {
                out.push_str(&rest[..at + OPEN.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `derive_marked` with every frame counted as inlined.
    fn derive(trimmed: &[Frame]) -> Option<String> {
        derive_marked(trimmed, &[])
    }

    #[test]
    fn the_state_of_a_closure_or_async_function_keeps_its_functions_name() {
        assert_eq!(
            pretty("alloc::boxed::Box<tokio::runtime::task::core::Cell<app::handle::{async_fn_env#0}, alloc::sync::Arc<tokio::runtime::scheduler::multi_thread::handle::Handle>>>"),
            "Box<Cell<handle::{async_fn_env#0}, Arc<Handle>>>"
        );
        assert_eq!(pretty("app::main::{closure#1}"), "main::{closure#1}");
    }

    #[test]
    fn a_state_written_in_an_impl_block_is_named_after_its_function() {
        assert_eq!(
            pretty("alloc::boxed::Box<std::thread::Builder::spawn_unchecked::{closure_env#1}<app::{impl#4}::new::{closure_env#0}, ()>>"),
            "Box<spawn_unchecked::{closure_env#1}<new::{closure_env#0}, ()>>"
        );
    }

    #[test]
    fn an_inlined_frame_overrides_the_element_type_of_a_merged_function() {
        let frames = [
            Frame {
                function: "<alloc::raw_vec::RawVec<alloc::vec::Vec<u8>>>::grow_one".into(),
                file: Some("alloc/src/raw_vec/mod.rs".into()),
                line: Some(340),
            },
            Frame {
                function: "push<alloc::string::String, alloc::alloc::Global>".into(),
                file: Some("alloc/src/vec/mod.rs".into()),
                line: Some(2400),
            },
        ];
        assert_eq!(
            derive_marked(&frames, &[false, true]).as_deref(),
            Some("Vec<String>")
        );
    }

    fn frame(function: &str, file: &str) -> Frame {
        Frame {
            function: function.into(),
            file: Some(file.into()),
            line: Some(1),
        }
    }

    #[test]
    fn an_inlined_push_back_names_the_deque_that_merged_functions_did_not() {
        // A release build: the compiled `grow_one` and `grow` are twins merged with those of
        // another element type of the same size.
        let frames = [
            frame(
                "<alloc::raw_vec::RawVec<&app::Arg>>::grow_one",
                "alloc/src/raw_vec/mod.rs",
            ),
            frame(
                "<alloc::collections::vec_deque::VecDeque<&app::Arg>>::grow",
                "alloc/src/collections/vec_deque/mod.rs",
            ),
            frame(
                "push_back_mut<usize, alloc::alloc::Global>",
                "alloc/src/collections/vec_deque/mod.rs",
            ),
            frame(
                "push_back<usize, alloc::alloc::Global>",
                "alloc/src/collections/vec_deque/mod.rs",
            ),
        ];
        assert_eq!(
            derive_marked(&frames, &[false, false, true, true]).as_deref(),
            Some("VecDeque<usize>")
        );
    }

    #[test]
    fn a_compiled_push_names_its_buffer_over_a_merged_grow_one() {
        // A debug build: nothing is inlined, and `grow_one` is the standard library's compiled
        // copy, merged with that of another element type of the same layout.
        let frames = [
            frame(
                "<alloc::raw_vec::RawVec<alloc::vec::Vec<u8>>>::grow_one",
                "alloc/src/raw_vec/mod.rs",
            ),
            frame(
                "<alloc::vec::Vec<alloc::string::String>>::push",
                "alloc/src/vec/mod.rs",
            ),
        ];
        assert_eq!(
            derive_marked(&frames, &[false, false]).as_deref(),
            Some("Vec<String>")
        );
    }

    #[test]
    fn a_compiled_storage_method_does_not_override_an_inlined_one() {
        let frames = [
            frame(
                "push<alloc::string::String, alloc::alloc::Global>",
                "alloc/src/vec/mod.rs",
            ),
            frame("<alloc::vec::Vec<u64>>::reserve", "alloc/src/vec/mod.rs"),
        ];
        assert_eq!(
            derive_marked(&frames, &[true, false]).as_deref(),
            Some("Vec<String>")
        );
    }

    #[test]
    fn an_arc_made_from_a_slice_is_an_arc_of_the_slice() {
        // `Arc<str>::from(&str)`, line-table names: the closure carries `allocate_for_slice`'s
        // argument, the element type.
        let sync = "alloc/src/sync.rs";
        let frames = [
            frame("{closure#0}<u8>", sync),
            frame(
                "allocate_for_layout<[u8], alloc::sync::{impl#28}::allocate_for_slice::{closure_env#0}<u8>>",
                sync,
            ),
            frame("allocate_for_slice<u8>", sync),
            frame("copy_from_slice<u8>", sync),
        ];
        assert_eq!(derive(&frames).as_deref(), Some("Arc<[u8]>"));
        assert_eq!(derive(&frames[2..]).as_deref(), Some("Arc<[u8]>"));
    }

    #[test]
    fn a_method_is_named_without_its_path_and_arguments() {
        assert_eq!(
            method_name("push_back<usize, alloc::alloc::Global>"),
            "push_back"
        );
        assert_eq!(
            method_name("<alloc::collections::vec_deque::VecDeque<u8>>::grow"),
            "grow"
        );
        assert_eq!(method_name("alloc::vec::Vec<T,A>::push"), "push");
        assert_eq!(method_name("{closure#0}<u8>"), "{closure#0}");
    }

    #[test]
    fn a_compiled_function_without_debug_information_names_no_type() {
        // A build without debug info: `Vec<Vec<u8>>::push` went through a `grow_one` that LLVM
        // merged with `RawVec<OsString>`'s, whose name the symbol table gives.
        let frames = [Frame {
            function: "<alloc::raw_vec::RawVec<std::ffi::os_str::OsString>>::grow_one".into(),
            file: None,
            line: None,
        }];
        assert_eq!(derive_marked(&frames, &[false]), None);
        let with_lines = [Frame {
            file: Some("alloc/src/raw_vec/mod.rs".into()),
            ..frames[0].clone()
        }];
        assert_eq!(
            derive_marked(&with_lines, &[false]).as_deref(),
            Some("Vec<OsString>")
        );
    }

    #[test]
    fn a_name_with_the_declarations_parameters_gives_no_type() {
        let frames = [Frame {
            function: "alloc::raw_vec::RawVec<T,A>::with_capacity_in".into(),
            file: Some("alloc/src/raw_vec/mod.rs".into()),
            line: Some(1),
        }];
        assert_eq!(derive(&frames), None);
    }

    #[test]
    fn a_confirmed_element_type_is_not_overridden_by_its_container() {
        // Cloning the `Vec<u8>` elements of a `Vec<Vec<u8>>`: the allocation is a `Vec<u8>`.
        let frame = |function: &str, file: &str| Frame {
            function: function.into(),
            file: Some(file.into()),
            line: Some(1),
        };
        let frames = [
            frame(
                "<alloc::raw_vec::RawVec<u8>>::with_capacity_in",
                "alloc/src/raw_vec/mod.rs",
            ),
            frame("to_vec<u8, alloc::alloc::Global>", "alloc/src/slice.rs"),
            frame(
                "extend_from_slice<alloc::vec::Vec<u8>, alloc::alloc::Global>",
                "alloc/src/vec/mod.rs",
            ),
        ];
        assert_eq!(
            derive_marked(&frames, &[false, true, true]).as_deref(),
            Some("Vec<u8>")
        );
    }

    /// Frames as `(function, shortened file)`, innermost first, copied from real allocations
    /// (rustc 1.95, release, `debug = "line-tables-only"`, with and without
    /// `-C symbol-mangling-version=v0`; both gave the same names for these frames).
    fn frames(list: &[(&str, &str)]) -> Vec<Frame> {
        list.iter()
            .map(|&(function, file)| Frame {
                function: function.to_string(),
                file: (!file.is_empty()).then(|| file.to_string()),
                line: None,
            })
            .collect()
    }

    const ALLOC_PREFIX: &[(&str, &str)] = &[
        ("alloc", "alloc/src/alloc.rs"),
        ("alloc_impl_runtime", "alloc/src/alloc.rs"),
        ("alloc_impl", "alloc/src/alloc.rs"),
        ("allocate", "alloc/src/alloc.rs"),
    ];

    fn with_prefix(rest: &[(&'static str, &'static str)]) -> Vec<Frame> {
        let mut all = ALLOC_PREFIX.to_vec();
        all.extend_from_slice(rest);
        frames(&all)
    }

    #[test]
    fn vec_macro_with_element_is_a_vec_of_that_element() {
        // vec![0.0f32; 100]
        let trimmed = frames(&[
            (
                "try_allocate_in<alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "with_capacity_zeroed_in<alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "with_capacity_zeroed_in<f32, alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "from_elem<f32, alloc::alloc::Global>",
                "alloc/src/vec/spec_from_elem.rs",
            ),
            ("from_elem<f32>", "alloc/src/vec/mod.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("Vec<f32>"));
    }

    #[test]
    fn string_from_is_a_string() {
        let trimmed = frames(&[
            (
                "try_allocate_in<alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "with_capacity_in<alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "with_capacity_in<u8, alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "with_capacity_in<u8, alloc::alloc::Global>",
                "alloc/src/vec/mod.rs",
            ),
            ("to_vec<u8, alloc::alloc::Global>", "alloc/src/slice.rs"),
            ("to_vec_in<u8, alloc::alloc::Global>", "alloc/src/slice.rs"),
            ("to_vec<u8>", "alloc/src/slice.rs"),
            ("to_owned<u8>", "alloc/src/slice.rs"),
            ("to_owned", "alloc/src/str.rs"),
            ("from", "alloc/src/string.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("String"));
    }

    #[test]
    fn format_macro_is_a_string() {
        // Non-inlined std frames carry full v0-demangled names.
        let trimmed = frames(&[
            ("alloc::alloc::alloc", "alloc/src/alloc.rs"),
            ("<alloc::alloc::Global as core::alloc::Allocator>::allocate", "alloc/src/alloc.rs"),
            ("<alloc::raw_vec::RawVecInner>::try_allocate_in", "alloc/src/raw_vec/mod.rs"),
            ("<alloc::raw_vec::RawVec<u8>>::with_capacity_in", "alloc/src/raw_vec/mod.rs"),
            ("<alloc::vec::Vec<u8>>::with_capacity_in", "alloc/src/vec/mod.rs"),
            ("<alloc::vec::Vec<u8>>::with_capacity", "alloc/src/vec/mod.rs"),
            ("<alloc::string::String>::with_capacity", "alloc/src/string.rs"),
            ("alloc::fmt::format::format_inner", "alloc/src/fmt.rs"),
            ("{closure#0}", "alloc/src/fmt.rs"),
            ("map_or_else<&str, alloc::string::String, alloc::fmt::format::{closure_env#0}, fn(&str) -> alloc::string::String>", "core/src/option.rs"),
            ("format", "alloc/src/fmt.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("String"));
    }

    #[test]
    fn to_string_is_a_string() {
        let trimmed = frames(&[
            (
                "with_capacity_in<u8, alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            ("to_vec<u8>", "alloc/src/slice.rs"),
            ("to_owned", "alloc/src/str.rs"),
            ("from", "alloc/src/string.rs"),
            ("spec_to_string", "alloc/src/string.rs"),
            ("to_string<str>", "alloc/src/string.rs"),
            ("spec_to_string", "alloc/src/string.rs"),
            ("to_string<u64>", "alloc/src/string.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("String"));
    }

    #[test]
    fn box_new_is_a_box_of_its_argument() {
        let trimmed = with_prefix(&[
            ("box_new_uninit", "alloc/src/boxed.rs"),
            ("new<[u64; 4]>", "alloc/src/boxed.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("Box<[u64; 4]>"));
    }

    #[test]
    fn box_of_a_user_struct_shows_the_struct_name() {
        let trimmed = with_prefix(&[
            ("box_new_uninit", "alloc/src/boxed.rs"),
            ("new<scratch::Point>", "alloc/src/boxed.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("Box<Point>"));
    }

    #[test]
    fn hashmap_insert_is_the_map_with_its_parameters() {
        let trimmed = with_prefix(&[
            ("do_alloc<alloc::alloc::Global>", "hashbrown-0.16.1/src/raw/alloc.rs"),
            ("new_uninitialized<alloc::alloc::Global>", "hashbrown-0.16.1/src/raw/mod.rs"),
            ("fallible_with_capacity<alloc::alloc::Global>", "hashbrown-0.16.1/src/raw/mod.rs"),
            ("reserve_rehash<(alloc::string::String, u32), alloc::alloc::Global, hashbrown::map::make_hasher::{closure_env#0}<alloc::string::String, u32, std::hash::random::RandomState>>", "hashbrown-0.16.1/src/raw/mod.rs"),
            ("insert<alloc::string::String, u32, std::hash::random::RandomState, alloc::alloc::Global>", "hashbrown-0.16.1/src/map.rs"),
            ("insert<alloc::string::String, u32, std::hash::random::RandomState, alloc::alloc::Global>", "std/src/collections/hash/map.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("HashMap<String, u32>"));
    }

    #[test]
    fn hashbrown_table_without_its_owner_is_unknown() {
        let trimmed = with_prefix(&[
            (
                "do_alloc<alloc::alloc::Global>",
                "hashbrown-0.16.1/src/raw/alloc.rs",
            ),
            (
                "new_uninitialized<alloc::alloc::Global>",
                "hashbrown-0.16.1/src/raw/mod.rs",
            ),
        ]);
        assert_eq!(derive(&trimmed), None);
    }

    #[test]
    fn btreemap_insert_is_the_map_with_its_parameters() {
        let trimmed = with_prefix(&[
            ("try_new_uninit_in<alloc::collections::btree::node::LeafNode<u64, u32>, alloc::alloc::Global>", "alloc/src/boxed.rs"),
            ("new_uninit_in<alloc::collections::btree::node::LeafNode<u64, u32>, alloc::alloc::Global>", "alloc/src/boxed.rs"),
            ("new<u64, u32, alloc::alloc::Global>", "alloc/src/collections/btree/node.rs"),
            ("new_leaf<u64, u32, alloc::alloc::Global>", "alloc/src/collections/btree/node.rs"),
            ("insert_entry<u64, u32, alloc::alloc::Global>", "alloc/src/collections/btree/map/entry.rs"),
            ("insert<u64, u32, alloc::alloc::Global>", "alloc/src/collections/btree/map/entry.rs"),
            ("insert<u64, u32, alloc::alloc::Global>", "alloc/src/collections/btree/map.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("BTreeMap<u64, u32>"));
    }

    #[test]
    fn btreeset_is_recognised_by_its_zero_sized_value() {
        let trimmed = with_prefix(&[(
            "new<u64, alloc::collections::btree::set_val::SetValZST, alloc::alloc::Global>",
            "alloc/src/collections/btree/node.rs",
        )]);
        assert_eq!(derive(&trimmed).as_deref(), Some("BTreeSet<u64>"));
    }

    #[test]
    fn vecdeque_push_back_is_a_vecdeque() {
        let trimmed = with_prefix(&[
            (
                "finish_grow<alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "grow_amortized<alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            ("grow_one<alloc::alloc::Global>", "alloc/src/raw_vec/mod.rs"),
            (
                "grow_one<u16, alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "grow<u16, alloc::alloc::Global>",
                "alloc/src/collections/vec_deque/mod.rs",
            ),
            (
                "push_back_mut<u16, alloc::alloc::Global>",
                "alloc/src/collections/vec_deque/mod.rs",
            ),
            (
                "push_back<u16, alloc::alloc::Global>",
                "alloc/src/collections/vec_deque/mod.rs",
            ),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("VecDeque<u16>"));
    }

    #[test]
    fn arc_new_is_an_arc_of_its_argument() {
        let trimmed = with_prefix(&[
            ("box_new_uninit", "alloc/src/boxed.rs"),
            ("new<alloc::sync::ArcInner<[u8; 24]>>", "alloc/src/boxed.rs"),
            ("new<[u8; 24]>", "alloc/src/sync.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("Arc<[u8; 24]>"));
    }

    #[test]
    fn rc_new_is_an_rc_of_its_argument() {
        let trimmed = with_prefix(&[
            ("box_new_uninit", "alloc/src/boxed.rs"),
            ("new<alloc::rc::RcInner<u32>>", "alloc/src/boxed.rs"),
            ("new<u32>", "alloc/src/rc.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("Rc<u32>"));
    }

    #[test]
    fn vec_push_growth_is_a_vec() {
        let trimmed = frames(&[
            ("alloc::alloc::alloc", "alloc/src/alloc.rs"),
            (
                "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
                "alloc/src/alloc.rs",
            ),
            (
                "<alloc::raw_vec::RawVecInner>::finish_grow",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "<alloc::raw_vec::RawVecInner>::grow_amortized",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "<alloc::raw_vec::RawVecInner>::grow_one",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "<alloc::raw_vec::RawVec<u8>>::grow_one",
                "alloc/src/raw_vec/mod.rs",
            ),
            ("push_mut<u8, alloc::alloc::Global>", "alloc/src/vec/mod.rs"),
            ("push<u8, alloc::alloc::Global>", "alloc/src/vec/mod.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("Vec<u8>"));
    }

    #[test]
    fn collect_into_a_vec_is_a_vec_of_the_items() {
        let trimmed = with_prefix(&[
            ("with_capacity_in<u32, alloc::alloc::Global>", "alloc/src/raw_vec/mod.rs"),
            ("with_capacity<u32>", "alloc/src/vec/mod.rs"),
            ("from_iter<u32, core::iter::adapters::map::Map<core::ops::range::Range<u32>, scratch::collect::{closure_env#0}>>", "alloc/src/vec/spec_from_iter_nested.rs"),
            ("collect<core::iter::adapters::map::Map<core::ops::range::Range<u32>, scratch::collect::{closure_env#0}>, alloc::vec::Vec<u32, alloc::alloc::Global>>", "core/src/iter/traits/iterator.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("Vec<u32>"));
    }

    #[test]
    fn string_push_str_is_a_string() {
        let trimmed = with_prefix(&[
            (
                "finish_grow<alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            (
                "reserve<u8, alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            ("reserve<u8, alloc::alloc::Global>", "alloc/src/vec/mod.rs"),
            (
                "extend_from_slice<u8, alloc::alloc::Global>",
                "alloc/src/vec/mod.rs",
            ),
            ("push_str", "alloc/src/string.rs"),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("String"));
    }

    #[test]
    fn cloning_a_vec_of_strings_allocates_a_string_not_the_vec() {
        // Vec<String>::clone cloning one element: the allocation is the element's buffer.
        let trimmed = with_prefix(&[
            (
                "with_capacity_in<u8, alloc::alloc::Global>",
                "alloc/src/raw_vec/mod.rs",
            ),
            ("clone<u8, alloc::alloc::Global>", "alloc/src/vec/mod.rs"),
            ("clone", "alloc/src/string.rs"),
            (
                "to_vec<alloc::string::String, alloc::alloc::Global>",
                "alloc/src/slice.rs",
            ),
            (
                "clone<alloc::string::String, alloc::alloc::Global>",
                "alloc/src/vec/mod.rs",
            ),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("String"));
    }

    #[test]
    fn allocator_frames_alone_are_unknown() {
        assert_eq!(derive(&with_prefix(&[])), None);
    }

    #[test]
    fn raw_allocation_without_type_arguments_is_unknown() {
        let trimmed = with_prefix(&[(
            "<alloc::raw_vec::RawVecInner>::try_allocate_in",
            "alloc/src/raw_vec/mod.rs",
        )]);
        assert_eq!(derive(&trimmed), None);
    }

    #[test]
    fn frames_without_files_are_classified_by_their_names() {
        let trimmed = frames(&[
            ("<alloc::raw_vec::RawVec<i64>>::grow_one", ""),
            ("<alloc::vec::Vec<i64>>::push", ""),
        ]);
        assert_eq!(derive(&trimmed).as_deref(), Some("Vec<i64>"));
    }

    #[test]
    fn non_ascii_names_do_not_panic() {
        assert_eq!(generic_args("neu<Größe, ü>"), vec!["Größe", "ü"]);
        assert_eq!(
            derive(&frames(&[("ñ<crate::é>", "alloc/src/vec/mod.rs")])).as_deref(),
            Some("Vec<é>")
        );
    }

    #[test]
    fn unbalanced_names_do_not_panic() {
        for name in ["<", ">", "a<", "a>", "<<>", "f<a, b", "<x as >::y", "-> >"] {
            let _ = generic_args(name);
            let _ = derive(&frames(&[(name, "alloc/src/vec/mod.rs")]));
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_frame_names_never_panic(name in ".{0,40}", file in "(alloc/src/(vec/|sync.rs|boxed.rs|collections/btree/)|std/src/collections/hash/map.rs)?") {
            let _ = pretty(&name);
            let _ = derive(&frames(&[(name.as_str(), file.as_str())]));
        }
    }

    #[test]
    fn pretty_shortens_paths_and_drops_the_global_allocator() {
        assert_eq!(
            pretty("alloc::vec::Vec<alloc::string::String, alloc::alloc::Global>"),
            "Vec<String>"
        );
    }

    #[test]
    fn generic_args_of_an_impl_path_are_the_types() {
        assert_eq!(
            generic_args("<std::collections::hash::map::HashMap<K, V, S> as Foo>::insert"),
            vec!["K", "V", "S"]
        );
    }

    #[test]
    fn generic_args_survive_function_pointer_types() {
        assert_eq!(
            generic_args("map_or_else<&str, fn(&str) -> String>"),
            vec!["&str", "fn(&str) -> String"]
        );
    }
}
