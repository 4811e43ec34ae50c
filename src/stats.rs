//! Counters: one block of counters per thread ("slot"), summed when a snapshot is taken.
//!
//! Each thread claims a slot on its first allocation and is then the only writer of that slot, so
//! a counter update is a plain load and store: no shared cache line is written per allocation.
//! Slots are never cleared; a thread that exits releases its slot and the next thread to claim it
//! keeps adding to the same monotonic counters. Slot 0 is shared: it is used when every slot is
//! taken and by threads whose thread-local state is already destroyed, and is updated with atomic
//! read-modify-writes.
//!
//! Every counter is monotonic (allocations and frees are counted separately). For each counter
//! group (a size class, a tag, a chunk of sites) a reader loads the "free" counters of every slot
//! before the "alloc" counters. A free can only be observed after the allocation of the same block
//! (same class, tag and site) happened, so live figures computed this way are never negative, even
//! while other threads run; they can only include a few operations that other threads completed
//! during those few loads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

use serde::{Deserialize, Serialize};

use crate::header::Header;
use crate::sizeclass::{class_of, class_size, NUM_CLASSES};

/// Thread slots, slot 0 being the shared one.
pub const MAX_SLOTS: usize = 256;
/// Scope tags that can be told apart (index 0 means "no tag").
pub const MAX_TAGS: usize = 64;
/// Sites per lazily allocated chunk of a slot's site table.
const SITE_CHUNK: usize = 1024;
/// Chunks per slot: the site table holds this many × `SITE_CHUNK` ids.
const SITE_DIR: usize = 1024;
/// One block in fixed point, so sampled estimates can carry fractional weights.
pub const UNIT: u64 = 1 << 16;
/// A thread folds its running live-bytes change into the global figure used for the peak every
/// time the change reaches this size.
pub const FLUSH_BYTES: i64 = 256 * 1024;

/// A monotonic counter with a single writer (or atomic adds in the shared slot).
struct Cnt(AtomicU64);

impl Cnt {
    const fn new() -> Self {
        Cnt(AtomicU64::new(0))
    }

    #[inline]
    fn add(&self, v: u64, shared: bool) {
        if shared {
            self.0.fetch_add(v, Ordering::Release);
        } else {
            let old = self.0.load(Ordering::Relaxed);
            self.0.store(old.wrapping_add(v), Ordering::Release);
        }
    }

    #[inline]
    fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

struct Quad {
    alloc_blocks: Cnt,
    alloc_bytes: Cnt,
    free_blocks: Cnt,
    free_bytes: Cnt,
}

impl Quad {
    const fn new() -> Self {
        Quad {
            alloc_blocks: Cnt::new(),
            alloc_bytes: Cnt::new(),
            free_blocks: Cnt::new(),
            free_bytes: Cnt::new(),
        }
    }
}

/// Plain counts read from the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Blocks allocated.
    pub alloc_blocks: u64,
    /// Bytes allocated.
    pub alloc_bytes: u64,
    /// Blocks freed.
    pub free_blocks: u64,
    /// Bytes freed.
    pub free_bytes: u64,
}

impl Counts {
    /// Live blocks (never negative when read as `stats` reads them).
    pub fn live_blocks(&self) -> u64 {
        self.alloc_blocks.wrapping_sub(self.free_blocks)
    }

    /// Live bytes.
    pub fn live_bytes(&self) -> u64 {
        self.alloc_bytes.wrapping_sub(self.free_bytes)
    }

    /// Whether nothing was ever counted.
    pub fn is_zero(&self) -> bool {
        *self == Counts::default()
    }

