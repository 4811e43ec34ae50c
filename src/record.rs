//! What the tracker records at each event: the counting and call-site paths of an allocation and
//! a free, which do not depend on the inner allocator.
//!
//! They are methods of `Recording`, the tracker's settings, rather than of the generic
//! `Tracker<A>`: a generic function is compiled in the crate that names its type, the program's,
//! at the program's optimization level, so in a debug build the capture of every exact call site
//! ran unoptimized whatever `[profile.dev.package.heapdelta]` said (a user trial: 10× the
//! untracked debug build). Here the out-of-line paths are compiled once, in heapdelta, and only
//! the small inlined ones land in the program.

use crate::callsite;
use crate::config;
use crate::header::Header;
use crate::stats::UNIT;
use crate::thread::{self, Ctx, Door};
use crate::tracker::CallSites;

/// A tracker's call-site settings, and the recording paths that follow them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recording {
    /// How call sites are recorded (`Tracker::call_sites`).
    pub(crate) mode: CallSites,
    /// Frames kept per call site (`Tracker::depth`).
    pub(crate) depth: usize,
}

impl Recording {
    /// Records a new block of `size` bytes and returns its header.
    ///
    /// Without call sites (and for the allocations `Sampled` does not pick) this is the inlined
    /// `thread::fast_alloc`, outside scopes; everything else runs out of line, so it does not
    /// weigh on that path.
    #[inline(always)]
    pub(crate) fn on_alloc(&self, size: usize) -> Header {
        let fast = match self.mode {
            CallSites::Off => thread::fast_alloc(size, false, Door::Plain),
            CallSites::Sampled { .. } => thread::fast_alloc(size, true, Door::Plain),
            CallSites::Exact => return self.on_alloc_exact(size),
        };
        match fast {
            Some(h) => h,
            None => self.on_alloc_general(size),
        }
    }

    /// `on_alloc` with exact call sites: out of line, since it calls the capture anyway. The
    /// capture starts from this function's frame whichever path then counts the block, so a call
    /// site gives the same stack at a new peak as below it. (A thread's first event, which it
    /// cannot record directly, captures on the slow path.) Exact sites a `HEAPDELTA` override
    /// asks for, or their depth, are captured here too, from the same frame as the settings in
    /// code would be when the tracker has exact sites (a review: `depth=4` kept 2 of the
    /// program's frames where `depth(4)` keeps 4), and one more in (`on_alloc_general`) when it
    /// has not. The override is looked at only once the tracker's own door is found closed, so
    /// that the path without one is what it was (a load of the override before it cost exact
    /// sites 1.93× → 1.99× `System` on small churn).
    #[inline(never)]
    fn on_alloc_exact(&self, size: usize) -> Header {
        let counted = |captured| match captured {
            Ok(h) => h,
            Err(Some(site)) => self.on_alloc_captured(size, site),
            Err(None) => self.on_alloc_record(size),
        };
        let own = thread::alloc_exact(size, self.depth, false);
        if !matches!(own, Err(None)) || !config::overridden() {
            return counted(own);
        }
        match config::effective(self.mode, self.depth) {
            (CallSites::Exact, depth) => counted(thread::alloc_exact(size, depth, true)),
            // Sites off or sampled, asked for over exact ones.
            (mode, _) => self.on_alloc_overridden(size, mode),
        }
    }

    /// The call-site mode and depth this tracker records with: its own, or those `HEAPDELTA`
    /// overrides them with. (For the out-of-line paths: the inlined ones are closed under an
    /// override, see `thread::State::exact`.)
    #[inline(always)]
    fn settings(&self) -> (CallSites, usize) {
        if config::overridden() {
            config::effective(self.mode, self.depth)
        } else {
            (self.mode, self.depth)
        }
    }

    /// `on_alloc_exact` when the fast path does not apply (a high past the thread's slack, see
    /// `thread::alloc_exact`; site counters not allocated yet): records the block at the site
    /// already captured.
    #[inline(never)]
    fn on_alloc_captured(&self, size: usize, site: u32) -> Header {
        let (mode, depth) = self.settings();
        match thread::fast(|ctx| record_alloc(ctx, size, mode, depth, Some(site))) {
            Some(h) => h,
            None => self.on_alloc_slow(size),
        }
    }

