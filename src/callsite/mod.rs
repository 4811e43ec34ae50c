//! Call sites: capture, interning, sampling and symbolisation of allocation stacks.
//!
//! Hot path (inside `GlobalAlloc`; no lock, no allocation, no panic):
//! [`capture`] → [`intern`] → [`SiteId`], with [`Sampler`] deciding which allocations to record
//! in `CallSites::Sampled` mode and [`scale`] / [`scale_blocks`] weighting them.
//! Report time (under the reentrancy guard): [`resolve`] → [`Site`] (trimmed [`Frame`]s and the
//! allocated type).
// Wired into the tracker by the lead.
#![allow(dead_code, unused_imports)]

mod capture;
mod intern;
mod sampler;
mod site;
mod symbols;
mod typename;

pub(crate) use capture::{capture, capture_hashed, frame_pointers_present, unwound_count};
pub(crate) use intern::{intern, intern_hashed, site_count, stack, SiteId, NO_SITE, OVERFLOW};
pub(crate) use sampler::{scale, scale_blocks, Sampler};
pub use site::{Frame, Site};
pub(crate) use symbols::resolve;

/// Entry points for `benches/capture.rs` only; not part of the API.
#[doc(hidden)]
pub mod bench_api {
    /// See `capture::capture`.
    #[inline(never)]
    pub fn capture(out: &mut [usize], skip: usize) -> usize {
        super::capture(out, skip)
    }

    /// See `capture::unwound_count`.
    pub fn unwound_count() -> u64 {
        super::unwound_count()
    }

    /// See `capture::capture_unwind`.
    #[inline(never)]
    pub fn capture_unwind(out: &mut [usize], skip: usize) -> usize {
        super::capture::capture_unwind(out, skip)
    }

    /// See `capture::capture_hashed`.
    #[inline(never)]
    pub fn capture_hashed(out: &mut [usize], skip: usize) -> (usize, u64) {
        super::capture_hashed(out, skip)
    }

    /// See `intern::intern_hashed`.
    pub fn intern_hashed(stack: &[usize], hash: u64) -> u32 {
        super::intern_hashed(stack, hash)
    }

    /// See `intern::intern`.
    pub fn intern(stack: &[usize]) -> u32 {
        super::intern(stack)
    }
}