    /// Adds `other` to `self`, saturating: for counters of several sites read from a file, where
    /// each is bounded but their sum is not (a fuzz review's two sites of 8 EiB wrapped to a fall).
    pub fn add_saturating(&mut self, other: &Counts) {
        self.alloc_blocks = self.alloc_blocks.saturating_add(other.alloc_blocks);
        self.alloc_bytes = self.alloc_bytes.saturating_add(other.alloc_bytes);
        self.free_blocks = self.free_blocks.saturating_add(other.free_blocks);
        self.free_bytes = self.free_bytes.saturating_add(other.free_bytes);
    }

    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &Counts) {
        self.alloc_blocks = self.alloc_blocks.wrapping_add(other.alloc_blocks);
        self.alloc_bytes = self.alloc_bytes.wrapping_add(other.alloc_bytes);
        self.free_blocks = self.free_blocks.wrapping_add(other.free_blocks);
        self.free_bytes = self.free_bytes.wrapping_add(other.free_bytes);
    }
}

/// Requests of up to this many bytes (a page) are counted by exact size, with one add per event;
/// larger ones by size class, with two. The test that picks one or the other is a branch on the
/// size, and a mispredicted branch costs more than the counting itself: with exact sizes up to
/// 512 bytes only, the `growth` bench (temporaries of 8 B to 1 KiB in no order) ran at 1.28×
/// `System` with sites off, against 1.17× with this bound, and the small churn was unchanged.
/// Most programs' requests are below a page, where the branch always goes one way.
const EXACT_MAX: usize = 4096;

/// Counters for the requests counted by exact size, one array per kind so that the two an allocation or a
/// free touches pack eight sizes to a cache line: the bytes they stand for are the size times the
/// count, so one add per event keeps both blocks and bytes.
struct SizeCnts {
    alloc: [Cnt; EXACT_MAX + 1],
    free: [Cnt; EXACT_MAX + 1],
    /// Frees of blocks born in an earlier epoch than the one they were freed in. Most blocks die
    /// young, so counting the old ones (young = all − old) keeps the usual free to one add.
    old_free: [Cnt; EXACT_MAX + 1],
}

impl SizeCnts {
    const fn new() -> Self {
        SizeCnts {
            alloc: [const { Cnt::new() }; EXACT_MAX + 1],
            free: [const { Cnt::new() }; EXACT_MAX + 1],
            old_free: [const { Cnt::new() }; EXACT_MAX + 1],
        }
    }
}

/// Per-site counters; block counts are in `UNIT`s so sampled weights can be fractional.
pub struct SiteCnt {
    counts: Quad,
    /// Frees of blocks born in an earlier epoch (young = all − old, as for `SizeCnt`).
    old_free_units: Cnt,
    old_free_bytes: Cnt,
}

impl SiteCnt {
    /// Counts an allocation with weight `units` (blocks × `UNIT`) and `bytes`; `s` in the shared
    /// slot.
    #[inline(always)]
    pub fn alloc(&self, units: u64, bytes: u64, s: bool) {
        self.counts.alloc_blocks.add(units, s);
        self.counts.alloc_bytes.add(bytes, s);
    }

    /// Counts a free with the weight its allocation had; `young` when the block was born in the
    /// current epoch.
    #[inline(always)]
    pub fn free(&self, units: u64, bytes: u64, young: bool, s: bool) {
        // The frees before the old frees, which `read_site_chunk` loads in the opposite order.
        self.counts.free_blocks.add(units, s);
        self.counts.free_bytes.add(bytes, s);
        if !young {
            self.old_free_units.add(units, s);
            self.old_free_bytes.add(bytes, s);
        }
    }
}

type SiteChunk = [SiteCnt; SITE_CHUNK];

/// Counts for one call site as read by a snapshot (block figures in `UNIT`s).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SiteCounts {
    /// Allocations and frees (blocks in `UNIT`s).
    pub counts: Counts,
    /// Frees of blocks born in the epoch they were freed in (blocks in `UNIT`s).
    pub young_free: (u64, u64),
}