    /// `on_alloc` when the inlined path does not apply. In a scope, this is the same fast path
    /// through the door scopes leave open; the rest is `on_alloc_record`, a function of its own
    /// so that this one stays small.
    #[inline(never)]
    fn on_alloc_general(&self, size: usize) -> Header {
        match self.settings().0 {
            // Exact sites asked for by `HEAPDELTA` over a tracker without them (in tail
            // position: the capture then counts no more of heapdelta's frames than it would
            // have); `on_alloc_exact` sends nothing back here.
            CallSites::Exact if self.mode != CallSites::Exact => self.on_alloc_exact(size),
            mode => self.general_as(size, mode),
        }
    }

    /// `on_alloc_general` for a tracker with exact sites whose sites `HEAPDELTA` turns off or
    /// samples (`mode`), called by `on_alloc_exact`, which has looked the mode up already.
    #[inline(never)]
    fn on_alloc_overridden(&self, size: usize, mode: CallSites) -> Header {
        self.general_as(size, mode)
    }

    /// `on_alloc_general` in call-site mode `mode`, other than exact (the tracker's, or
    /// `HEAPDELTA`'s), which it does not look up again.
    #[inline(always)]
    fn general_as(&self, size: usize, mode: CallSites) -> Header {
        let scoped = match mode {
            CallSites::Off => thread::fast_alloc(size, false, Door::Scoped),
            CallSites::Sampled { .. } => thread::fast_alloc(size, true, Door::Scoped),
            CallSites::Exact => None,
        };
        match scoped {
            Some(h) => h,
            None => self.on_alloc_record(size),
        }
    }

    /// `on_alloc` when no fast path applies: a sampled call site, a high past the thread's slack, a
    /// thread without a slot of its own or inside heapdelta.
    #[inline(never)]
    fn on_alloc_record(&self, size: usize) -> Header {
        let (mode, depth) = self.settings();
        match thread::fast(|ctx| record_alloc(ctx, size, mode, depth, None)) {
            Some(h) => h,
            None => self.on_alloc_slow(size),
        }
    }

    /// `on_alloc` when the thread has no slot of its own yet (its first event, which has
    /// `HEAPDELTA` read), is inside heapdelta, or is exiting.
    #[cold]
    #[inline(never)]
    fn on_alloc_slow(&self, size: usize) -> Header {
        // Before `HEAPDELTA` is read (by a thread's first event, on its way in here): an
        // override that repeats these is dropped.
        config::note_own(self.mode, self.depth);
        thread::record_slow(|ctx| {
            // Looked up here, after a thread's first event has had `HEAPDELTA` read on its way in
            // (claiming the thread's slot), so that the process's first block is recorded as the
            // others are.
            let (mode, depth) = config::for_recording(self.mode, self.depth);
            record_alloc(ctx, size, mode, depth, None)
        })
        .unwrap_or(Header::UNTRACKED)
    }

    /// Records the end of a block of `size` bytes whose header is `h`; returns whether the block
    /// is one of heapdelta's own from `System` (see `Tracker::OWN_FROM_SYSTEM`).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn on_free(&self, h: Header, size: usize) -> bool {
        // Inline only for blocks without a tag, outside scopes, and with a call site only when
        // sites are exact; without one, only for blocks born in the current epoch.
        // `on_free_general` tries the same path for the other exactly counted blocks before
        // anything else.
        let done = match self.mode {
            CallSites::Exact if h.is_plain() && h.site() != 0 => thread::fast_free_sited(h, size),
            _ => thread::fast_free(h, size),
        };
        !done && self.on_free_general(h, size)
    }

    /// `on_free` when the inlined path does not apply. A block with a call site or a scope tag, one
    /// born in an earlier step, or one freed in a scope, takes the same fast path through the door
    /// scopes leave open; the rest is `on_free_record`, a function of its own so that this one
    /// stays small.
    #[inline(never)]
    fn on_free_general(&self, h: Header, size: usize) -> bool {
        !(h.is_exact() && thread::fast_free_exact(h, size)) && self.on_free_record(h, size)
    }

    /// `on_free` when no fast path applies: a sampled, untracked or damaged block, the peak, a
    /// thread without a slot of its own or exiting.
    #[inline(never)]
    fn on_free_record(&self, h: Header, size: usize) -> bool {
        if !h.is_valid() {
            bad_header();
        }
        if !h.is_tracked() {
            return h.is_from_system();
        }
        let record = |ctx: &Ctx| {
            let young = count_free(ctx, h, size);
            if h.site() != 0 {
                self.site_free(ctx, h, size, young);
            }
        };
        if thread::fast(record).is_none() {
            config::note_own(self.mode, self.depth);
            thread::record_always_slow(record);
        }
        false
    }

    /// Records the end of a block that has a call site.
    fn site_free(&self, ctx: &Ctx, h: Header, size: usize, young: bool) {
        let (units, bytes) = if h.is_sampled() {
            site_weight(size, true, config::effective(self.mode, self.depth).0)
        } else {
            (UNIT, size as u64)
        };
        ctx.slot
            .site_free(h.site(), units, bytes, young, ctx.shared);
    }
}

