//! # heapdelta
//!
//! Add two lines to any binary:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
//! # fn main() {}
//! ```
//!
//! then mark the steps of your program with [`checkpoint`]:
//!
//! ```
//! # #[global_allocator]
//! # static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
//! fn main() {
//!     heapdelta::checkpoint("start"); // so that step 1 holds only what step 1 allocated
//!     let mut history = Vec::new();
//!     for step in 1..=3 {
//!         history.push(vec![0.0f32; 100]); // grows every step
//!         println!("{}", heapdelta::checkpoint(format!("step {step}")));
//!     }
//!     println!("{}", heapdelta::timeline()); // sites that grew at every step + per-step lines
//! }
//! ```
//!
//! Memory grows every step: heapdelta tells you, per step, how much live heap was added, which
//! call sites (the first frames of *your* code) and which size classes account for it, which sites
//! grow at every step (the leak), and what survives from one step to the next.
//!
//! ## Contents
//! - the shim: [`Tracker`], [`CallSites`], [`is_installed`];
//! - taking figures: [`snapshot`], [`checkpoint`], [`timeline`] (bounded by
//!   [`keep_checkpoints`]), [`measure`], [`scope`] (with its [`ScopeGuard`]);
//! - what they return: [`Snapshot`], [`Totals`], [`Delta`] with [`SiteDelta`], [`ClassDelta`],
//!   [`TagDelta`], [`TypeDelta`] and [`Survivors`]; [`Timeline`] with [`Growth`]; [`Site`] and
//!   [`Frame`]; a delta's growth table grouped [`By`] site, type, size class or tag
//!   ([`Delta::table`]);
//! - pool mode: [`Pool`], [`PoolConfig`], [`PoolStats`], [`ClassStats`], [`pool_stats`] (the
//!   `replay_trace` example replays allocation traces in CPython's format through a `Pool`);
//! - files: [`Snapshot::write_json`] / [`Snapshot::read_json`] and the same on [`Timeline`],
//!   [`Snapshot::write_dhat`], `write_pprof` (feature `pprof`), [`Snapshot::folded`] and
//!   `write_flamegraph` (feature `flamegraph`), `Timeline::write_plot` (feature `plot`), the
//!   `heapdelta` command (feature `cli`, module `cli`); errors are [`Error`];
//! - run-time configuration: the `HEAPDELTA` environment variable
//!   (`sites=exact|off|sampled:BYTES`, `depth=N`, `report=PATH`, `every=SECONDS`, `keep=N`,
//!   `signals=on|off`), read at the first allocation; a bad entry prints one line naming its key
//!   and keeps the default.
//!
//! How it is built, and where it departs from the original design: `ARCHITECTURE.md` in the
//! repository.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod callsite;
mod checkpoint;
mod config;
mod diff;
mod error;
mod fork;
mod header;
mod pool;
mod record;
mod report;
mod scope;
#[cfg(target_os = "linux")]
mod signals;
mod sizeclass;
mod snapshot;
mod stats;
mod thread;
mod tracker;

#[doc(hidden)]
pub use callsite::internals as __internals;
#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
pub use report::cli;

pub use callsite::{Frame, Site};
pub use checkpoint::{checkpoint, keep_checkpoints, measure, snapshot, timeline};
pub use diff::{ClassDelta, Delta, Growth, SiteDelta, Survivors, TagDelta, Timeline, TypeDelta};
pub use error::Error;
pub use pool::{pool_stats, replay, ClassStats, Pool, PoolConfig, PoolStats};
pub use report::text::By;
pub use scope::{scope, ScopeGuard};
pub use snapshot::{Snapshot, Totals};
pub use tracker::{is_installed, CallSites, Tracker};