/// One thread's counters.
pub struct Slot {
    /// The bits of `Header::exact` for the current checkpoint epoch, the header of a block without
    /// a call site or a tag born now: kept in every slot in use (see `advance_epoch`), so the fast
    /// paths read it next to the thread's counters instead of building it from a global. Zero (so
    /// that `SLOTS` stays in `.bss`) until the slot is first in use: claimed, or, for the shared
    /// slot 0, at the first checkpoint (zero is the header of no block, and its epoch bits are
    /// those of epoch 0, the current one until then).
    bare: AtomicU64,
    claimed: AtomicBool,
    /// Requests of up to `EXACT_MAX` bytes, by exact size.
    sizes: SizeCnts,
    /// Larger requests, by size class (the classes of smaller ones stay zero).
    classes: [Quad; NUM_CLASSES],
    tags: [Quad; MAX_TAGS],
    young_free_blocks: Cnt,
    young_free_bytes: Cnt,
    sites: [AtomicPtr<SiteChunk>; SITE_DIR],
}

impl Slot {
    const fn new() -> Self {
        Slot {
            bare: AtomicU64::new(0),
            claimed: AtomicBool::new(false),
            sizes: SizeCnts::new(),
            classes: [const { Quad::new() }; NUM_CLASSES],
            tags: [const { Quad::new() }; MAX_TAGS],
            young_free_blocks: Cnt::new(),
            young_free_bytes: Cnt::new(),
            sites: [const { AtomicPtr::new(ptr::null_mut()) }; SITE_DIR],
        }
    }

    /// The header of a block without a call site or a tag born now (see `bare`).
    #[inline(always)]
    pub fn bare(&self) -> Header {
        Header::from_bits(self.bare.load(Ordering::Relaxed))
    }

    /// The current checkpoint epoch, as a header keeps it.
    #[inline(always)]
    pub fn epoch(&self) -> u32 {
        self.bare().epoch()
    }

    fn set_epoch(&self, epoch: u32) {
        let bare = Header::exact(epoch);
        self.bare.store(bare.to_bits(), Ordering::SeqCst);
    }

    /// Counts an allocation of `size` bytes under `tag`; `s` when this is the shared slot (atomic
    /// adds).
    #[inline(always)]
    pub fn alloc(&self, size: usize, tag: u8, s: bool) {
        match self.sizes.alloc.get(size) {
            Some(c) => c.add(1, s),
            None => self.alloc_large(size, s),
        }
        if tag != 0 {
            self.tag_alloc(tag, size, s);
        }
    }

    /// Counts a free; `young` when the block was born in the current epoch.
    #[inline(always)]
    pub fn free(&self, size: usize, tag: u8, young: bool, s: bool) {
        match self.sizes.free.get(size) {
            Some(c) => {
                // `free` before `old_free`, which `read` loads in the opposite order.
                c.add(1, s);
                if let (false, Some(old)) = (young, self.sizes.old_free.get(size)) {
                    old.add(1, s);
                }
            }
            None => self.free_large(size, young, s),
        }
        if tag != 0 {
            self.tag_free(tag, size, s);
        }
    }

    #[inline(always)]
    fn alloc_large(&self, size: usize, s: bool) {
        if let Some(q) = self.classes.get(class_of(size)) {
            q.alloc_blocks.add(1, s);
            q.alloc_bytes.add(size as u64, s);
        }
    }

    #[inline(always)]
    fn free_large(&self, size: usize, young: bool, s: bool) {
        if let Some(q) = self.classes.get(class_of(size)) {
            q.free_blocks.add(1, s);
            q.free_bytes.add(size as u64, s);
        }
        if young {
            self.young_free_blocks.add(1, s);
            self.young_free_bytes.add(size as u64, s);
        }
    }

    #[inline(always)]
    fn tag_alloc(&self, tag: u8, size: usize, s: bool) {
        if let Some(q) = self.tags.get(tag as usize) {
            q.alloc_blocks.add(1, s);
            q.alloc_bytes.add(size as u64, s);
        }
    }

    #[inline(always)]
    fn tag_free(&self, tag: u8, size: usize, s: bool) {
        if let Some(q) = self.tags.get(tag as usize) {
            q.free_blocks.add(1, s);
            q.free_bytes.add(size as u64, s);
        }
    }