/// Counts the end of a block of `size` bytes; returns whether it was born in the current epoch.
#[inline(always)]
fn count_free(ctx: &Ctx, h: Header, size: usize) -> bool {
    let young = h.epoch() == ctx.slot.epoch();
    ctx.slot.free(size, h.tag(), young, ctx.shared);
    ctx.note_free(size);
    young
}

/// Counts a new block of `size` bytes and records its call site as `mode` says (with exact sites,
/// at `captured` when the caller already captured it); returns its header.
#[inline(always)]
fn record_alloc(
    ctx: &Ctx,
    size: usize,
    mode: CallSites,
    depth: usize,
    captured: Option<u32>,
) -> Header {
    let tag = ctx.tag();
    ctx.slot.alloc(size, tag, ctx.shared);
    let (site, sampled) = match (mode, captured) {
        (CallSites::Off, _) => (0, false),
        (CallSites::Exact, Some(site)) => (count_at_site(ctx, site, size), false),
        (CallSites::Exact, None) => (record_site(ctx, size, false, mode, depth), false),
        (CallSites::Sampled { mean_bytes }, _) => {
            if ctx.sample(size, mean_bytes) {
                (record_site(ctx, size, true, mode, depth), true)
            } else {
                (0, false)
            }
        }
    };
    ctx.note_alloc(size);
    Header::tracked(site, ctx.slot.epoch(), tag, sampled)
}

/// Captures the call site of a new block and counts the block there; returns the site (0 when
/// none could be captured).
#[inline(never)]
fn record_site(ctx: &Ctx, size: usize, sampled: bool, mode: CallSites, depth: usize) -> u32 {
    let site = ctx.capture_site(depth);
    if site != 0 {
        let (units, bytes) = site_weight(size, sampled, mode);
        ctx.slot.site_alloc(site, units, bytes, ctx.shared);
    }
    site
}

/// Counts a new block of `size` bytes with exact weight at `site` (captured by the caller; 0:
/// none); returns the site.
fn count_at_site(ctx: &Ctx, site: u32, size: usize) -> u32 {
    if site != 0 {
        ctx.slot.site_alloc(site, UNIT, size as u64, ctx.shared);
    }
    site
}

/// The call-site weight of a block: (blocks in `UNIT`s, bytes); sampled blocks stand for the
/// unsampled ones around them.
#[inline]
fn site_weight(size: usize, sampled: bool, mode: CallSites) -> (u64, u64) {
    match (sampled, mode) {
        (true, CallSites::Sampled { mean_bytes }) => {
            let size = size as u64;
            let units = (callsite::scale_blocks(size, mean_bytes) * UNIT as f64).round() as u64;
            (units, callsite::scale(size, mean_bytes).round() as u64)
        }
        _ => (UNIT, size as u64),
    }
}

#[cold]
pub(crate) fn bad_header() -> ! {
    const MSG: &[u8] = b"heapdelta: a block freed through the Tracker has no valid header \
(a pointer the Tracker did not allocate, or memory overwritten before the block); aborting\n";
    config::write_stderr(MSG);
    std::process::abort()
}
