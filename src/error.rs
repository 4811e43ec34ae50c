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
    /// The file is not a heapdelta file, or is truncated or malformed: what is wrong (after the
    /// file's path, when read by path).
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
        /// How many checkpoints the timeline did not keep
        /// ([`keep_checkpoints`](crate::keep_checkpoints), `HEAPDELTA=keep=`): the label may have
        /// been one of theirs.
        dropped: u64,
    },
    /// The window's end comes before its start in the timeline.
    ReversedWindow {
        /// The label asked for as the start.
        from: String,
        /// The label asked for as the end.
        to: String,
    },
    /// The window starts and ends at the same checkpoint, so it holds no step.
    EmptyWindow {
        /// The label asked for as the start.
        from: String,
        /// The label asked for as the end.
        label: String,
    },
    /// Several checkpoints have this label, so which one is meant cannot be told.
    AmbiguousLabel {
        /// The label asked for.
        label: String,
        /// How many of the kept checkpoints have it.
        count: usize,
        /// Checkpoints not kept (see [`crate::keep_checkpoints`]): `label#n` counts only those
        /// kept.
        dropped: u64,
    },
    /// `label#n` is both a checkpoint's own label and the `n`th of the several checkpoints
    /// labelled `label`, so which one is meant cannot be told.
    NumberedLabelTaken {
        /// The label asked for (with `#n`).
        label: String,
    },
    /// `label#n` asked for the `n`th of the checkpoints labelled `label`, and fewer have it.
    NoSuchNumber {
        /// The label the checkpoints share (without `#n`).
        label: String,
        /// The number asked for.
        n: usize,
        /// How many of the kept checkpoints have the label.
        count: usize,
        /// Checkpoints not kept (see [`crate::keep_checkpoints`]), which `label#n` does not
        /// count.
        dropped: u64,
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
            Error::UnknownLabel { label, known, .. } if known.is_empty() => {
                write!(f, "no checkpoint labelled {label:?}: no checkpoint has a label")
            }
            Error::UnknownLabel {
                label,
                known,
                dropped,
            } => {
                write!(
                    f,
                    "no checkpoint labelled {label:?}; known labels: {}",
                    label_list(known)
                )?;
                match dropped {
                    0 => Ok(()),
                    1 => write!(f, "; 1 more checkpoint was not kept (keep_checkpoints or HEAPDELTA=keep=)"),
                    n => write!(
                        f,
                        "; {} were not kept (keep_checkpoints or HEAPDELTA=keep=)",
                        count_checkpoints(*n)
                    ),
                }
            }
            Error::ReversedWindow { from, to } => write!(
                f,
                "checkpoint {to:?} comes before {from:?}: give the earlier checkpoint first"
            ),
            Error::EmptyWindow { from, label } => {
                match from == label {
                    true => write!(f, "the window from {label:?} to {label:?} holds no step")?,
                    false => write!(
                        f,
                        "{from:?} and {label:?} name the same checkpoint: the window holds no step"
                    )?,
                }
                write!(
                    f,
                    ": give the checkpoint before it as the start for the step that ends at \
                     {label:?}"
                )
            }
            Error::AmbiguousLabel {
                label,
                count,
                dropped,
            } => {
                write!(
                    f,
                    "{count} checkpoints are labelled {label:?}: pick one as {:?} to {:?} (in the \
                     order they were taken), or give each checkpoint its own label",
                    format!("{label}#1"),
                    format!("{label}#{count}")
                )?;
                not_counted(f, *dropped)
            }
            Error::NumberedLabelTaken { label } => {
                let (shared, n) = label.rsplit_once('#').unwrap_or((label, ""));
                write!(
                    f,
                    "{label:?} names two checkpoints: one labelled so, and the {n}{} of those \
                     labelled {shared:?}; give each checkpoint its own label",
                    ordinal_suffix(n)
                )
            }
            Error::NoSuchNumber {
                label,
                n: 0,
                count,
                dropped,
            } => {
                write!(
                    f,
                    "no checkpoint {:?}: numbers count from 1; {} labelled {label:?}: pick {} as {:?}",
                    format!("{label}#0"),
                    match count {
                        1 => "1 checkpoint is".to_string(),
                        n => format!("{n} checkpoints are"),
                    },
                    if *count == 1 { "it" } else { "the first" },
                    format!("{label}#1")
                )?;
                not_counted(f, *dropped)
            }
            Error::NoSuchNumber {
                label,
                n,
                count: 1,
                dropped,
            } => {
                write!(
                    f,
                    "no checkpoint {:?}: only 1 checkpoint is labelled {label:?}; pick it as \
                     {label:?} or {:?}",
                    format!("{label}#{n}"),
                    format!("{label}#1")
                )?;
                not_counted(f, *dropped)
            }
            Error::NoSuchNumber {
                label,
                n,
                count,
                dropped,
            } => {
                write!(
                    f,
                    "no checkpoint {:?}: only {count} checkpoints are labelled {label:?}; pick one \
                     as {:?} to {:?}",
                    format!("{label}#{n}"),
                    format!("{label}#1"),
                    format!("{label}#{count}")
                )?;
                not_counted(f, *dropped)
            }
        }
    }
}