    /// Counts an allocation at `site` with weight `units` (blocks × `UNIT`) and `bytes`.
    #[inline]
    pub fn site_alloc(&self, site: u32, units: u64, bytes: u64, s: bool) {
        if let Some(c) = self.site(site) {
            c.alloc(units, bytes, s);
        }
    }

    /// Counts a free at `site` with the same weight its allocation had.
    #[inline]
    pub fn site_free(&self, site: u32, units: u64, bytes: u64, young: bool, s: bool) {
        if let Some(c) = self.site(site) {
            c.free(units, bytes, young, s);
        }
    }

    /// The counters of `site` in this slot, allocating the chunk that holds them on first use
    /// (from `System`, never through the global allocator). `None` when the id is out of range or
    /// memory is exhausted: that site's figures then miss this event, the totals do not.
    #[inline]
    fn site(&self, site: u32) -> Option<&SiteCnt> {
        match self.site_ready(site) {
            Some(c) => Some(c),
            None => {
                let chunk = new_chunk(self.sites.get(site as usize / SITE_CHUNK)?)?;
                // SAFETY: `new_chunk` returns a published, zero-initialised `SiteChunk` that is
                // never freed, and `site % SITE_CHUNK < SITE_CHUNK`.
                unsafe { (*chunk).get(site as usize % SITE_CHUNK) }
            }
        }
    }

    /// The counters of `site` in this slot if the chunk that holds them exists (never allocates).
    #[inline(always)]
    pub fn site_ready(&self, site: u32) -> Option<&SiteCnt> {
        let (hi, lo) = (site as usize / SITE_CHUNK, site as usize % SITE_CHUNK);
        let chunk = self.sites.get(hi)?.load(Ordering::Acquire);
        if chunk.is_null() {
            return None;
        }
        // SAFETY: a non-null entry points to a zero-initialised `SiteChunk` that is never freed
        // (slots live for the whole process) and `lo < SITE_CHUNK`.
        unsafe { (*chunk).get(lo) }
    }

    fn read_site_chunk(&self, hi: usize, out: &mut Vec<SiteCounts>, frees: bool) {
        let Some(entry) = self.sites.get(hi) else {
            return;
        };
        let chunk = entry.load(Ordering::Acquire);
        if chunk.is_null() {
            return;
        }
        // SAFETY: as in `site`: a published chunk is initialised and lives forever.
        let chunk = unsafe { &*chunk };
        let base = hi * SITE_CHUNK;
        if out.len() < base + SITE_CHUNK {
            out.resize(base + SITE_CHUNK, SiteCounts::default());
        }
        for (o, c) in out[base..].iter_mut().zip(chunk.iter()) {
            if frees {
                // Old frees first: each was counted among the frees before, so young ones
                // (frees − old frees) are never negative.
                let old = (c.old_free_units.get(), c.old_free_bytes.get());
                let free = (c.counts.free_blocks.get(), c.counts.free_bytes.get());
                o.counts.free_blocks += free.0;
                o.counts.free_bytes += free.1;
                o.young_free.0 += free.0.wrapping_sub(old.0);
                o.young_free.1 += free.1.wrapping_sub(old.1);
            } else {
                o.counts.alloc_blocks += c.counts.alloc_blocks.get();
                o.counts.alloc_bytes += c.counts.alloc_bytes.get();
            }
        }
    }
}

#[cold]
fn new_chunk(entry: &AtomicPtr<SiteChunk>) -> Option<*mut SiteChunk> {
    let layout = Layout::new::<SiteChunk>();
    // SAFETY: the layout has a non-zero size. All-zero bytes are a valid `SiteChunk` (atomics).
    let fresh = unsafe { System.alloc_zeroed(layout) } as *mut SiteChunk;
    if fresh.is_null() {
        return None;
    }
    match entry.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Some(fresh),
        Err(existing) => {
            // SAFETY: `fresh` came from `System.alloc_zeroed(layout)` and was never published.
            unsafe { System.dealloc(fresh as *mut u8, layout) };
            Some(existing)
        }
    }
}

