//! The terminal report: the per-step line and the tables under it (`delta.rs`), a timeline's
//! growth detector and steps (`timeline.rs`), and how both write numbers and names (`format.rs`).

mod delta;
mod format;
#[cfg(test)]
mod tests;
mod timeline;

#[cfg(feature = "cli")]
pub(crate) use delta::comparison_note;
#[cfg(feature = "plot")]
pub(crate) use delta::estimates_note;
pub(crate) use delta::estimates_note_beside;
pub use delta::By;
pub(crate) use format::bytes;
#[cfg(feature = "plot")]
pub(crate) use format::count;
#[cfg(feature = "cli")]
pub(crate) use format::table_rows;
pub(crate) use format::{breaks_line, thousands, OneLine};
#[cfg(feature = "cli")]
pub(crate) use timeline::timeline_text;
