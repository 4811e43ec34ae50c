//! The public, symbolised form of a call site: [`Site`] and its [`Frame`]s.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::report::text::OneLine;

/// One frame of a symbolised call stack.
///
/// ```
/// use heapdelta::Frame;
///
/// let frame = Frame {
///     function: "model::compose".to_string(),
///     file: Some("src/model.rs".to_string()),
///     line: Some(88),
/// };
/// assert_eq!(frame.to_string(), "model::compose (src/model.rs:88)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Frame {
    /// The function's name, without the symbol hash (`model::compose`, `compose`, or
    /// `<model::Model>::compose`, depending on the debug information available). A closure named
    /// without its path (`{closure#0}`) that is a site's outermost frame, as the closure a thread
    /// runs is, carries the function that wrote it when std's frames outward of it told:
    /// `{closure#0} in new`.
    pub function: String,
    /// The source file: relative to its cargo project (the outermost directory above it holding
    /// a `Cargo.toml`), so that runs from any directory name it alike, with the project's
    /// directory in front when it is not the program's own; `crate-x.y.z/src/…` for registry
    /// crates, `std/src/…` for the standard library; `None` without debug information.
    pub file: Option<String>,
    /// The line in `file`; `None` when unknown.
    pub line: Option<u32>,
}

/// How the mark of a stack cut by the depth begins (see [`Frame::is_cut_mark`]).
pub(crate) const CUT_MARK: &str = "(stack cut at ";

impl Frame {
    /// Whether this is the mark a site opens with when its capture stopped at its depth before
    /// any frame of the program's: a frame without a file named `(stack cut at …)`.
    pub(crate) fn is_cut_mark(&self) -> bool {
        self.file.is_none() && self.function.starts_with(CUT_MARK)
    }
}

impl fmt::Display for Frame {
    /// `function (file:line)`, leaving out what is unknown.
    ///
    /// ```
    /// use heapdelta::Frame;
    ///
    /// let frame = Frame { function: "main".into(), file: None, line: None };
    /// assert_eq!(frame.to_string(), "main");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_named(&self.function, f)
    }
}

impl Frame {
    /// `name (file:line)`, leaving out what is unknown.
    fn write_named(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names may come from a file: control characters are escaped.
        write!(f, "{}", OneLine(name))?;
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, " ({}:{line})", OneLine(file)),
            (Some(file), None) => write!(f, " ({})", OneLine(file)),
            (None, _) => Ok(()),
        }
    }
}

/// The name `frame` is shown by, given the frames it was called from (`outer`, innermost first):
/// its own, but for a closure or an async body named without its path (`{closure#0}`, as debug
/// information of line tables only names it), which is named after the function that wrote it,
/// `{closure#0} in memoize`, as far as the frames tell:
/// - a frame it was called through that carries its state as a generic argument names that
///   function (`with_log<app::summarize::{closure_env#0}>` for a closure kept in a variable and
///   passed to a helper: a user trial's was named after the helper). Only the standard library's
///   frames up to the first of the program's are looked at (one of a function called in between,
///   through a `dyn Fn`, could name another closure of the same number), and not a state the
///   closure's own name carries too (a closure written in that generic function itself);
/// - otherwise, of the functions of its file further out (that are no such body themselves), the
///   one whose line is nearest the closure's: a closure's body lies in its function's, near the
///   line that function calls on from, where a helper of the same file that it is passed to
///   (`with_retry(|| …)`) calls it from its own body, further away (a review's `load` and `save`).
///
/// Reports and pprof, which adds functions up by name, would otherwise give the closures of all
/// of a file's functions one name.
pub(crate) fn shown_name<'a>(
    frame: &'a Frame,
    outer: impl IntoIterator<Item = &'a Frame>,
) -> Cow<'a, str> {
    let bare = |f: &Frame| f.function.starts_with('{');
    if !bare(frame) || frame.file.is_none() {
        return Cow::Borrowed(&frame.function);
    }
    // The closure's state as a generic argument names it: `::{closure_env#0}`.
    let state = state_of(&frame.function).filter(|state| !frame.function.contains(state));
    let distance = |o: &Frame| match (frame.line, o.line) {
        (Some(a), Some(b)) => a.abs_diff(b),
        _ => u32::MAX,
    };
    // The first of the nearest: `min_by_key` keeps the last of equals.
    let mut nearest: Option<(&Frame, u32)> = None;
    // Frames up to the first of the program's: the adapters it was called through, and that one.
    let mut through_adapters = true;
    for o in outer {
        if let Some(state) = state.as_deref().filter(|_| through_adapters) {
            if let Some(owner) = owner_in(state, &o.function) {
                return Cow::Owned(format!("{} in {owner}", frame.function));
            }
            through_adapters = is_std_file(o.file.as_deref());
        }
        if o.file == frame.file && !bare(o) {
            let d = distance(o);
            if nearest.is_none_or(|(_, best)| d < best) {
                nearest = Some((o, d));
            }
        }
    }
    match nearest {
        Some((o, _)) => Cow::Owned(format!("{} in {}", frame.function, o.function)),
        None => Cow::Borrowed(&frame.function),
    }
}

