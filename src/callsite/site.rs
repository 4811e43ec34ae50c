//! The public, symbolised form of a call site: [`Site`] and its [`Frame`]s.

use std::fmt;

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
    /// `<model::Model>::compose`, depending on the debug information available).
    pub function: String,
    /// The source file: relative to its cargo project (the outermost directory above it holding
    /// a `Cargo.toml`), so that runs from any directory name it alike, with the project's
    /// directory in front when it is not the program's own; `crate-x.y.z/src/…` for registry
    /// crates, `std/src/…` for the standard library; `None` without debug information.
    pub file: Option<String>,
    /// The line in `file`; `None` when unknown.
    pub line: Option<u32>,
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
        // Names may come from a file: control characters are escaped.
        write!(f, "{}", OneLine(&self.function))?;
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, " ({}:{line})", OneLine(file)),
            (Some(file), None) => write!(f, " ({})", OneLine(file)),
            (None, _) => Ok(()),
        }
    }
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
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Site {
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
        Site {
            frames,
            type_name: None,
        }
    }

    /// A site made of `frames` (innermost first) allocating `type_name`, for tests and tools
    /// that build sites by hand.
    #[doc(hidden)]
    pub fn from_frames(frames: Vec<Frame>, type_name: Option<String>) -> Site {
        Site { frames, type_name }
    }

    /// The site as reports name it: its first frame and its type. Sites that differ only further
    /// out (other callers, or a recursion cut at another depth) have the same leaf.
    pub(crate) fn leaf(&self) -> Site {
        Site {
            frames: self.frames.iter().take(1).cloned().collect(),
            type_name: self.type_name.clone(),
        }
    }

    /// A site whose frames are not known (`Display`: `(unknown)`).
    pub(crate) fn unknown() -> Site {
        Site::new(Vec::new())
    }

    /// A site whose allocated type was derived (`None` = unknown).
    pub(crate) fn with_type(frames: Vec<Frame>, type_name: Option<String>) -> Site {
        Site { frames, type_name }
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
        &self.frames
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
        self.type_name.as_deref().unwrap_or("(unknown)")
    }
}

impl fmt::Display for Site {
    /// The innermost user frame, `function (file:line)`; `(unknown)` for a site without frames.
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
        match self.frames.first() {
            Some(frame) => fmt::Display::fmt(frame, f),
            None => f.write_str("(unknown)"),
        }
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
