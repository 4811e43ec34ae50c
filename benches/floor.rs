//! The floor under the overhead targets: what a per-block header costs by itself, and what each
//! piece of the tracker's bookkeeping adds to it, as ratios to the inner allocator measured in one
//! run (`small_churn`, see `common/churn.rs`; paired rounds, see `common/paired.rs`).
//!
//! Each stage is a stand-in allocator built here, doing what the tracker's inlined path does with
//! call sites off, one piece more than the stage before:
//! - `larger request`: asks for 8 bytes more and hands out the block 8 bytes in, writing nothing
//!   (what the header costs the inner allocator, apart from touching it);
//! - `header`: also writes a constant header in front, and checks it on free;
//! - `+ slot pointer`: also loads the thread's slot pointer from a thread-local and tests it, on
//!   every event (the tracker folds that test into the running peak's compare);
//! - `+ running peak`: also keeps the thread's pending bytes and blocks, checked against a limit;
//! - `+ birth step`: the header holds the current epoch, read from the slot, compared on free;
//! - `+ size counters`: also counts the event in the slot's per-size counter.
//!
//! And two alternatives to the last stage: `or class counters`, a count and a byte sum per
//! 16-byte class (the tracker counts small requests by exact size, whose byte sum is the size
//! times the count, so one add per event); and `counting alone`: the slot pointer, the
//! running peak and the size counters alone, on the block the program asked for (no header, so
//! no birth step either): a lower bound for the counting, wherever a block's step would be kept.
//!
//! The last rows are `Tracker` itself with call sites off (`tracker_off`, `tracker_pool_off`).
//! Over `System` and over `Pool`; `baseline again` runs the baseline a second time, as a check.
//! The stand-ins are small, and how the compiler lays them out moves their figures by a few
//! hundredths (an earlier shape of this file measured the counters stage at 1.31x): read the table
//! as where the cost goes, not to the hundredth.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use heapdelta::{CallSites, Pool, Tracker};
use paired::Contender;

// Shared with the other benches; this one runs only `small_churn`.
#[allow(dead_code)]
#[path = "common/churn.rs"]
mod churn;
#[macro_use]
#[path = "common/handle.rs"]
mod handle;
#[path = "common/paired.rs"]
mod paired;
use churn::timed_churn;

/// Rounds of each table.
const ROUNDS: usize = 31;
/// Operations per timed run.
const OPS: u64 = 200_000;
/// Sizes with a counter of their own: the churn's, up to 512 B (the tracker's go up to 4 KiB).
const SIZES: usize = 513;
const MAGIC: u64 = 0xA1_0000;
/// 16-byte classes up to the largest size with a counter of its own.
const CLASSES: usize = SIZES.div_ceil(16) + 1;

/// The stand-ins' counters (one thread runs them).
struct Slot {
    epoch: AtomicU64,
    alloc: [AtomicU64; SIZES],
    free: [AtomicU64; SIZES],
    /// Per 16-byte class: (count, bytes) of allocations and of frees.
    class_alloc: [(AtomicU64, AtomicU64); CLASSES],
    class_free: [(AtomicU64, AtomicU64); CLASSES],
}

static SLOT: Slot = Slot {
    epoch: AtomicU64::new(0),
    alloc: [const { AtomicU64::new(0) }; SIZES],
    free: [const { AtomicU64::new(0) }; SIZES],
    class_alloc: [const { (AtomicU64::new(0), AtomicU64::new(0)) }; CLASSES],
    class_free: [const { (AtomicU64::new(0), AtomicU64::new(0)) }; CLASSES],
};

struct State {
    slot: Cell<*const Slot>,
    pending_bytes: Cell<i64>,
    pending_blocks: Cell<i64>,
    limit: Cell<i64>,
}

thread_local! {
    static STATE: State = const {
        State {
            slot: Cell::new(&SLOT),
            pending_bytes: Cell::new(0),
            pending_blocks: Cell::new(0),
            limit: Cell::new(1 << 40),
        }
    };
}

/// A single-threaded counter add, as the tracker's private slots make.
#[inline(always)]
fn add(c: &AtomicU64, v: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
}

/// The stage-5 count of an event of `size` bytes in `sizes`, or the stage-6 count and byte sum in
/// `classes`.
#[inline(always)]
fn count<const STAGE: u8>(
    size: usize,
    sizes: &[AtomicU64; SIZES],
    classes: &[(AtomicU64, AtomicU64); CLASSES],
) {
    if STAGE == 5 {
        if let Some(c) = sizes.get(size) {
            add(c, 1);
        }
    }
    if STAGE == 6 {
        if let Some((count, bytes)) = classes.get(size.div_ceil(16)) {
            add(count, 1);
            add(bytes, size as u64);
        }
    }
}

/// The bookkeeping every event of a stage-`STAGE` stand-in does before `count`: from stage 2, the
/// thread's slot pointer, loaded and tested; from stage 3, the pending change of a block of
/// `size` bytes (allocated with `ALLOC`, else freed), checked against the limit (or a floor).
#[inline(always)]
fn on_event<const STAGE: u8, const ALLOC: bool>(size: usize, count: impl FnOnce(&Slot)) {
    if STAGE < 2 {
        return;
    }
    STATE.with(|st| {
        let slot = st.slot.get();
        if slot.is_null() {
            std::process::abort();
        }
        if STAGE >= 3 {
            let (bytes, blocks) = match ALLOC {
                true => (size as i64, 1),
                false => (-(size as i64), -1),
            };
            let pending = st.pending_bytes.get() + bytes;
            let out = match ALLOC {
                true => pending > st.limit.get(),
                false => pending < -(1 << 40),
            };
            if out {
                std::process::abort();
            }
            st.pending_bytes.set(pending);
            st.pending_blocks.set(st.pending_blocks.get() + blocks);
        }
        // SAFETY: the pointer is `&SLOT`.
        count(unsafe { &*slot });
    });
}

