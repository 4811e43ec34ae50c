//! The per-block header the tracker writes in front of every block it hands out.
//!
//! The header is 8 bytes and sits immediately before the user's pointer. The inner allocator is
//! asked for `prefix + size` bytes, where `prefix` is 8 for alignments up to 8 and the alignment
//! itself (at least 16) above that, so the user's pointer keeps the alignment the caller asked for.
//! Both `prefix` and the inner layout are recomputed from the caller's `Layout` on `dealloc` and
//! `realloc`, so nothing about the layout needs to be stored.

use std::alloc::Layout;

/// Bytes taken by the header itself.
pub const HEADER_SIZE: usize = 8;

const MAGIC: u8 = 0xA0;
const MAGIC_MASK: u8 = 0xF0;
/// The block is counted in the statistics (blocks allocated while heapdelta itself was running are
/// not).
pub const TRACKED: u8 = 0x01;
/// The block was chosen by the sampler; its call-site figures carry a weight.
pub const SAMPLED: u8 = 0x02;
/// The block is heapdelta's own, from `System` rather than the inner allocator (see
/// `Tracker::OWN_FROM_SYSTEM`); never with `TRACKED`.
pub const FROM_SYSTEM: u8 = 0x04;
const FLAGS_SHIFT: u32 = 32;
const TAG_SHIFT: u32 = 40;
/// Bits of the scope tag: tags run from 0 (none) to `MAX_TAGS - 1`.
const TAG_BITS: u32 = 6;
const SITE_SHIFT: u32 = TAG_SHIFT + TAG_BITS;
/// The flags of a block counted with exact weights, in place.
const EXACT: u64 = ((MAGIC | TRACKED) as u64) << FLAGS_SHIFT;

const _: () = assert!(crate::stats::MAX_TAGS <= 1 << TAG_BITS);
const _: () = assert!((crate::callsite::LAST_SITE as u64) < 1 << (64 - SITE_SHIFT));

/// What the tracker remembers about a live block, in one word: the checkpoint epoch the block was
/// born in in bits 0–31, the flags in 32–39, the scope tag in 40–45 and the call site in 46–63.
/// The two tests the fast paths make are then cheap: born in the current epoch is a 32-bit
/// compare, and an exact block with neither tag nor site is a shift, a mask and a compare.
/// (The epoch counter is 32 bits too, so a block is taken for one born in the current step only
/// when it is 2^32 checkpoints old.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct Header(u64);

impl Header {
    /// A header for a block that is not counted.
    pub const UNTRACKED: Header = Header((MAGIC as u64) << FLAGS_SHIFT);

    /// A header for a block of heapdelta's own that `System` served (not counted).
    pub const OWN_FROM_SYSTEM: Header = Header(((MAGIC | FROM_SYSTEM) as u64) << FLAGS_SHIFT);

    /// A header for a counted block born in `epoch`.
    pub fn tracked(site: u32, epoch: u32, tag: u8, sampled: bool) -> Header {
        let flags = MAGIC | TRACKED | if sampled { SAMPLED } else { 0 };
        Header((flags as u64) << FLAGS_SHIFT | epoch as u64).with(site, tag)
    }

    /// The header of a block counted with exact weights, without a call site or a tag, born in
    /// `epoch`.
    #[inline(always)]
    pub fn exact(epoch: u32) -> Header {
        Header(EXACT | epoch as u64)
    }

    /// The header whose bits are `bits` (from `to_bits`).
    #[inline(always)]
    pub fn from_bits(bits: u64) -> Header {
        Header(bits)
    }

    /// The header's bits, as written in front of a block.
    pub fn to_bits(self) -> u64 {
        self.0
    }

    /// This header with a call site and a tag (`self` has neither). Sites run up to
    /// `callsite::LAST_SITE` and tags below `MAX_TAGS`, which the fields hold (asserted at
    /// compile time above); the tag is masked all the same, so that no value spills into the site.
    #[inline(always)]
    pub fn with(self, site: u32, tag: u8) -> Header {
        let tag = tag as u64 & ((1 << TAG_BITS) - 1);
        Header(self.0 | (site as u64) << SITE_SHIFT | tag << TAG_SHIFT)
    }

