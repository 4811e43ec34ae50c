//! The terminal report: the per-step line and the tables under it (`delta.rs`), a timeline's
//! growth detector and steps (`timeline.rs`), and how both write numbers and names (`format.rs`).

mod delta;
mod format;
#[cfg(test)]
mod tests;
mod timeline;

pub use delta::By;
pub(crate) use delta::{comparison_note, estimates_note, estimates_note_beside};
pub(crate) use format::{breaks_line, bytes, count, table_rows, thousands, OneLine};
pub(crate) use timeline::timeline_text;