/// All zero, so the array lives in `.bss` and costs nothing until slots are used.
static SLOTS: [Slot; MAX_SLOTS] = [const { Slot::new() }; MAX_SLOTS];
/// One past the highest slot index ever claimed.
static HIGH: AtomicUsize = AtomicUsize::new(1);

/// The shared slot.
pub fn shared_slot() -> &'static Slot {
    &SLOTS[0]
}

/// Whether `slot` is the shared slot, whose counters take atomic adds.
pub fn is_shared(slot: &Slot) -> bool {
    ptr::eq(slot, &SLOTS[0])
}

/// Claims a free slot for the calling thread, or the shared one when all are taken.
pub fn claim() -> (u16, &'static Slot) {
    for (i, slot) in SLOTS.iter().enumerate().skip(1) {
        if !slot.claimed.load(Ordering::Relaxed)
            && slot
                .claimed
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            HIGH.fetch_max(i + 1, Ordering::SeqCst);
            adopt_epoch(slot);
            return (i as u16, slot);
        }
    }
    (0, shared_slot())
}

/// Number of checkpoints taken so far: blocks record the epoch they were born in. The fast paths
/// read it from their thread's slot (`Slot::bare`).
static EPOCH: AtomicU32 = AtomicU32::new(0);

/// The current checkpoint epoch.
pub fn epoch() -> u32 {
    EPOCH.load(Ordering::SeqCst)
}

/// Starts a new epoch and returns it. The slots up to `HIGH` (the shared one and every one ever
/// claimed) get it (`Slot::bare`); a slot claimed later takes it when claimed (`adopt_epoch`), so
/// slots never claimed are not touched. The caller serialises calls, so that the last epoch a slot
/// is given is the newest.
pub fn advance_epoch() -> u32 {
    let epoch = EPOCH.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
    let high = HIGH.load(Ordering::SeqCst).min(MAX_SLOTS);
    for slot in &SLOTS[..high] {
        slot.set_epoch(epoch);
    }
    epoch
}

/// Gives a slot just claimed (and counted in `HIGH`) the current epoch. A concurrent
/// `advance_epoch` either sees the slot in `HIGH` and sets it, or read `HIGH` before the slot was
/// counted, in which case the epoch read here is its own or newer; should this store land after
/// that function's, the second read sees the newer epoch, and the loop stores it again. (It loops
/// again only while checkpoints keep landing in between.)
fn adopt_epoch(slot: &Slot) {
    loop {
        let epoch = EPOCH.load(Ordering::SeqCst);
        slot.set_epoch(epoch);
        if EPOCH.load(Ordering::SeqCst) == epoch {
            return;
        }
    }
}

/// Whether any thread has ever recorded an event (a tracker is serving allocations).
pub fn any_claimed() -> bool {
    let shared = &SLOTS[0];
    HIGH.load(Ordering::Relaxed) > 1
        || shared.sizes.alloc.iter().any(|c| c.get() != 0)
        || shared.classes.iter().any(|q| q.alloc_blocks.get() != 0)
}

/// Gives slot `i` back; its counters stay and the next owner keeps adding to them.
pub fn release(i: u16) {
    if i != 0 {
        if let Some(s) = SLOTS.get(i as usize) {
            s.claimed.store(false, Ordering::Release);
        }
    }
}

/// Everything the counters hold, summed over a set of slots.
#[derive(Clone, Debug, Default)]
pub struct Raw {
    /// Per size class, indexed by class.
    pub classes: Vec<Counts>,
    /// Per tag, indexed by tag index.
    pub tags: Vec<Counts>,
    /// Frees of blocks born in the epoch they were freed in: (blocks, bytes).
    pub young_free: (u64, u64),
    /// Per site, indexed by site id (blocks in `UNIT`s).
    pub sites: Vec<SiteCounts>,
}

/// Reads every slot in use (frees first, then allocations; see the module docs).
pub fn read_all() -> Raw {
    let high = HIGH.load(Ordering::Acquire).min(MAX_SLOTS);
    read(&SLOTS[..high])
}