    /// Interned call site (0: none recorded).
    #[inline(always)]
    pub fn site(self) -> u32 {
        (self.0 >> SITE_SHIFT) as u32
    }

    /// The checkpoint epoch the block was born in.
    #[inline(always)]
    pub fn epoch(self) -> u32 {
        self.0 as u32
    }

    /// Scope tag index (0: no tag).
    #[inline(always)]
    pub fn tag(self) -> u8 {
        (self.0 >> TAG_SHIFT) as u8 & ((1 << TAG_BITS) - 1)
    }

    fn flags(self) -> u8 {
        (self.0 >> FLAGS_SHIFT) as u8
    }

    /// Whether the block is counted with exact weights (not sampled), has no scope tag and valid
    /// magic bits: with a call site, the blocks whose frees the inlined sited path handles.
    #[inline(always)]
    pub fn is_plain(self) -> bool {
        (self.0 >> FLAGS_SHIFT) & ((1 << (SITE_SHIFT - FLAGS_SHIFT)) - 1) == EXACT >> FLAGS_SHIFT
    }

    /// Whether the block is counted with exact weights (not sampled) and has valid magic bits:
    /// the blocks whose frees the out-of-line fast path handles, whatever their tag and site.
    #[inline(always)]
    pub fn is_exact(self) -> bool {
        self.flags() == MAGIC | TRACKED
    }

    /// Whether the block is counted.
    pub fn is_tracked(self) -> bool {
        self.flags() & TRACKED != 0
    }

    /// Whether the block is one of heapdelta's own that `System` served.
    pub fn is_from_system(self) -> bool {
        self.flags() & FROM_SYSTEM != 0
    }

    /// Whether the block's call-site figures are sampled estimates.
    pub fn is_sampled(self) -> bool {
        self.flags() & SAMPLED != 0
    }

    /// Whether the header carries the tracker's magic bits (a foreign or overwritten pointer does
    /// not, with high probability).
    pub fn is_valid(self) -> bool {
        self.flags() & MAGIC_MASK == MAGIC
    }

    /// Writes the header just before `user`.
    ///
    /// # Safety
    /// `user` must be a block returned by the tracker, so the 8 bytes before it belong to it.
    #[cfg_attr(not(debug_assertions), inline)]
    pub unsafe fn write(self, user: *mut u8) {
        // SAFETY: the caller guarantees the 8 bytes before `user` are the block's prefix; the
        // write is unaligned-safe.
        unsafe { (user.sub(HEADER_SIZE) as *mut u64).write_unaligned(self.to_bits()) }
    }

    /// Reads the header just before `user`.
    ///
    /// # Safety
    /// `user` must be a block returned by the tracker.
    #[cfg_attr(not(debug_assertions), inline)]
    pub unsafe fn read(user: *const u8) -> Header {
        // SAFETY: as for `write`.
        Header::from_bits(unsafe { (user.sub(HEADER_SIZE) as *const u64).read_unaligned() })
    }
}

/// Bytes in front of the user's block: the header, padded to keep the requested alignment.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn prefix(align: usize) -> usize {
    // Alignments are powers of two: above the header's, they are at least 16. A maximum, not a
    // branch, so that a free of a block of unknown alignment takes no branch here.
    align.max(HEADER_SIZE)
}

/// The layout to ask the inner allocator for, or `None` when the size cannot be represented.
#[cfg_attr(not(debug_assertions), inline)]
pub fn outer_layout(layout: Layout) -> Option<Layout> {
    outer_for(layout.size(), layout.align())
}

/// The inner layout for a block of `size` bytes aligned to `align` (a power of two, as every
/// `Layout`'s alignment is).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn outer_for(size: usize, align: usize) -> Option<Layout> {
    let prefix = prefix(align);
    // `prefix` is a power of two >= `align`; a `Layout` needs `total` rounded up to it to fit in
    // an isize, which this bound guarantees without further checks. Checked arithmetic: valid
    // layouts have alignments up to 2^63, for which the bound itself would overflow.
    let limit = prefix
        .checked_mul(2)
        .and_then(|twice| (isize::MAX as usize).checked_sub(twice))?;
    if size > limit {
        return None;
    }
    // SAFETY: `prefix` is a non-zero power of two (8 or `align` >= 16), and `size + prefix`
    // rounded up to `prefix` is at most `isize::MAX` by the check above.
    Some(unsafe { Layout::from_size_align_unchecked(size + prefix, prefix) })
}