/// The stage-`STAGE` stand-in over `inner` (stages 0–5 in the order of the module docs, 6 for
/// the class counters and 7 for the counting without a header).
struct Staged<I: 'static, const STAGE: u8>(&'static I);

// SAFETY: every block is the inner allocator's block of `size + 8` bytes (alignment 8), offset by
// the 8-byte header (left unwritten at stage 0), or at stage 7 the inner allocator's block of the
// caller's layout itself; `dealloc` hands the inner allocator that same block and layout back. The
// churn only asks for alignment 8.
unsafe impl<I: GlobalAlloc, const STAGE: u8> GlobalAlloc for Staged<I, STAGE> {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let size = layout.size();
        if STAGE == 7 {
            // SAFETY: the caller's layout, handed on as it is.
            let block = unsafe { self.0.alloc(layout) };
            if !block.is_null() {
                on_event::<STAGE, true>(size, |slot| {
                    count::<5>(size, &slot.alloc, &slot.class_alloc)
                });
            }
            return block;
        }
        // SAFETY: the churn's sizes are at most 64 KiB, so `size + 8` is a valid size.
        let base = unsafe { self.0.alloc(Layout::from_size_align_unchecked(size + 8, 8)) };
        if base.is_null() {
            return base;
        }
        if STAGE == 0 {
            // SAFETY: the block has `size + 8` bytes.
            return unsafe { base.add(8) };
        }
        let mut header = MAGIC;
        on_event::<STAGE, true>(size, |slot| {
            if STAGE >= 4 {
                header |= slot.epoch.load(Ordering::Relaxed);
            }
            count::<STAGE>(size, &slot.alloc, &slot.class_alloc);
        });
        // SAFETY: the block has `size + 8` bytes; the header takes the first 8.
        unsafe {
            (base as *mut u64).write(header);
            base.add(8)
        }
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let size = layout.size();
        if STAGE == 7 {
            on_event::<STAGE, false>(size, |slot| count::<5>(size, &slot.free, &slot.class_free));
            // SAFETY: the block and layout `alloc` got at stage 7, unchanged.
            unsafe { self.0.dealloc(ptr, layout) };
            return;
        }
        // SAFETY: `ptr` came from `alloc`, 8 bytes into the inner block.
        let base = unsafe { ptr.sub(8) };
        if STAGE > 0 {
            // SAFETY: from stage 1 on, `alloc` wrote the header in the block's first 8 bytes.
            let header = unsafe { (base as *const u64).read() };
            if header & !0xFFFF != MAGIC {
                std::process::abort();
            }
            on_event::<STAGE, false>(size, |slot| {
                if STAGE >= 4 && header & 0xFFFF != slot.epoch.load(Ordering::Relaxed) {
                    std::process::abort();
                }
                count::<STAGE>(size, &slot.free, &slot.class_free);
            });
        }
        // SAFETY: the inner block and layout `alloc` got.
        unsafe {
            self.0
                .dealloc(base, Layout::from_size_align_unchecked(size + 8, 8))
        }
    }
}

static SYSTEM: System = System;
static INNER_SYSTEM: System = System;
static POOL: Pool = Pool::new();
static INNER_POOL: Pool = Pool::new();
static OFF: Tracker = Tracker::new().call_sites(CallSites::Off);
static TRACKED_POOL: Tracker<Pool> = Tracker::wrap(Pool::new()).call_sites(CallSites::Off);
handle!(Off, OFF);
handle!(TrackedPool, TRACKED_POOL);

fn run(a: &impl GlobalAlloc) -> Duration {
    timed_churn(a, false, OPS)
}

/// One table: the stages over `inner`, and `tracker`, as ratios to `base` (an allocator like
/// `inner`, but another instance, so that each keeps its own heap), which runs again last as a
/// check.
fn stages<I: GlobalAlloc>(
    over: &str,
    base: &'static I,
    inner: &'static I,
    tracker: (&str, &dyn Fn() -> Duration),
) {
    paired::print_ratios(
        &format!("over {over}"),
        ROUNDS,
        &[
            Contender::new(over, &|| run(base), 0),
            Contender::new("larger request", &|| run(&Staged::<_, 0>(inner)), 0),
            Contender::new("header", &|| run(&Staged::<_, 1>(inner)), 0),
            Contender::new("+ slot pointer", &|| run(&Staged::<_, 2>(inner)), 0),
            Contender::new("+ running peak", &|| run(&Staged::<_, 3>(inner)), 0),
            Contender::new("+ birth step", &|| run(&Staged::<_, 4>(inner)), 0),
            Contender::new("+ size counters", &|| run(&Staged::<_, 5>(inner)), 0),
            Contender::new("or class counters", &|| run(&Staged::<_, 6>(inner)), 0),
            Contender::new("counting alone", &|| run(&Staged::<_, 7>(inner)), 0),
            Contender::new(tracker.0, tracker.1, 0),
            Contender::new("baseline again", &|| run(base), 0),
        ],
    );
}

fn main() {
    println!(
        "small_churn, stages of the tracker's bookkeeping, paired within each of {ROUNDS} rounds \
         (median [min–max]):"
    );
    stages(
        "System",
        &SYSTEM,
        &INNER_SYSTEM,
        ("tracker_off", &|| run(&Off)),
    );
    stages(
        "Pool",
        &POOL,
        &INNER_POOL,
        ("tracker_pool_off", &|| run(&TrackedPool)),
    );
}