/// Reads one slot.
pub fn read_one(slot: &Slot) -> Raw {
    read(std::slice::from_ref(slot))
}

fn read(slots: &[Slot]) -> Raw {
    let read_quads = |pick: &dyn Fn(&Slot) -> &[Quad], n: usize| -> Vec<Counts> {
        (0..n)
            .map(|i| {
                // Frees before allocations, for this one counter group across all slots: the
                // window in which other threads can skew the figure is a few loads wide.
                let mut c = Counts::default();
                for q in slots.iter().filter_map(|s| pick(s).get(i)) {
                    c.free_blocks += q.free_blocks.get();
                    c.free_bytes += q.free_bytes.get();
                }
                for q in slots.iter().filter_map(|s| pick(s).get(i)) {
                    c.alloc_blocks += q.alloc_blocks.get();
                    c.alloc_bytes += q.alloc_bytes.get();
                }
                c
            })
            .collect()
    };
    let mut raw = Raw {
        classes: read_quads(&|s| &s.classes, NUM_CLASSES),
        tags: read_quads(&|s| &s.tags, MAX_TAGS),
        ..Raw::default()
    };
    // The sizes a class holds, one class at a time: frees before allocations for each class's
    // sizes (so for each size), each slot's run of counters read in order (a user trial measured
    // `measure` at 64 µs a call when every size was looked up on its own).
    let mut start = 0usize;
    while start <= EXACT_MAX {
        let class = class_of(start);
        let end = usize::try_from(class_size(class)).map_or(EXACT_MAX, |e| e.min(EXACT_MAX));
        let Some(c) = raw.classes.get_mut(class) else {
            break;
        };
        for cnt in slots.iter().map(|s| &s.sizes) {
            let (Some(old), Some(free)) =
                (cnt.old_free.get(start..=end), cnt.free.get(start..=end))
            else {
                continue;
            };
            for ((old, free), size) in old.iter().zip(free).zip(start as u64..) {
                // `old_free` first: every old free it sees was counted in `free` before, so
                // `free` read next is at least as large and `young` is never negative.
                let old = old.get();
                let free = free.get();
                let young = free.wrapping_sub(old);
                c.free_blocks = c.free_blocks.wrapping_add(free);
                c.free_bytes = c.free_bytes.wrapping_add(free.wrapping_mul(size));
                raw.young_free.0 = raw.young_free.0.wrapping_add(young);
                raw.young_free.1 = raw.young_free.1.wrapping_add(young.wrapping_mul(size));
            }
        }
        for cnt in slots.iter().map(|s| &s.sizes) {
            let Some(alloc) = cnt.alloc.get(start..=end) else {
                continue;
            };
            for (alloc, size) in alloc.iter().zip(start as u64..) {
                let alloc = alloc.get();
                c.alloc_blocks = c.alloc_blocks.wrapping_add(alloc);
                c.alloc_bytes = c.alloc_bytes.wrapping_add(alloc.wrapping_mul(size));
            }
        }
        start = end + 1;
    }
    for s in slots {
        raw.young_free.0 += s.young_free_blocks.get();
        raw.young_free.1 += s.young_free_bytes.get();
    }
    for hi in 0..SITE_DIR {
        for frees in [true, false] {
            for s in slots {
                s.read_site_chunk(hi, &mut raw.sites, frees);
            }
        }
    }
    raw
}

