//! Reports: the terminal text (`Display` of `Delta` and `Timeline`), and file formats.

pub(crate) mod text;
