//! Call sites: capture, interning, sampling and symbolisation of allocation stacks.
//!
//! Hot path (inside `GlobalAlloc`; no lock, no allocation, no panic):
//! [`capture`] → [`intern`] → [`SiteId`], with [`Sampler`] deciding which allocations to record
//! in `CallSites::Sampled` mode and [`scale`] / [`scale_blocks`] weighting them.
//! Report time (under the reentrancy guard): [`resolve`] → [`Site`] (trimmed [`Frame`]s and the
//! allocated type).

mod buffer;
mod capture;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod cfi;
mod intern;
mod loaded;
mod sampler;
pub(crate) mod site;
pub(crate) mod symbols;
mod typename;

pub(crate) use buffer::{Replayed, StackBuffer, STACK_WORDS};
pub(crate) use capture::{frame_register_here, start_from, unwind_start_here, UnwindStart};
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub(crate) use cfi::{lock_for_fork as lock_rules_for_fork, unlock_after_fork as unlock_rules};
pub(crate) use intern::{SiteId, LAST_SITE};
pub(crate) use sampler::{scale, scale_blocks, Sampler};
pub use site::{Frame, Site};
pub(crate) use symbols::resolve;

/// Entry points for heapdelta's own benches and integration tests only; not part of the API.
/// Re-exports rather than wrappers: a wrapper would add a frame to every capture.
#[doc(hidden)]
pub mod internals {
    pub use super::buffer::{live_buffers, mapped_buffers};
    pub use super::capture::{
        capture, capture_general_unwind, capture_hashed, capture_unwind, general_unwind_count,
        unwound_count,
    };
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    pub use super::cfi::{forget_rules as forget_unwind_rules, rule_lookups};
    pub use super::intern::{intern, intern_hashed};
    pub use super::symbols::resolve;
    /// Runs a closure as heapdelta's own work (its allocations not counted).
    pub use crate::thread::untracked;

    /// Whether `HEAPDELTA` overrides the tracker's call-site settings (one that repeats them is
    /// dropped when it is read).
    pub fn settings_overridden() -> bool {
        crate::config::overridden()
    }
}
