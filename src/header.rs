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

/// What the tracker remembers about a live block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Header {
    /// Interned call site (0: none recorded).
    pub site: u32,
    /// Low 16 bits of the checkpoint epoch the block was born in.
    pub epoch: u16,
    /// Scope tag index (0: no tag).
    pub tag: u8,
    flags: u8,
}

impl Header {
    /// A header for a block that is not counted.
    pub const UNTRACKED: Header = Header {
        site: 0,
        epoch: 0,
        tag: 0,
        flags: MAGIC,
    };

    /// A header for a counted block.
    pub fn tracked(site: u32, epoch: u32, tag: u8, sampled: bool) -> Header {
        let flags = MAGIC | TRACKED | if sampled { SAMPLED } else { 0 };
        Header {
            site,
            epoch: epoch as u16,
            tag,
            flags,
        }
    }

    /// Whether the block is counted with exact weights (not sampled), has no scope tag and valid
    /// magic bits: the blocks whose frees the fast path handles.
    #[inline(always)]
    pub fn is_plain(&self) -> bool {
        self.tag == 0 && self.is_exact()
    }

    /// Whether the block is counted with exact weights (not sampled) and has valid magic bits:
    /// the blocks whose frees the out-of-line fast path handles, whatever their tag and site.
    #[inline(always)]
    pub fn is_exact(&self) -> bool {
        self.flags == MAGIC | TRACKED
    }

    /// Whether the block is counted.
    pub fn is_tracked(&self) -> bool {
        self.flags & TRACKED != 0
    }

    /// Whether the block's call-site figures are sampled estimates.
    pub fn is_sampled(&self) -> bool {
        self.flags & SAMPLED != 0
    }

    /// Whether the header carries the tracker's magic bits (a foreign or overwritten pointer does
    /// not, with high probability).
    pub fn is_valid(&self) -> bool {
        self.flags & MAGIC_MASK == MAGIC
    }

    /// Writes the header just before `user`.
    ///
    /// # Safety
    /// `user` must be a block returned by the tracker, so the 8 bytes before it belong to it.
    #[inline]
    pub unsafe fn write(self, user: *mut u8) {
        // SAFETY: the caller guarantees the 8 bytes before `user` are the block's prefix; the
        // write is unaligned-safe.
        unsafe { (user.sub(HEADER_SIZE) as *mut Header).write_unaligned(self) }
    }

    /// Reads the header just before `user`.
    ///
    /// # Safety
    /// `user` must be a block returned by the tracker.
    #[inline]
    pub unsafe fn read(user: *const u8) -> Header {
        // SAFETY: as for `write`.
        unsafe { (user.sub(HEADER_SIZE) as *const Header).read_unaligned() }
    }
}

/// Bytes in front of the user's block: the header, padded to keep the requested alignment.
#[inline(always)]
pub fn prefix(align: usize) -> usize {
    if align <= HEADER_SIZE {
        HEADER_SIZE
    } else {
        align.max(16)
    }
}

/// The layout to ask the inner allocator for, or `None` when the size cannot be represented.
#[inline]
pub fn outer_layout(layout: Layout) -> Option<Layout> {
    outer_for(layout.size(), layout.align())
}

/// The inner layout for a block of `size` bytes aligned to `align` (a power of two, as every
/// `Layout`'s alignment is).
#[inline(always)]
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
#[inline(always)]
pub unsafe fn outer_of_allocated(size: usize, prefix: usize) -> Layout {
    // SAFETY: the caller guarantees `outer_for` accepted this size and prefix, and it builds
    // exactly this layout (`prefix(prefix) == prefix`).
    unsafe { Layout::from_size_align_unchecked(size + prefix, prefix) }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let t = Header::tracked(7, 70_000, 3, true);
        assert!(t.is_valid() && t.is_tracked() && t.is_sampled());
        assert_eq!(t.epoch, (70_000u32 as u16));
    }
}