/// A live figure the heap certainly reached, `(bytes, blocks)`: every slot's allocations are read
/// before any of their frees (the opposite of [`read`]'s order), so frees made while it reads can
/// only lower it, and allocations made meanwhile are not seen. It is at most the live heap at the
/// moment the last allocation counter was read; `snapshot`'s own figure, read group by group
/// with frees first, can exceed every figure the heap reached while other threads allocate and
/// free during the read.
pub fn live_lower_bound() -> (i64, i64) {
    let sum = |free: bool| -> (u64, u64) {
        // Read again for the frees: a slot claimed meanwhile may free blocks counted among the
        // allocations, and frees read in excess can only lower the figure.
        let high = HIGH.load(Ordering::Acquire).min(MAX_SLOTS);
        let mut total = (0u64, 0u64);
        for slot in &SLOTS[..high] {
            let sizes = if free {
                &slot.sizes.free
            } else {
                &slot.sizes.alloc
            };
            for (size, c) in sizes.iter().enumerate() {
                let n = c.get();
                total.0 = total.0.wrapping_add(n.wrapping_mul(size as u64));
                total.1 = total.1.wrapping_add(n);
            }
            for q in &slot.classes {
                let (bytes, blocks) = if free {
                    (&q.free_bytes, &q.free_blocks)
                } else {
                    (&q.alloc_bytes, &q.alloc_blocks)
                };
                total.0 = total.0.wrapping_add(bytes.get());
                total.1 = total.1.wrapping_add(blocks.get());
            }
        }
        total
    };
    let allocated = sum(false);
    let freed = sum(true);
    (
        allocated.0.wrapping_sub(freed.0) as i64,
        allocated.1.wrapping_sub(freed.1) as i64,
    )
}

/// The figures behind the peak, on a cache line of their own: they are written now and then,
/// and must not share a line with what every allocation reads.
#[repr(align(64))]
struct PeakState {
    /// Live bytes and blocks folded in by threads so far.
    flushed_bytes: AtomicI64,
    flushed_blocks: AtomicI64,
    peak_bytes: AtomicU64,
    peak_blocks: AtomicU64,
}

static PEAK: PeakState = PeakState {
    flushed_bytes: AtomicI64::new(0),
    flushed_blocks: AtomicI64::new(0),
    peak_bytes: AtomicU64::new(0),
    peak_blocks: AtomicU64::new(0),
};

/// A thread's live-figure change not yet folded into the global figure, and the pending value
/// above which its view of the live heap would exceed the peak.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pending {
    /// Bytes.
    pub bytes: i64,
    /// Blocks.
    pub blocks: i64,
    /// `bytes` above this needs a look at the peak (at most `FLUSH_BYTES`).
    pub limit: i64,
}

/// Whether a pending fall of `bytes` is large enough to fold into the global figure with
/// [`refresh`]. (Growth is checked against `Pending::limit`, which is at most `FLUSH_BYTES`.)
#[inline(always)]
pub fn needs_flush(bytes: i64) -> bool {
    bytes <= FLUSH_FLOOR
}

/// The highest pending fall in bytes that [`needs_flush`]. Far closer to zero than
/// `FLUSH_BYTES`: another thread's view of the live heap (the folded figure plus its own change)
/// counts the blocks this thread freed and has not folded yet, and a view that high can raise the
/// peak above anything the heap was. Folds of frees are rare all the same: a thread whose
/// allocations and frees balance drifts this far only now and then.
pub const FLUSH_FLOOR: i64 = -16 * 1024;

/// Folds a large pending change into the global figure, raises the peak when the thread's view of
/// the live heap (global figure + its own pending change) exceeds it, and sets the next limit.
/// With one thread the peak is exact; with several it can miss up to 256 KiB per other thread
/// (their unfolded growth) and overstate by less than 16 KiB per other thread (their unfolded
/// frees); a snapshot that reads more live bytes than the peak raises it to what the heap
/// certainly held ([`live_lower_bound`]).
#[cold]
pub fn refresh(p: &mut Pending) {
    if p.bytes >= FLUSH_BYTES || needs_flush(p.bytes) {
        flush(p);
    }
    let (bytes, blocks) = folded();
    raise_peak(bytes.wrapping_add(p.bytes), blocks.wrapping_add(p.blocks));
    p.limit = limit_over(bytes);
}

/// The live bytes and blocks threads have folded into the global figure so far.
pub fn folded() -> (i64, i64) {
    (
        PEAK.flushed_bytes.load(Ordering::Relaxed),
        PEAK.flushed_blocks.load(Ordering::Relaxed),
    )
}

