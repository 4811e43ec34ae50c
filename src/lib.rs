//! # heapdelta
//!
//! ```rust,ignore
//! #[global_allocator]
//! static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
//! ```
//!
//! Memory grows every step: heapdelta tells you what is growing and where it is allocated.
#![warn(missing_docs)]

mod callsite;
mod pool;
mod sizeclass;

#[doc(hidden)]
pub use callsite::internals as __internals;
pub use callsite::{Frame, Site};
pub use pool::{pool_stats, Pool, PoolConfig, PoolStats};