/// `st`, `nd`, `rd` or `th`, for the number written `n`.
fn ordinal_suffix(n: &str) -> &'static str {
    let tens = n.len() >= 2 && n.as_bytes()[n.len() - 2] == b'1';
    match n.as_bytes().last() {
        Some(b'1') if !tens => "st",
        Some(b'2') if !tens => "nd",
        Some(b'3') if !tens => "rd",
        _ => "th",
    }
}

/// The end of a message about checkpoints picked by number: how many were not kept, if any.
fn not_counted(f: &mut fmt::Formatter<'_>, dropped: u64) -> fmt::Result {
    match dropped {
        0 => Ok(()),
        n => write!(
            f,
            "; {} were not kept (keep_checkpoints or HEAPDELTA=keep=) and are not counted",
            count_checkpoints(n)
        ),
    }
}

/// `1 more checkpoint` / `n more checkpoints`.
fn count_checkpoints(n: u64) -> String {
    match n {
        1 => "1 more checkpoint".to_string(),
        n => format!("{n} more checkpoints"),
    }
}

/// Labels named in an error: each quoted (so an empty one or one with a line break stays visible
/// on one line), and of a long list only the first and last few.
fn label_list(known: &[String]) -> String {
    const EACH_END: usize = 4;
    // Each label once, in the order first taken, with how many checkpoints have it when several
    // do (a user trial's list read `"step 0", …, "step 0"`).
    let mut distinct: Vec<(&String, usize)> = Vec::new();
    let mut place = std::collections::HashMap::new();
    for label in known {
        let i = *place.entry(label).or_insert_with(|| {
            distinct.push((label, 0));
            distinct.len() - 1
        });
        distinct[i].1 += 1;
    }
    let known = &distinct[..];
    let quoted = |labels: &[(&String, usize)]| -> Vec<String> {
        labels
            .iter()
            .map(|(l, n)| match n {
                1 => format!("{l:?}"),
                n => format!("{l:?} (×{n})"),
            })
            .collect()
    };
    if known.len() <= 3 * EACH_END {
        return quoted(known).join(", ");
    }
    format!(
        "{}, … {} more …, {}",
        quoted(&known[..EACH_END]).join(", "),
        known.len() - 2 * EACH_END,
        quoted(&known[known.len() - EACH_END..]).join(", ")
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown(known: Vec<String>) -> String {
        Error::UnknownLabel {
            label: "nope".to_string(),
            known,
            dropped: 0,
        }
        .to_string()
    }

    #[test]
    fn an_unknown_label_error_quotes_each_label_on_one_line() {
        let msg = unknown(vec![String::new(), "a\nb".to_string()]);
        assert_eq!(
            msg,
            r#"no checkpoint labelled "nope"; known labels: "", "a\nb""#
        );
    }

    #[test]
    fn an_unknown_label_among_no_labels_says_that_none_has_one() {
        // A timeline of checkpoints without labels (read from a file) is not one of no
        // checkpoints: the message holds for both.
        assert_eq!(
            unknown(Vec::new()),
            r#"no checkpoint labelled "nope": no checkpoint has a label"#
        );
    }

    #[test]
    fn a_long_label_list_keeps_its_ends_and_counts_the_rest() {
        let msg = unknown((0..100).map(|i| format!("step {i}")).collect());
        assert!(
            msg.ends_with(
                r#""step 0", "step 1", "step 2", "step 3", … 92 more …, "step 96", "step 97", "step 98", "step 99""#
            ),
            "{msg}"
        );
    }

    #[test]
    fn a_label_many_checkpoints_share_is_listed_once_with_their_number() {
        let known = ["start", "step", "step", "end", "step"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            unknown(known),
            r#"no checkpoint labelled "nope"; known labels: "start", "step" (×3), "end""#
        );
    }

    #[test]
    fn an_unknown_label_error_says_how_many_checkpoints_were_not_kept() {
        let err = Error::UnknownLabel {
            label: "step 2".to_string(),
            known: vec!["start".to_string(), "step 9".to_string()],
            dropped: 7,
        };
        assert_eq!(
            err.to_string(),
            r#"no checkpoint labelled "step 2"; known labels: "start", "step 9"; 7 more checkpoints were not kept (keep_checkpoints or HEAPDELTA=keep=)"#
        );
    }
}
