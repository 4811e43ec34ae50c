//! # heapdelta
//!
//! ```rust,ignore
//! #[global_allocator]
//! static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
//! ```
//!
//! Memory grows every step: heapdelta tells you what is growing and where it is allocated.
#![warn(missing_docs)]

mod pool;
mod sizeclass;

pub use pool::{pool_stats, replay, ClassStats, Pool, PoolConfig, PoolStats};
