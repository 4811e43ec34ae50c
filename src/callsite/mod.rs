//! Call sites (temporary minimal version; the full capture/intern/symbols lands from `callsite`).
#![allow(dead_code)]

use std::fmt;

use serde::{Deserialize, Serialize};

/// Interned call-site id (0: none).
pub type SiteId = u32;

/// One frame of a call site.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// Function name.
    pub function: String,
    /// Source file.
    pub file: Option<String>,
    /// Line.
    pub line: Option<u32>,
}

/// A call site.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Site {
    frames: Vec<Frame>,
    type_name: Option<String>,
}

impl Site {
    /// Frames, innermost user frame first.
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }
    /// A site made of `frames` (innermost first), for tests and for reading files.
    #[doc(hidden)]
    pub fn from_frames(frames: Vec<Frame>, type_name: Option<String>) -> Site {
        Site { frames, type_name }
    }
    /// The allocated type, or "(unknown)".
    pub fn type_name(&self) -> &str {
        self.type_name.as_deref().unwrap_or("(unknown)")
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.frames.first() {
            Some(fr) => write!(f, "{}", fr.function),
            None => f.write_str("(unknown)"),
        }
    }
}

/// Resolves an interned site.
pub(crate) fn resolve(_id: SiteId) -> Site {
    Site {
        frames: Vec::new(),
        type_name: None,
    }
}

impl Site {
    /// A site whose frames are not known.
    pub(crate) fn unknown() -> Site {
        Site {
            frames: Vec::new(),
            type_name: None,
        }
    }
}