/// Whether a frame's file is the standard library's (`std/src/…`, `core/src/…`, `alloc/src/…`),
/// or not known.
fn is_std_file(file: Option<&str>) -> bool {
    file.is_none_or(|f| ["std/", "core/", "alloc/"].iter().any(|p| f.starts_with(p)))
}

/// How a generic argument names the state of the closure or async body `bare` (`{closure#0}`,
/// `{async_fn#1}`): `::{closure_env#0}`, `::{async_fn_env#1}`.
fn state_of(bare: &str) -> Option<String> {
    let inner = bare.strip_prefix('{')?;
    let (kind, index) = inner.get(..inner.find('}')?)?.split_once('#')?;
    Some(format!("::{{{kind}_env#{index}}}"))
}

/// The function whose closure's state `state` (from `state_of`) is, when `name`, a frame's,
/// carries it as a generic argument: `app::summarize::{closure_env#0}` in
/// `with_log<app::summarize::{closure_env#0}>` gives `summarize`, the path's last function (with
/// the bodies it lies in: `main::{closure#1}` for a closure inside a closure).
fn owner_in<'a>(state: &str, name: &'a str) -> Option<&'a str> {
    let at = name.find(state)?;
    let delimiter = |c: char| {
        matches!(
            c,
            '<' | '>' | ',' | ' ' | '(' | ')' | '[' | ']' | '&' | '*' | ';'
        )
    };
    let start = name[..at]
        .char_indices()
        .rev()
        .find(|&(_, c)| delimiter(c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let path = &name[start..at];
    // From the last segment that is a function's name, not a body's.
    let from = path
        .match_indices("::")
        .map(|(i, _)| i + 2)
        .filter(|&i| !path[i..].starts_with('{'))
        .last()
        .unwrap_or(0);
    let owner = path[from..].trim_start_matches(':');
    (!owner.is_empty() && !owner.starts_with('{')).then_some(owner)
}

/// A call site: the symbolised stack of an allocation, trimmed so that the first frame is the
/// user's code (allocator, `alloc`, `core`, `std` and heapdelta frames removed, recursion folded),
/// plus the allocated type when the trimmed standard-library frames determine it.
///
/// ```
/// use heapdelta::{Frame, Site};
///
/// let site = Site::new(vec![
///     Frame { function: "model::compose".into(), file: Some("src/model.rs".into()), line: Some(88) },
///     Frame { function: "main".into(), file: Some("src/main.rs".into()), line: Some(12) },
/// ]);
/// assert_eq!(site.to_string(), "model::compose (src/model.rs:88)");
/// assert_eq!(site.frames().len(), 2);
/// assert_eq!(site.type_name(), "(unknown)");
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Site(Arc<SiteData>);

/// A site's contents, shared by its copies: a long timeline names the same sites many times.
#[derive(Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename = "Site")]
struct SiteData {
    frames: Vec<Frame>,
    type_name: Option<String>,
}

impl Site {
    /// A site made of `frames`, innermost first, of unknown allocated type.
    ///
    /// ```
    /// use heapdelta::Site;
    ///
    /// let site = Site::new(Vec::new());
    /// assert_eq!(site.to_string(), "(unknown)");
    /// ```
    pub fn new(frames: Vec<Frame>) -> Site {
        Site::with_type(frames, None)
    }

    /// A site made of `frames` (innermost first) allocating `type_name`, for tests and tools
    /// that build sites by hand.
    #[doc(hidden)]
    pub fn from_frames(frames: Vec<Frame>, type_name: Option<String>) -> Site {
        Site::with_type(frames, type_name)
    }

    /// The site as reports name it: its first frame, under the name it is shown by (see
    /// `shown_name`), and its type. Sites that differ only further out (other callers, or a
    /// recursion cut at another depth) have the same leaf, but for closures called in different
    /// functions.
    pub(crate) fn leaf(&self) -> Site {
        let frames = match self.0.frames.split_first() {
            Some((first, outer)) => vec![Frame {
                function: shown_name(first, outer).into_owned(),
                ..first.clone()
            }],
            None => Vec::new(),
        };
        Site::with_type(frames, self.0.type_name.clone())
    }

    /// A site whose frames are not known (`Display`: `(unknown)`).
    pub(crate) fn unknown() -> Site {
        Site::new(Vec::new())
    }

    /// A site whose allocated type was derived (`None` = unknown).
    pub(crate) fn with_type(frames: Vec<Frame>, type_name: Option<String>) -> Site {
        Site(Arc::new(SiteData { frames, type_name }))
    }

    /// The frames, innermost first: `frames()[0]` is the innermost user frame, the last is the
    /// outermost kept.
    ///
    /// ```
    /// use heapdelta::{Frame, Site};
    ///
    /// let site = Site::new(vec![Frame { function: "f".into(), file: None, line: None }]);
    /// assert_eq!(site.frames()[0].function, "f");
    /// ```
    pub fn frames(&self) -> &[Frame] {
        &self.0.frames
    }

    /// The frames innermost first as tools that draw stacks want them: the mark a site opens with
    /// when its capture stopped at its depth before any frame of the program's (which reports
    /// name the site by) is moved outermost, where the stack was cut, so that flamegraphs and
    /// pprof draw it under the library frames kept instead of above them.
    pub(crate) fn stack(&self) -> impl DoubleEndedIterator<Item = &Frame> {
        let frames = self.frames();
        let cut = usize::from(frames.first().is_some_and(Frame::is_cut_mark));
        frames[cut..].iter().chain(&frames[..cut])
    }

    /// `stack()`'s frames, each with the name reports show it by (see `shown_name`).
    pub(crate) fn shown_stack(&self) -> Vec<(Cow<'_, str>, &Frame)> {
        let stack: Vec<&Frame> = self.stack().collect();
        (0..stack.len())
            .map(|i| {
                let outer = stack.get(i + 1..).unwrap_or_default().iter().copied();
                (shown_name(stack[i], outer), stack[i])
            })
            .collect()
    }

    /// The allocated type derived from the standard-library frames the allocation went through
    /// (`Vec<f32>`, `String`, `HashMap<String, u32>` …), or `"(unknown)"` when they do not
    /// determine it.
    ///
    /// ```
    /// use heapdelta::Site;
    ///
    /// assert_eq!(Site::new(Vec::new()).type_name(), "(unknown)");
    /// ```
    pub fn type_name(&self) -> &str {
        self.0.type_name.as_deref().unwrap_or("(unknown)")
    }

    /// The allocated type, when the frames determine it.
    pub(crate) fn known_type(&self) -> Option<&str> {
        self.0.type_name.as_deref()
    }
}

impl fmt::Display for Site {
    /// The innermost user frame, `function (file:line)`; `(unknown)` for a site without frames.
    /// A closure named without its path is named after the function it was called in (see
    /// `shown_name`): `{closure#0} in memoize (src/main.rs:127)`.
    ///
    /// ```
    /// use heapdelta::{Frame, Site};
    ///
    /// let site = Site::new(vec![Frame {
    ///     function: "model::encode".into(),
    ///     file: Some("src/model.rs".into()),
    ///     line: Some(61),
    /// }]);
    /// assert_eq!(format!("{site}"), "model::encode (src/model.rs:61)");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.frames.split_first() {
            Some((frame, outer)) => frame.write_named(&shown_name(frame, outer), f),
            None => f.write_str("(unknown)"),
        }
    }
}