/// The inner layout of a block of `size` bytes the tracker handed out with `prefix` (the
/// `prefix` of its alignment).
///
/// # Safety
/// `outer_for(size, prefix)` must be `Some`, as it was when the block was allocated.
#[cfg_attr(not(debug_assertions), inline(always))]
pub unsafe fn outer_of_allocated(size: usize, prefix: usize) -> Layout {
    // SAFETY: the caller guarantees `outer_for` accepted this size and prefix, and it builds
    // exactly this layout (`prefix(prefix) == prefix`).
    unsafe { Layout::from_size_align_unchecked(size + prefix, prefix) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::LAST_SITE;

    #[test]
    fn header_is_eight_bytes() {
        assert_eq!(std::mem::size_of::<Header>(), HEADER_SIZE);
    }

    #[test]
    fn prefix_keeps_the_requested_alignment() {
        for shift in 0..=12 {
            let align = 1usize << shift;
            let p = prefix(align);
            assert!(p >= HEADER_SIZE);
            assert_eq!(p % align, 0, "align {align}");
        }
    }

    #[test]
    fn impossible_sizes_have_no_outer_layout() {
        assert!(outer_for(usize::MAX, 1).is_none());
        assert!(outer_for(isize::MAX as usize, 4096).is_none());
        assert!(outer_for(100, 64).is_some());
    }

    #[test]
    fn the_largest_alignments_have_no_outer_layout_rather_than_an_overflow() {
        assert!(outer_for(1, 1 << 62).is_none());
        assert!(outer_for(1, 1 << 63).is_none());
        assert!(outer_for(1, 1 << 61).is_some());
    }

    #[test]
    fn untracked_header_is_valid_but_not_counted() {
        let h = Header::UNTRACKED;
        assert!(h.is_valid());
        assert!(!h.is_tracked());
        let t = Header::tracked(7, 7, 3, true);
        assert!(t.is_valid() && t.is_tracked() && t.is_sampled());
    }

    #[test]
    fn only_the_header_of_heapdeltas_own_system_blocks_says_it_is_from_system() {
        let own = Header::OWN_FROM_SYSTEM;
        assert!(own.is_valid() && !own.is_tracked() && own.is_from_system());
        assert!(!own.is_exact() && !own.is_plain());
        assert!(!Header::UNTRACKED.is_from_system());
        assert!(!Header::tracked(LAST_SITE, u32::MAX, 63, true).is_from_system());
    }

    #[test]
    fn every_field_reads_back_what_was_written() {
        let h = Header::tracked(LAST_SITE, 0x8765_4321, 63, false);
        assert_eq!((h.site(), h.epoch(), h.tag()), (LAST_SITE, 0x8765_4321, 63));
        assert!(h.is_exact() && !h.is_plain());
        let h = Header::tracked(1, 0, 1, true);
        assert_eq!((h.site(), h.epoch(), h.tag()), (1, 0, 1));
    }

    #[test]
    fn a_tag_beyond_its_field_does_not_spill_into_the_site() {
        let h = Header::exact(7).with(4, 64 + 3);
        assert_eq!((h.site(), h.tag(), h.epoch()), (4, 3, 7));
    }

    #[test]
    fn a_block_born_65536_checkpoints_ago_is_not_taken_for_a_young_one() {
        let old = Header::exact(5);
        let now = Header::exact(5 + 65_536);
        assert_ne!(old.epoch(), now.epoch());
        assert_ne!(old, now);
    }

    #[test]
    fn an_exact_header_is_plain_and_names_its_epoch() {
        let bare = Header::exact(u32::MAX);
        assert!(bare.is_plain() && bare.is_exact() && bare.is_tracked() && !bare.is_sampled());
        assert_eq!(bare, Header::tracked(0, u32::MAX, 0, false));
        assert_eq!((bare.site(), bare.epoch(), bare.tag()), (0, u32::MAX, 0));
        assert!(bare.with(1, 0).is_plain());
        assert!(!bare.with(0, 1).is_plain());
        assert!(!Header::tracked(0, 3, 0, true).is_plain());
    }
}