/// Raises the peak to a thread's view of the live heap, `bytes` in `blocks` (the folded figure
/// plus its pending change), when that exceeds it.
pub fn raise_peak(bytes: i64, blocks: i64) {
    if bytes > PEAK.peak_bytes.load(Ordering::Relaxed) as i64 {
        let before = PEAK.peak_bytes.fetch_max(bytes as u64, Ordering::Relaxed);
        // Only the raiser that set the peak gives its blocks (two raising at once could
        // otherwise leave one's blocks beside the other's bytes; a raiser that comes between
        // these two steps still can, by a moment's difference).
        if (before as i64) < bytes {
            PEAK.peak_blocks
                .store(blocks.max(0) as u64, Ordering::Relaxed);
        }
    }
}

/// The pending bytes above which a thread's view of the live heap, over a folded figure of
/// `folded` bytes, would exceed the peak (at most `FLUSH_BYTES`).
pub fn limit_over(folded: i64) -> i64 {
    let peak = PEAK.peak_bytes.load(Ordering::Relaxed) as i64;
    peak.wrapping_sub(folded).min(FLUSH_BYTES)
}

/// Folds a thread's pending change into the global figure.
pub fn flush(p: &mut Pending) {
    PEAK.flushed_bytes.fetch_add(p.bytes, Ordering::Relaxed);
    PEAK.flushed_blocks.fetch_add(p.blocks, Ordering::Relaxed);
    p.bytes = 0;
    p.blocks = 0;
}

/// The highest live bytes seen and the blocks live at that moment.
pub fn peak() -> (u64, u64) {
    (
        PEAK.peak_bytes.load(Ordering::Relaxed),
        PEAK.peak_blocks.load(Ordering::Relaxed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_reads_back_what_was_counted() {
        let slot = Slot::new();
        slot.alloc(40, 0, false);
        slot.alloc(48, 5, false);
        slot.free(40, 0, true, false);
        slot.alloc(1000, 0, false);
        slot.site_alloc(3000, UNIT, 48, false);
        let raw = read_one(&slot);
        assert_eq!(
            raw.classes[2],
            Counts {
                alloc_blocks: 2,
                alloc_bytes: 88,
                free_blocks: 1,
                free_bytes: 40
            }
        );
        assert_eq!(raw.classes[class_of(1000)].alloc_bytes, 1000);
        assert_eq!(raw.tags[5].alloc_bytes, 48);
        assert_eq!(raw.young_free, (1, 40));
        assert_eq!(raw.sites[3000].counts.alloc_bytes, 48);
    }

    #[test]
    fn sizes_on_both_sides_of_the_exact_bound_count_in_their_classes() {
        let slot = Slot::new();
        for size in [EXACT_MAX - 1, EXACT_MAX, EXACT_MAX + 1, 3 * EXACT_MAX] {
            slot.alloc(size, 0, false);
            slot.alloc(size, 0, false);
            slot.free(size, 0, true, false);
            slot.free(size, 0, false, false);
        }
        let raw = read_one(&slot);
        let mut expected = vec![Counts::default(); NUM_CLASSES];
        for size in [EXACT_MAX - 1, EXACT_MAX, EXACT_MAX + 1, 3 * EXACT_MAX] {
            let c = &mut expected[class_of(size)];
            c.add(&Counts {
                alloc_blocks: 2,
                alloc_bytes: 2 * size as u64,
                free_blocks: 2,
                free_bytes: 2 * size as u64,
            });
        }
        assert_eq!(raw.classes, expected);
        let young_bytes = (EXACT_MAX - 1 + EXACT_MAX + EXACT_MAX + 1 + 3 * EXACT_MAX) as u64;
        assert_eq!(raw.young_free, (4, young_bytes));
    }

    #[test]
    fn out_of_range_sites_are_ignored_without_panicking() {
        let slot = Slot::new();
        slot.site_alloc(u32::MAX, UNIT, 8, false);
        slot.site_free(u32::MAX, UNIT, 8, false, false);
        assert!(read_one(&slot).sites.is_empty());
    }
}