impl fmt::Debug for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Site")
            .field("frames", &self.0.frames)
            .field("type_name", &self.0.type_name)
            .finish()
    }
}

/// Written as `{"frames": [...], "type_name": ...}`.
impl Serialize for Site {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Site {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Site, D::Error> {
        SiteData::deserialize(deserializer).map(|d| Site(Arc::new(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: Option<&str>, line: Option<u32>) -> Frame {
        Frame {
            function: function.into(),
            file: file.map(Into::into),
            line,
        }
    }

    #[test]
    fn site_displays_its_innermost_frame() {
        let site = Site::new(vec![
            frame("inner", Some("src/a.rs"), Some(1)),
            frame("outer", Some("src/b.rs"), Some(2)),
        ]);
        assert_eq!(site.to_string(), "inner (src/a.rs:1)");
    }

    #[test]
    fn a_cut_sites_mark_is_outermost_in_its_stack() {
        let mark = "(stack cut at 2 frames, before any of the program's: raise Tracker::depth)";
        let site = Site::new(vec![
            frame(mark, None, None),
            frame("lib::inner", Some("lib/src/a.rs"), Some(1)),
            frame("lib::outer", Some("lib/src/a.rs"), Some(9)),
        ]);
        assert_eq!(site.to_string(), mark);
        let stack: Vec<&str> = site.stack().map(|f| f.function.as_str()).collect();
        assert_eq!(stack, ["lib::inner", "lib::outer", mark]);
    }

    #[test]
    fn a_stack_without_a_cut_mark_keeps_its_order() {
        let site = Site::new(vec![
            frame("inner", Some("src/a.rs"), Some(1)),
            frame("(stack cut at 2 frames", Some("src/b.rs"), Some(2)),
        ]);
        let stack: Vec<&str> = site.stack().map(|f| f.function.as_str()).collect();
        assert_eq!(stack, ["inner", "(stack cut at 2 frames"]);
    }

    /// A site of `frames` (function, file, line; innermost first).
    fn site_of(frames: &[(&str, &str, u32)]) -> Site {
        let frames = frames
            .iter()
            .map(|&(f, file, line)| frame(f, Some(file), Some(line)));
        Site::new(frames.collect())
    }

    #[test]
    fn a_closure_named_without_its_path_is_shown_in_the_function_of_its_file_it_ran_in() {
        let site = site_of(&[
            ("{closure#0}", "src/main.rs", 127),
            ("{closure#2}", "src/main.rs", 126),
            ("with<u8>", "std/src/thread/local.rs", 310),
            ("memoize", "src/main.rs", 126),
        ]);
        assert_eq!(site.to_string(), "{closure#0} in memoize (src/main.rs:127)");
    }

    #[test]
    fn a_closure_passed_to_a_helper_of_its_file_is_named_after_the_function_that_wrote_it() {
        // A review: `load` and `save` both pass a closure to `with_retry`.
        let called = |at: u32, from: &'static str, from_line: u32| {
            site_of(&[
                ("{closure#0}", "src/main.rs", at),
                ("with_retry<{closure#0}>", "src/main.rs", 40),
                (from, "src/main.rs", from_line),
                ("main", "src/main.rs", 60),
            ])
            .to_string()
        };
        assert_eq!(
            called(12, "load", 11),
            "{closure#0} in load (src/main.rs:12)"
        );
        assert_eq!(
            called(22, "save", 21),
            "{closure#0} in save (src/main.rs:22)"
        );
    }

    #[test]
    fn a_closure_kept_in_a_variable_is_named_after_the_function_its_state_names() {
        // A user trial: `let render = |n| …;` in `summarize` (line 12), passed to `with_log`
        // (line 7 of the same file), called from line 43.
        let site = site_of(&[
            ("{closure#0}", "src/report.rs", 12),
            (
                "with_log<kvcache::report::summarize::{closure_env#0}>",
                "src/report.rs",
                7,
            ),
            ("summarize", "src/report.rs", 43),
        ]);
        assert_eq!(
            site.to_string(),
            "{closure#0} in summarize (src/report.rs:12)"
        );
    }

    #[test]
    fn the_state_of_a_closure_in_a_closure_names_both() {
        let owner = |bare: &str, name: &'static str| owner_in(&state_of(bare)?, name);
        assert_eq!(
            owner(
                "{closure#0}",
                "map<u8, app::main::{closure#1}::{closure_env#0}>"
            ),
            Some("main::{closure#1}")
        );
        assert_eq!(
            owner("{async_fn#0}", "poll<app::serve::{async_fn_env#0}>"),
            Some("serve")
        );
        assert_eq!(
            owner("{closure#1}", "map<app::main::{closure_env#0}>"),
            None
        );
        assert_eq!(
            owner("{closure#0}", "with_log<app::नमस्ते::{closure_env#0}>"),
            Some("नमस्ते")
        );
    }

    #[test]
    fn a_closure_written_in_a_generic_function_is_named_after_it_not_its_callers_closure() {
        // A review: `with_log<F>`'s own closure carries `F` too.
        let site = site_of(&[
            (
                "{closure#0}<app::report::{closure_env#0}>",
                "src/util.rs",
                11,
            ),
            ("with_log<app::report::{closure_env#0}>", "src/util.rs", 12),
            ("report", "src/main.rs", 5),
        ]);
        assert_eq!(
            site.to_string(),
            "{closure#0}<app::report::{closure_env#0}> in with_log<app::report::{closure_env#0}> \
             (src/util.rs:11)"
        );
    }

    #[test]
    fn a_closure_called_through_a_function_of_another_file_is_not_named_by_frames_past_it() {
        // A review: a boxed handler made in `make_handler`, called by `dispatch` from inside
        // `main`'s closure.
        let site = site_of(&[
            ("{closure#0}", "src/handlers.rs", 4),
            ("call<u8>", "alloc/src/boxed.rs", 2000),
            ("dispatch", "src/server.rs", 5),
            ("{closure#0}", "src/main.rs", 11),
            ("each<app::main::{closure_env#0}>", "src/util.rs", 4),
            ("main", "src/main.rs", 11),
        ]);
        assert_eq!(site.to_string(), "{closure#0} (src/handlers.rs:4)");
    }

    #[test]
    fn a_closure_with_no_function_of_its_file_further_out_keeps_its_name() {
        let site = site_of(&[
            ("{closure#6}", "src/main.rs", 40),
            ("run<u8>", "std/src/thread/mod.rs", 500),
        ]);
        assert_eq!(site.to_string(), "{closure#6} (src/main.rs:40)");
        let named = site_of(&[("app::f::{{closure}}", "src/a.rs", 3)]);
        assert_eq!(named.to_string(), "app::f::{{closure}} (src/a.rs:3)");
    }

    #[test]
    fn a_closures_leaf_keeps_the_function_it_ran_in() {
        let site = site_of(&[
            ("{closure#0}", "src/main.rs", 36),
            ("collect<u8>", "core/src/iter/traits/iterator.rs", 2064),
            ("build", "src/main.rs", 37),
        ]);
        let leaf = site.leaf().to_string();
        assert_eq!(leaf, "{closure#0} in build (src/main.rs:36)");
    }

    #[test]
    fn frame_without_line_shows_the_file_alone() {
        assert_eq!(
            frame("f", Some("src/a.rs"), None).to_string(),
            "f (src/a.rs)"
        );
    }

    #[test]
    fn derived_type_is_reported() {
        let site = Site::with_type(Vec::new(), Some("Vec<f32>".into()));
        assert_eq!(site.type_name(), "Vec<f32>");
    }

    #[test]
    fn site_round_trips_through_json() {
        let site = Site::with_type(
            vec![frame("f", Some("src/a.rs"), Some(3))],
            Some("String".into()),
        );
        let json = serde_json::to_string(&site).unwrap();
        assert_eq!(serde_json::from_str::<Site>(&json).unwrap(), site);
    }
}
