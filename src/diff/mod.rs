//! Diffs: [`Delta`], what changed between two snapshots (`delta.rs`), and [`Timeline`], every
//! checkpoint in order with the growth detector (`timeline.rs`).

mod delta;
mod timeline;

pub(crate) use delta::sort_sites;
pub use delta::{ClassDelta, Delta, SiteDelta, Survivors, TagDelta, TypeDelta};
pub(crate) use timeline::GROWTH_WINDOW;
#[cfg(feature = "plot")]
pub(crate) use timeline::{live_by_site, live_change, not_kept_between, Leaves};
pub use timeline::{Growth, Timeline};
