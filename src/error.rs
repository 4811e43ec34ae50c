//! The crate's error type.

use std::fmt;
use std::io;

/// What can go wrong reading a report file or looking up a checkpoint.
///
/// ```
/// heapdelta::checkpoint("warm-up");
/// let err = heapdelta::timeline().between("warm-up", "step 9").unwrap_err();
/// assert!(err.to_string().contains("step 9"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read or written.
    Io(io::Error),
    /// The file is not a heapdelta file, or is truncated or malformed.
    Format(String),
    /// The file was written by a newer heapdelta.
    Version {
        /// Version found in the file.
        found: u64,
        /// Newest version this build reads.
        supported: u64,
    },
    /// No checkpoint has this label.
    UnknownLabel {
        /// The label asked for.
        label: String,
        /// The labels that exist.
        known: Vec<String>,
    },
    /// The window's end comes before its start in the timeline.
    ReversedWindow {
        /// The label asked for as the start.
        from: String,
        /// The label asked for as the end.
        to: String,
    },
    /// Several checkpoints have this label, so which one is meant cannot be told.
    AmbiguousLabel {
        /// The label asked for.
        label: String,
        /// How many checkpoints have it.
        count: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Format(msg) => write!(f, "not a valid heapdelta file: {msg}"),
            Error::Version { found, supported } => write!(
                f,
                "file format version {found} is newer than this heapdelta reads ({supported}); upgrade heapdelta"
            ),
            Error::UnknownLabel { label, known } if known.is_empty() => {
                write!(f, "no checkpoint labelled {label:?}: no checkpoints were taken")
            }
            Error::UnknownLabel { label, known } => {
                write!(f, "no checkpoint labelled {label:?}; known labels: {}", known.join(", "))
            }
            Error::ReversedWindow { from, to } => write!(
                f,
                "checkpoint {to:?} comes before {from:?}: give the earlier checkpoint first"
            ),
            Error::AmbiguousLabel { label, count } => write!(
                f,
                "{count} checkpoints are labelled {label:?}; give each checkpoint its own label to pick one"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}
