//! # heapdelta
//!
//! ```rust,ignore
//! #[global_allocator]
//! static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
//! ```
//!
//! Memory grows every step: heapdelta tells you what is growing and where it is allocated.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod callsite;
mod checkpoint;
mod config;
mod diff;
mod error;
mod header;
mod pool;
mod report;
mod scope;
mod sizeclass;
mod snapshot;
mod stats;
mod thread;
mod tracker;

#[cfg(feature = "cli")]
pub use report::cli;

pub use callsite::{Frame, Site};
pub use checkpoint::{checkpoint, measure, snapshot, timeline};
pub use diff::{ClassDelta, Delta, Growth, SiteDelta, Survivors, TagDelta, Timeline, TypeDelta};
pub use error::Error;
pub use pool::{pool_stats, Pool, PoolConfig, PoolStats};
pub use scope::{scope, ScopeGuard};
pub use snapshot::{Snapshot, Totals};
pub use tracker::{is_installed, CallSites, Tracker};
