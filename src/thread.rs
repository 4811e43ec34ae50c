//! Per-thread state: the reentrancy guard, the thread's counter slot, and its pending live change.
//!
//! Everything here is `const`-initialised and read with `try_with`, so it works during thread
//! start-up and teardown. The guard is set while heapdelta itself runs code that may allocate
//! (capturing a call site, building a snapshot, resolving symbols); allocations made meanwhile are
//! not counted: they are marked untracked and passed straight to the inner allocator, or to
//! `System` under a stateful one (see `own_to_system`), which is what makes the tracker safe to
//! re-enter. Counting an event never allocates, so the plain counting path does not need
//! the guard.
//!
//! The fast paths open with a single pointer: the thread's slot, kept non-null only while the
//! thread owns a private slot, is not inside heapdelta, and `HEAPDELTA` has been read. There are
//! three such pointers. `direct` (`Door::Scoped`) opens the out-of-line paths, which count tags
//! and take the call-site settings `HEAPDELTA` gives, if it overrides the tracker's: those
//! through `Door::Scoped` (allocations in a scope or under an override, frees of tagged blocks or
//! of blocks with a site freed in a scope), `fast`, which runs any recording step, and
//! `alloc_exact` under an override. `exact` is also closed under an override: `alloc_exact`
//! captures with the tracker's own settings through it. `fast` (`Door::Plain`) is `exact` closed
//! inside a scope too, so the inlined paths (`fast_alloc`, `fast_free` and `fast_free_sited`
//! through `Door::Plain`) never see a tag nor an override; they do not test it themselves, but
//! the bounds `fast_limit` and `fast_floor`, which no event passes while it is null. Everything
//! else (the first event of a thread, nested events, teardown, the shared slot) goes through the
//! cold `record_slow`.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{compiler_fence, Ordering};

use crate::callsite::{
    frame_register_here, start_from, unwind_start_here, Replayed, Sampler, StackBuffer, UnwindStart,
};
use crate::config;
use crate::header::Header;
use crate::stats::{self, Pending, SiteCnt, Slot};

struct State {
    /// The thread's own slot while any recording step may count into it directly: set once the
    /// thread has a private slot and `HEAPDELTA` is read; null while `busy` is set (and before,
    /// and after teardown). The steps it opens take the call-site mode `HEAPDELTA` gives, if any.
    direct: Cell<*const Slot>,
    /// `direct` while `HEAPDELTA` overrides no call-site setting, for `alloc_exact`, which
    /// captures with the tracker's own settings; null under an override.
    exact: Cell<*const Slot>,
    /// `exact` outside any scope, for the inlined paths, which count no tag and use the tracker's
    /// own settings; null inside a scope.
    fast: Cell<*const Slot>,
    busy: Cell<bool>,
    /// While set (`probe_inner`), heapdelta's own blocks come from the inner allocator even
    /// where they would come from `System` (see `own_to_system`).
    probing: Cell<bool>,
    slot: Cell<*const Slot>,
    index: Cell<u16>,
    pending_bytes: Cell<i64>,
    pending_blocks: Cell<i64>,
    /// The pending bytes above which the thread's view of the live heap (the global figure plus
    /// its pending change) exceeds the peak; while `high_unpublished`, the thread's highest
    /// pending bytes since it last raised the peak.
    limit: Cell<i64>,
    /// Whether the thread went above the peak on an out-of-line fast path without raising the
    /// global peak: a run of new highs, as a growing program makes, raises it once
    /// (`publish_high`: when the highs pass `high_ceiling`, at the next fold or any other look at
    /// the peak on the general path, before a snapshot taken on this thread, and at thread
    /// exit), not at every allocation.
    high_unpublished: Cell<bool>,
    /// The thread's view of the live heap at its unpublished high (the folded global figure then
    /// plus its pending change), bytes and blocks: what `publish_high` raises the peak to. Taken
    /// when the high is reached, since other threads' folds may change the global figure before
    /// it is published.
    high_view: Cell<(i64, i64)>,
    /// The pending bytes up to which new highs may go unpublished: `HIGH_SLACK` above the limit
    /// the thread last got from the global peak (at most the flush threshold), so that another
    /// thread's snapshot misses at most that much of this thread's highs.
    high_ceiling: Cell<i64>,
    /// `limit + 1` while `fast` is open, `i64::MIN` while it is closed, so that the inlined
    /// allocation path checks both with one compare, `bytes < fast_limit`, which no value passes
    /// while `fast` is closed (kept so by `sync_fast_bounds`).
    fast_limit: Cell<i64>,
    /// `stats::FLUSH_FLOOR` while `fast` is open, `i64::MAX` while it is closed: the inlined free
    /// path's one compare, `bytes > fast_floor`, which no value passes while `fast` is closed.
    fast_floor: Cell<i64>,
    tag: Cell<u8>,
    /// The bytes and blocks the thread has folded into the global figure so far (`flush`): with
    /// its pending change, its running change of the live heap, which `measure` windows follow.
    folded_here: Cell<(i64, i64)>,
    /// The highest running change (bytes, and blocks then) since the innermost open `measure`
    /// window began (see `Window`); `i64::MAX` bytes while none is open. While one is, `limit` is
    /// kept at most the pending bytes at which the running change would pass it, so that every
    /// new high of the window leaves the inlined paths and is noted (`note_window`).
    window_high: Cell<(i64, i64)>,
    /// The thread's sampling countdown (cells: see `Sampler`).
    sampler: Sampler,
    /// The thread's capture buffer (used only while `busy` is set): taken on the thread's first
    /// capture (one an exited thread gave back, or a new mapping), so that threads that never
    /// capture a call site do not carry its 200 KiB; given back when the thread exits (see
    /// `StackBuffer::free`). Null until then, and after.
    stack: Cell<*mut StackBuffer>,
    /// Whether the thread's destructor (`Owner`) is registered and has not run yet: it frees
    /// `stack`.
    owned: Cell<bool>,
}

thread_local! {
    static STATE: State = const {
        State {
            direct: Cell::new(ptr::null()),
            exact: Cell::new(ptr::null()),
            fast: Cell::new(ptr::null()),
            busy: Cell::new(false),
            probing: Cell::new(false),
            slot: Cell::new(ptr::null()),
            index: Cell::new(0),
            pending_bytes: Cell::new(0),
            pending_blocks: Cell::new(0),
            limit: Cell::new(0),
            high_unpublished: Cell::new(false),
            high_view: Cell::new((0, 0)),
            high_ceiling: Cell::new(0),
            fast_limit: Cell::new(i64::MIN),
            fast_floor: Cell::new(i64::MAX),
            tag: Cell::new(0),
            folded_here: Cell::new((0, 0)),
            window_high: Cell::new((i64::MAX, 0)),
            sampler: Sampler::new(0),
            stack: Cell::new(ptr::null_mut()),
            owned: Cell::new(false),
        }
    };
    /// Owns the thread's slot; its destructor gives the slot back when the thread exits.
    static OWNER: Owner = const { Owner };
}

/// Which of the thread's slot pointers a fast path opens with (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// `fast`, closed inside a scope: the inlined paths, whose blocks never carry a tag.
    Plain,
    /// `direct`, open inside scopes: the out-of-line paths, which count scope tags.
    Scoped,
}

impl State {
    /// The tag a new block gets through `door` (always 0 through `Door::Plain`).
    #[inline(always)]
    fn tag_through(&self, door: Door) -> u8 {
        match door {
            Door::Plain => 0,
            Door::Scoped => self.tag.get(),
        }
    }

    /// Sets or clears the guard and returns its previous value; the direct and fast slots follow
    /// it.
    fn set_busy(&self, busy: bool) -> bool {
        let was = self.busy.replace(busy);
        self.refresh_fast();
        was
    }

    /// Sets the direct, exact and fast slots from the thread's state and the configuration.
    fn refresh_fast(&self) {
        let direct = if self.busy.get() || self.index.get() == 0 || !config::applied() {
            ptr::null()
        } else {
            self.slot.get()
        };
        let exact = if config::overridden() {
            ptr::null()
        } else {
            direct
        };
        let fast = if self.tag.get() != 0 {
            ptr::null()
        } else {
            exact
        };
        self.set_doors(direct, exact, fast);
    }

    /// Sets the three slot pointers, with `fast_limit` and `fast_floor` closed while they change
    /// and set from the new `fast` after (`sync_fast_bounds`). The compiler fences keep the stores
    /// in that order, so that an event that interrupts this on the same thread (a signal handler
    /// that allocates) finds the inlined paths closed or their pointer set, never an open bound
    /// with a null `fast`, which those paths do not test (see `open_for_alloc`).
    fn set_doors(&self, direct: *const Slot, exact: *const Slot, fast: *const Slot) {
        self.fast_limit.set(i64::MIN);
        self.fast_floor.set(i64::MAX);
        compiler_fence(Ordering::SeqCst);
        self.direct.set(direct);
        self.exact.set(exact);
        self.fast.set(fast);
        compiler_fence(Ordering::SeqCst);
        self.sync_fast_bounds();
    }

    /// Sets `fast_limit` and `fast_floor` from `fast` and `limit`; called whenever either changes.
    fn sync_fast_bounds(&self) {
        let open = !self.fast.get().is_null();
        // `limit` is at most `FLUSH_BYTES`, so the sum cannot overflow; saturating all the same.
        self.fast_limit.set(if open {
            self.limit.get().saturating_add(1)
        } else {
            i64::MIN
        });
        self.fast_floor
            .set(if open { stats::FLUSH_FLOOR } else { i64::MAX });
    }

    /// The thread's slot and its pending bytes with a new block of `size` bytes, when `door` is
    /// open and the block does not reach the peak's limit; through `Door::Scoped`, also when it
    /// makes a new high up to `high_ceiling`, which the `true` says.
    #[inline(always)]
    fn open_for_alloc(&self, door: Door, size: usize) -> Option<(&'static Slot, i64, bool)> {
        let bytes = self.pending_bytes.get().wrapping_add(size as i64);
        let mut high = false;
        let slot = match door {
            Door::Plain => {
                if bytes >= self.fast_limit.get() {
                    return None;
                }
                let fast = self.fast.get();
                // SAFETY: whenever `fast` is null, `fast_limit` is `i64::MIN`, which no value is
                // below, so we returned above: `sync_fast_bounds` runs at every change of either,
                // and `set_doors` closes the bounds before it changes the pointer, with compiler
                // fences between, so this holds at every instruction of the thread, also for an
                // event of a signal handler that interrupted it. Said to the compiler, which would
                // otherwise test the pointer again to build the `Option`.
                unsafe { std::hint::assert_unchecked(!fast.is_null()) };
                fast
            }
            Door::Scoped => {
                if self.direct.get().is_null() {
                    return None;
                }
                high = self.admit(bytes)?;
                self.direct.get()
            }
        };
        // SAFETY: `fast` and `direct` are null or set from a `&'static Slot`, the thread's private
        // one, and neither is null here (checked above).
        Some((unsafe { &*slot }, bytes, high))
    }

    /// Whether a new block that brings the pending bytes to `bytes` can be counted on an
    /// out-of-line fast path: `Some(false)` up to the limit; `Some(true)` above it up to
    /// `high_ceiling`: a new high, which `note_high` keeps for the thread to publish later (see
    /// `high_unpublished`); `None` when the general path must run.
    #[inline(always)]
    fn admit(&self, bytes: i64) -> Option<bool> {
        if bytes <= self.limit.get() {
            return Some(false);
        }
        (bytes < self.high_ceiling.get()).then_some(true)
    }

    /// Sets `limit` as the global peak gives it (at most where an open `measure` window would
    /// reach a new high), and `high_ceiling` from it.
    fn set_limit(&self, limit: i64) {
        let limit = limit.min(self.window_limit());
        self.limit.set(limit);
        self.high_ceiling
            .set(limit.saturating_add(HIGH_SLACK).min(stats::FLUSH_BYTES));
    }

    /// Keeps the thread's new high (its pending change, after the block that made it was
    /// counted) to publish later.
    fn note_high(&self) {
        self.note_window();
        let (bytes, blocks) = stats::folded();
        self.high_view.set((
            bytes.wrapping_add(self.pending_bytes.get()),
            blocks.wrapping_add(self.pending_blocks.get()),
        ));
        self.limit.set(self.pending_bytes.get());
        self.high_unpublished.set(true);
        self.sync_fast_bounds();
    }

    /// Raises the global peak to the thread's unpublished high, if it has one.
    fn publish_high(&self) {
        if self.high_unpublished.replace(false) {
            let (bytes, blocks) = self.high_view.get();
            stats::raise_peak(bytes, blocks);
            self.set_limit(stats::limit_over(stats::folded().0));
            self.sync_fast_bounds();
        }
    }

    /// The thread's slot and its pending bytes without a block of `size` bytes, when `door` is
    /// open and the fall does not need folding into the global figure.
    #[inline(always)]
    fn open_for_free(&self, door: Door, size: usize) -> Option<(&'static Slot, i64)> {
        let bytes = self.pending_bytes.get().wrapping_sub(size as i64);
        let slot = match door {
            Door::Plain => {
                if bytes <= self.fast_floor.get() {
                    return None;
                }
                let fast = self.fast.get();
                // SAFETY: as in `open_for_alloc`: whenever `fast` is null, `fast_floor` is
                // `i64::MAX`, which no value is above.
                unsafe { std::hint::assert_unchecked(!fast.is_null()) };
                fast
            }
            Door::Scoped => {
                if stats::needs_flush(bytes) || self.direct.get().is_null() {
                    return None;
                }
                self.direct.get()
            }
        };
        // SAFETY: as in `open_for_alloc`.
        Some((unsafe { &*slot }, bytes))
    }

    /// Runs `f` on the thread's pending change, its high published first; what `f` folds into
    /// the global figure is added to `folded_here`.
    fn with_pending(&self, f: impl FnOnce(&mut Pending)) {
        self.note_window();
        self.publish_high();
        let before = (self.pending_bytes.get(), self.pending_blocks.get());
        let mut p = Pending {
            bytes: before.0,
            blocks: before.1,
            limit: self.limit.get(),
        };
        f(&mut p);
        let (bytes, blocks) = self.folded_here.get();
        self.folded_here.set((
            bytes.wrapping_add(before.0.wrapping_sub(p.bytes)),
            blocks.wrapping_add(before.1.wrapping_sub(p.blocks)),
        ));
        self.pending_bytes.set(p.bytes);
        self.pending_blocks.set(p.blocks);
        self.set_limit(p.limit);
        self.sync_fast_bounds();
    }
}

/// `measure`'s windows: the thread's running change of the live heap, and its high.
impl State {
    /// The bytes and blocks the thread has added to the live heap since it started (what it
    /// folded, and its pending change).
    fn running(&self) -> (i64, i64) {
        let (bytes, blocks) = self.folded_here.get();
        (
            bytes.wrapping_add(self.pending_bytes.get()),
            blocks.wrapping_add(self.pending_blocks.get()),
        )
    }

    /// Raises the open window's high to the running change, if above it (nothing while no window
    /// is open: its high is `i64::MAX`).
    fn note_window(&self) {
        let now = self.running();
        if now.0 > self.window_high.get().0 {
            self.window_high.set(now);
        }
    }

    /// The pending bytes above which the running change passes the open window's high
    /// (`i64::MAX`, or near it, while none is open).
    fn window_limit(&self) -> i64 {
        self.window_high
            .get()
            .0
            .saturating_sub(self.folded_here.get().0)
    }

    /// Sets `limit` again from the global peak and the open window, if any.
    fn relimit(&self) {
        self.publish_high();
        self.set_limit(stats::limit_over(stats::folded().0));
        self.sync_fast_bounds();
    }
}

/// A `measure` window open on the calling thread (`open_window`): it follows the highest the
/// thread's running change of the live heap reaches until it is dropped, which closes it (also
/// when the measured code panics). Windows nest: an inner one's highs count in the outer one.
pub struct Window {
    /// The running change when the window opened.
    start: (i64, i64),
    /// The enclosing window's high (`i64::MAX` bytes: none).
    outer: (i64, i64),
}

/// Opens a `measure` window on the calling thread; `None` when the thread's state is gone.
pub fn open_window() -> Option<Window> {
    STATE
        .try_with(|st| {
            st.note_window();
            let start = st.running();
            let outer = st.window_high.replace(start);
            st.relimit();
            Window { start, outer }
        })
        .ok()
}

impl Window {
    /// The most the thread's live bytes rose above where they were when the window opened, and
    /// its live blocks then (against the start); zeros when the thread's state is gone.
    pub fn peak(&self) -> (u64, i64) {
        STATE
            .try_with(|st| {
                st.note_window();
                let (bytes, blocks) = st.window_high.get();
                (
                    bytes.wrapping_sub(self.start.0).max(0) as u64,
                    blocks.wrapping_sub(self.start.1),
                )
            })
            .unwrap_or((0, 0))
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        let _ = STATE.try_with(|st| {
            st.note_window();
            let inner = st.window_high.get();
            // The enclosing window saw this one's highs too.
            let high = match self.outer.0 {
                i64::MAX => self.outer,
                outer if inner.0 > outer => inner,
                _ => self.outer,
            };
            st.window_high.set(high);
            st.relimit();
        });
    }
}

struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = STATE.try_with(|st| {
            // The thread's own slot is let go before the doors close, and given back only after:
            // an event of a signal handler in between reopens no door (`refresh_fast` finds no
            // slot of the thread's own), and none counts into a slot another thread may claim.
            let index = st.index.replace(0);
            st.slot.set(stats::shared_slot());
            compiler_fence(Ordering::SeqCst);
            st.set_doors(ptr::null(), ptr::null(), ptr::null());
            // Folded, and the limit set for what remains of the thread: allocations that other
            // thread-local destructors make after this one are counted, and can make a peak.
            st.with_pending(|p| {
                stats::flush(p);
                stats::refresh(p);
            });
            stats::release(index);
            // No buffer is allocated from now on.
            st.owned.set(false);
            // SAFETY: the buffer is this thread's, from `StackBuffer::allocate`, and not borrowed:
            // a thread-local destructor does not run inside heapdelta's code on this thread (a
            // signal handler's capture, which could, ends before this goes on).
            unsafe { StackBuffer::free(st.stack.replace(ptr::null_mut())) };
        });
    }
}

/// What a recording step can use: the thread's slot and its state.
pub struct Ctx<'a> {
    st: Option<&'a State>,
    /// The slot counters go to.
    pub slot: &'static Slot,
    /// Whether `slot` is the shared one (its counters take atomic adds).
    pub shared: bool,
}

impl Ctx<'_> {
    /// Notes a new block of `size` bytes for the peak.
    #[inline(always)]
    pub fn note_alloc(&self, size: usize) {
        let Some(st) = self.st else {
            return teardown_change(size as i64, 1);
        };
        let b = st.pending_bytes.get().wrapping_add(size as i64);
        st.pending_bytes.set(b);
        st.pending_blocks
            .set(st.pending_blocks.get().wrapping_add(1));
        // Growth can only cross the upper limit.
        if b > st.limit.get() {
            st.with_pending(stats::refresh);
        }
    }

    /// Notes the end of a block of `size` bytes for the peak.
    #[inline(always)]
    pub fn note_free(&self, size: usize) {
        let Some(st) = self.st else {
            return teardown_change(-(size as i64), -1);
        };
        let b = st.pending_bytes.get().wrapping_sub(size as i64);
        st.pending_bytes.set(b);
        st.pending_blocks
            .set(st.pending_blocks.get().wrapping_sub(1));
        // A fall can only cross the lower limit.
        if stats::needs_flush(b) {
            st.with_pending(stats::refresh);
        }
    }

    /// The innermost scope tag of the thread (0: none).
    #[inline]
    pub fn tag(&self) -> u8 {
        self.st.map_or(0, |st| st.tag.get())
    }

    /// Whether the thread's sampler picks an allocation of `size` bytes (threads being torn down
    /// sample nothing).
    #[inline]
    pub fn sample(&self, size: usize, mean_bytes: u64) -> bool {
        self.st
            .is_some_and(|st| st.sampler.sample(size, mean_bytes))
    }

    /// Captures the current stack and interns it (see `State::capture_site`); 0 when the
    /// thread's state is gone.
    #[inline]
    pub fn capture_site(&self, depth: usize) -> u32 {
        self.st.map_or(0, |st| st.capture_site(depth, None).0)
    }
}

impl State {
    /// Captures the current stack (at most `depth` frames, starting from the frame of the function
    /// this is inlined into) and returns its site id (see `StackBuffer`), or 0 when the thread is
    /// already inside heapdelta (the buffer may be in use further up this thread's stack). A
    /// stack the buffer can replay costs no walk; any other is captured with the guard set and the
    /// slots closed, so allocations made meanwhile (the first capture of a thread asks libc for
    /// its stack bounds) are not recorded.
    ///
    /// With `own`, the thread's own slot (`direct`), a replayed stack also gives the site's
    /// counters there when their chunk exists, which the buffer keeps beside the site's id once
    /// looked up (`None` otherwise: the caller looks them up). A buffer serves one thread, whose
    /// own slot stays the same while the buffer lives (claimed once; the buffer is freed when the
    /// thread gives the slot back), so the counters kept are always that slot's.
    #[inline(always)]
    fn capture_site(
        &self,
        depth: usize,
        own: Option<&'static Slot>,
    ) -> (u32, Option<&'static SiteCnt>) {
        if self.busy.replace(true) {
            return (0, None);
        }
        // The guard is set before the buffer is used, and cleared after, as a signal handler
        // on this thread sees them (the compiler could otherwise drop the pair around a replay
        // that makes no call).
        compiler_fence(Ordering::SeqCst);
        // With no frame to keep, nothing is walked (nor are frame pointers probed for).
        if depth == 0 {
            return (self.capture_guarded(0, depth, None), None);
        }
        let here = frame_register_here();
        let buffer = self.stack.get();
        // SAFETY: a non-null `stack` is this thread's own buffer (from `StackBuffer::allocate`),
        // only borrowed while `busy` is set, by this call; a nested call on this thread sees
        // `busy` and returns above, and no other thread can reach this thread-local.
        let mut buffer = unsafe { buffer.as_mut() };
        // The guess first, before frame pointers are known to be kept (see `StackBuffer::replay`).
        if let Some(hit) = buffer.as_mut().and_then(|b| b.replay(here, depth)) {
            return self.replayed(hit, own);
        }
        let start = start_from(here);
        if start == 0 {
            return (self.capture_unwound(depth), None);
        }
        if let Some(hit) = buffer.and_then(|b| b.replay_keyed(start, depth)) {
            return self.replayed(hit, own);
        }
        (self.capture_guarded(start, depth, None), None)
    }

    /// `capture_site`'s result for a replayed stack, with the guard cleared: the replay neither
    /// allocates nor calls out, so nothing ran that the guard must hide.
    #[inline(always)]
    fn replayed(
        &self,
        hit: Replayed<'_>,
        own: Option<&'static Slot>,
    ) -> (u32, Option<&'static SiteCnt>) {
        let counters = match (own, *hit.counters) {
            (None, _) => None,
            (Some(_), Some(kept)) => Some(kept),
            (Some(slot), None) => {
                *hit.counters = slot.site_ready(hit.id);
                *hit.counters
            }
        };
        // As in `capture_site`: the buffer's last use comes before the guard is cleared.
        compiler_fence(Ordering::SeqCst);
        self.busy.set(false);
        (hit.id, counters)
    }

    /// `capture_site` without frame pointers: the unwinder starts from the registers of the
    /// function this is inlined into (set here, not through a closure, which might not be
    /// inlined: they must be that function's), and a stack the thread's memo names is given
    /// without walking.
    #[inline(always)]
    fn capture_unwound(&self, depth: usize) -> u32 {
        let mut regs = UnwindStart::default();
        unwind_start_here(&mut regs);
        // SAFETY: as in `capture_site`, which set `busy` (a nested call returns there) and is the
        // only caller.
        let named =
            unsafe { self.stack.get().as_mut() }.and_then(|b| b.replay_unwound(&regs, depth));
        if let Some(id) = named {
            // The check neither allocates nor calls out: nothing ran that the guard must hide.
            compiler_fence(Ordering::SeqCst);
            self.busy.set(false);
            return id;
        }
        self.capture_guarded(0, depth, Some(&regs))
    }

    /// The capture of `capture_site` that must run (no replay applied): with the guard set and
    /// the slots closed. Inlined, so that it runs in the function `start` (or `unwind`) belongs
    /// to, as `StackBuffer::capture_site` requires.
    #[inline(always)]
    fn capture_guarded(&self, start: usize, depth: usize, unwind: Option<&UnwindStart>) -> u32 {
        // The guard closes the direct, exact and fast slots while the capture runs. Nothing it
        // does changes the thread's slot or tag, and the configuration can only ever open the
        // slots (`HEAPDELTA` is read, and an override dropped, before any thread records),
        // so restoring the values found here is safe: at worst they stay closed until the next
        // slow event reopens them.
        let _busy = Busy {
            st: self,
            direct: self.direct.get(),
            exact: self.exact.get(),
            fast: self.fast.get(),
        };
        self.set_doors(ptr::null(), ptr::null(), ptr::null());
        let buffer = match self.stack.get() {
            buffer if buffer.is_null() => self.new_buffer(),
            buffer => buffer,
        };
        // SAFETY: a non-null `stack` is this thread's own buffer (from `StackBuffer::allocate`, or
        // a new one), only borrowed while `busy` is set: `capture_site` set it, and is the only
        // caller (directly or through `capture_unwound`), so a nested call returns there and no
        // other borrow exists; no other thread can reach this thread-local.
        unsafe { buffer.as_mut() }.map_or(0, |b| b.capture_site(start, depth, unwind))
    }

    /// The thread's capture buffer, allocated on its first capture; null (no call site recorded)
    /// when the thread's destructor is not registered (it has run, or it could not be registered),
    /// since the buffer would then never be freed, or when the mapping fails.
    #[cold]
    #[inline(never)]
    fn new_buffer(&self) -> *mut StackBuffer {
        if !self.owned.get() {
            return ptr::null_mut();
        }
        let buffer = StackBuffer::allocate();
        self.stack.set(buffer);
        buffer
    }
}

/// Folds a change made by a thread whose state is gone straight into the global figures.
#[cold]
fn teardown_change(bytes: i64, blocks: i64) {
    let mut p = Pending {
        bytes,
        blocks,
        limit: 0,
    };
    stats::refresh(&mut p);
    stats::flush(&mut p);
}

/// Clears the guard set by `State::capture_site` and restores the slots it closed.
struct Busy<'a> {
    st: &'a State,
    direct: *const Slot,
    exact: *const Slot,
    fast: *const Slot,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.st.busy.set(false);
        self.st.set_doors(self.direct, self.exact, self.fast);
    }
}

/// How far above the global peak a thread's highs may go before it raises the peak (see
/// `State::high_unpublished`).
const HIGH_SLACK: i64 = 64 * 1024;

/// Runs `f` with the thread's context when the direct slot is open (the thread has a slot of its
/// own, is not inside heapdelta, and `HEAPDELTA` has been read); `None` otherwise, without
/// running it.
#[inline(always)]
pub fn fast<R>(f: impl FnOnce(&Ctx) -> R) -> Option<R> {
    STATE
        .try_with(|st| {
            let slot = st.direct.get();
            if slot.is_null() {
                return None;
            }
            // SAFETY: a non-null `direct` was set from a `&'static Slot`.
            let slot = unsafe { &*slot };
            Some(f(&Ctx {
                st: Some(st),
                slot,
                shared: false,
            }))
        })
        .ok()
        .flatten()
}

/// The fast path of an allocation of `size` bytes without a call site (or, with `sampled`, one
/// the sampler does not pick) that does not reach the peak (through `Door::Scoped`: that stays
/// below `high_ceiling`, see `State::admit`). Counts the block and returns its header; returns
/// `None` having changed nothing when that does not hold or `door` is closed, so the caller runs
/// the general path instead.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn fast_alloc(size: usize, sampled: bool, door: Door) -> Option<Header> {
    // Borrowed outside `try_with`, whose closure the compiler may keep out of line.
    let st = state()?;
    let (slot, bytes, high) = st.open_for_alloc(door, size)?;
    if sampled && !st.sampler.skip(size) {
        return None;
    }
    let tag = st.tag_through(door);
    st.commit_alloc(slot, size, bytes, tag, None);
    if high {
        st.note_high();
    }
    Some(slot.bare().with(0, tag))
}

/// The path of an allocation of `size` bytes with an exact call site (at most `depth` frames),
/// in a scope or not. When the thread can record directly (the `exact` door is open; the `direct`
/// one when `overridden`, for a tracker whose exact sites `HEAPDELTA` asks for), captures the
/// site, starting from the frame of the function this is inlined into, then counts the block
/// there and returns `Ok` with its header, or, when the block goes past `high_ceiling` (see
/// `State::admit`) or the site's counters are not allocated yet, returns `Err(Some(site))`
/// having counted nothing. Returns `Err(None)`, capturing nothing, when the door is closed.
///
/// Every exact allocation the thread records directly is captured here, from the same frame,
/// whichever path then counts it, so one call site always gives the same stack.
#[inline(always)]
pub fn alloc_exact(size: usize, depth: usize, overridden: bool) -> Result<Header, Option<u32>> {
    // With the capture inside `try_with`'s closure, `try_with` was compiled as a function of its
    // own, one more frame for every capture to walk.
    let st = state().ok_or(None)?;
    let slot = match overridden {
        false => st.exact.get(),
        true => st.direct.get(),
    };
    if slot.is_null() {
        return Err(None);
    }
    // SAFETY: a non-null `exact` or `direct` was set from a `&'static Slot`, the thread's private
    // one.
    let slot = unsafe { &*slot };
    let (site, kept) = st.capture_site(depth, Some(slot));
    let (bytes, high) = st.admit_alloc(size).ok_or(Some(site))?;
    let counters = match (kept, site) {
        (Some(kept), _) => Some(kept),
        (None, 0) => None,
        (None, _) => Some(slot.site_ready(site).ok_or(Some(site))?),
    };
    let tag = st.tag.get();
    st.commit_alloc(slot, size, bytes, tag, counters);
    if high {
        st.note_high();
    }
    Ok(slot.bare().with(site, tag))
}

/// The inlined path of freeing a block of `size` bytes without a call site or a scope tag,
/// counted with exact weights and born in the current epoch (`h` is the slot's `bare` header):
/// counts it and returns `true`, or returns `false` having changed nothing when `h` is any other
/// header or the general path must run (as for `fast_alloc`, or when the fall in live bytes must
/// be folded into the global figure).
#[inline(always)]
pub fn fast_free(h: Header, size: usize) -> bool {
    // One compare checks the magic bits, that the block is bare, and that it is young (the
    // general path counts old blocks).
    fast_free_with(h, size, Door::Plain, |_, bare| {
        (h == bare).then_some((None, true))
    })
}

/// `fast_free` for a block with a call site, outside scopes (`h.is_plain()`, `h.site() != 0`),
/// which is counted at the site too; `false` also when the site's counters are not allocated yet.
#[inline(always)]
pub fn fast_free_sited(h: Header, size: usize) -> bool {
    fast_free_with(h, size, Door::Plain, |slot, bare| {
        let young = h.epoch() == bare.epoch();
        slot.site_ready(h.site()).map(|c| (Some(c), young))
    })
}

/// `fast_free` for any block counted with exact weights (`h.is_exact()`), in a scope or not: its
/// tag and call site, if it has them, are counted too; `false` also when the site's counters are
/// not allocated yet.
#[inline(always)]
pub fn fast_free_exact(h: Header, size: usize) -> bool {
    fast_free_with(h, size, Door::Scoped, |slot, bare| {
        let young = h.epoch() == bare.epoch();
        match h.site() {
            0 => Some((None, young)),
            site => slot.site_ready(site).map(|c| (Some(c), young)),
        }
    })
}

/// The body of the fast frees: `site`, given the slot and its `bare` header, gives the block's
/// site counters (`None`: no site) and whether it is young, or `None` when the general path must
/// run. Through `Door::Plain` the block has no tag.
#[inline(always)]
fn fast_free_with(
    h: Header,
    size: usize,
    door: Door,
    site: impl FnOnce(&'static Slot, Header) -> Option<(Option<&'static SiteCnt>, bool)>,
) -> bool {
    // Borrowed outside `try_with`, whose closure was left out of line in
    // `Tracker::on_free_general`.
    let Some(st) = state() else {
        return false;
    };
    let Some((slot, bytes)) = st.open_for_free(door, size) else {
        return false;
    };
    let Some((counters, young)) = site(slot, slot.bare()) else {
        return false;
    };
    st.pending_bytes.set(bytes);
    st.pending_blocks
        .set(st.pending_blocks.get().wrapping_sub(1));
    let tag = match door {
        Door::Plain => 0,
        Door::Scoped => h.tag(),
    };
    slot.free(size, tag, young, false);
    if let Some(c) = counters {
        c.free(stats::UNIT, size as u64, young, false);
    }
    true
}

/// The thread's state, borrowed outside `try_with` (the compiler may keep a `try_with` closure
/// out of line, a call on a fast path); `None` once the thread's state is destroyed. The reference
/// must only be used during the call that obtained it.
#[inline(always)]
fn state<'a>() -> Option<&'a State> {
    let st = STATE.try_with(|st| st as *const State).ok()?;
    // SAFETY: `STATE` is `const`-initialised and has no destructor, so its storage lives until
    // this thread exits; callers use the reference only during their own call, on this thread.
    Some(unsafe { &*st })
}

impl State {
    /// The pending bytes with a new block of `size` bytes, and whether they are a new high, when
    /// the block can be counted on an out-of-line fast path (see `admit`).
    #[inline(always)]
    fn admit_alloc(&self, size: usize) -> Option<(i64, bool)> {
        let bytes = self.pending_bytes.get().wrapping_add(size as i64);
        Some((bytes, self.admit(bytes)?))
    }

    /// Counts a new block of `size` bytes on a fast path: `bytes` is from `admit_alloc(size)`,
    /// `tag` its scope tag, `site` the counters of its call site, if it has one.
    #[inline(always)]
    fn commit_alloc(&self, slot: &Slot, size: usize, bytes: i64, tag: u8, site: Option<&SiteCnt>) {
        self.pending_bytes.set(bytes);
        self.pending_blocks
            .set(self.pending_blocks.get().wrapping_add(1));
        slot.alloc(size, tag, false);
        if let Some(c) = site {
            c.alloc(stats::UNIT, size as u64, false);
        }
    }
}

/// Runs `f` with the thread's context when the direct slot is closed: claims the thread's slot on
/// its first event, uses the shared slot during teardown, and returns `None` without running `f`
/// when the thread is inside heapdelta (a nested allocation, which must not be recorded).
#[cold]
#[inline(never)]
pub fn record_slow<R>(f: impl FnOnce(&Ctx) -> R) -> Option<R> {
    let mut f = Some(f);
    let in_thread = STATE.try_with(|st| {
        if st.busy.get() {
            return None;
        }
        let slot = slot_of(st);
        // A thread that claimed its slot while another was reading `HEAPDELTA` starts on this
        // path; it moves to the fast one here once the configuration is known.
        st.refresh_fast();
        f.take().map(|f| {
            f(&Ctx {
                st: Some(st),
                slot,
                shared: stats::is_shared(slot),
            })
        })
    });
    match in_thread {
        Ok(r) => r,
        // The thread's state is gone (teardown): count into the shared slot.
        Err(_) => f.take().map(|f| f(&Ctx::teardown())),
    }
}

/// Like `record_slow`, but also runs inside heapdelta (for frees, which only count and never
/// allocate, and must be counted whoever triggers them).
#[cold]
#[inline(never)]
pub fn record_always_slow(f: impl FnOnce(&Ctx)) {
    let mut f = Some(f);
    let _ = STATE.try_with(|st| {
        let slot = slot_of(st);
        if let Some(f) = f.take() {
            f(&Ctx {
                st: Some(st),
                slot,
                shared: stats::is_shared(slot),
            });
        }
    });
    if let Some(f) = f.take() {
        f(&Ctx::teardown());
    }
}

impl Ctx<'_> {
    /// The context of a thread whose state is gone: the shared slot, nothing pending.
    fn teardown() -> Ctx<'static> {
        Ctx {
            st: None,
            slot: stats::shared_slot(),
            shared: true,
        }
    }
}

#[inline]
fn slot_of(st: &State) -> &'static Slot {
    let slot = st.slot.get();
    if slot.is_null() {
        return claim(st);
    }
    // SAFETY: `slot` was set from a `&'static Slot`.
    unsafe { &*slot }
}

#[cold]
fn claim(st: &State) -> &'static Slot {
    let was = st.set_busy(true);
    let (i, mut slot) = stats::claim();
    // Registering the destructor may allocate; the guard is set, so that allocation is untracked.
    let own = OWNER.try_with(|_| ()).is_ok();
    if own {
        st.index.set(i);
        st.owned.set(true);
    } else {
        // Too late to register: give the slot back and use the shared one from now on.
        stats::release(i);
        slot = stats::shared_slot();
    }
    st.slot.set(slot);
    config::apply_once();
    if own {
        // Each slot's sampler starts from its own seed, fixed but for `HEAPDELTA`'s `seed=`
        // (read just above), so runs are repeatable.
        let seed = config::sampling_seed().wrapping_mul(0xD1B5_4A32_D192_ED03);
        st.sampler.reseed(
            0x5EED_0000_0000_0000 ^ seed ^ u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
    }
    st.set_busy(was);
    slot
}

/// Whether an allocation now is one of heapdelta's own (the thread is inside heapdelta, so it is
/// not counted) that a tracker over a stateful allocator takes from `System` (see
/// `Tracker::OWN_FROM_SYSTEM`): not inside `probe_inner`.
#[inline(always)]
pub fn own_to_system() -> bool {
    state().is_some_and(|st| st.busy.get() && !st.probing.get())
}

/// Runs `f` with heapdelta's own allocations going to the inner allocator, as they do under
/// `System`: for `pool_stats`'s probe, which must land in the global pool to find it.
pub fn probe_inner<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(was) = self.0 {
                let _ = STATE.try_with(|st| st.probing.set(was));
            }
        }
    }
    let _restore = Restore(STATE.try_with(|st| st.probing.replace(true)).ok());
    f()
}

/// Runs heapdelta's own work (building snapshots, resolving symbols) with the guard set, so its
/// allocations are not counted.
pub fn untracked<R>(f: impl FnOnce() -> R) -> R {
    let prev = STATE.try_with(|st| st.set_busy(true)).ok();
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(prev) = self.0 {
                let _ = STATE.try_with(|st| st.set_busy(prev));
            }
        }
    }
    let _restore = Restore(prev);
    f()
}

/// Raises the global peak to the calling thread's highest live figure since it last did (see
/// `State::high_unpublished`), so that a snapshot taken on this thread sees its peak.
pub fn publish_high() {
    let _ = STATE.try_with(State::publish_high);
}

/// The calling thread's own slot (claimed now if needed), or `None` during teardown.
pub fn own_slot() -> Option<&'static Slot> {
    STATE.try_with(slot_of).ok()
}

/// Sets the thread's scope tag and returns the previous one.
pub fn set_tag(tag: u8) -> u8 {
    STATE
        .try_with(|st| {
            let previous = st.tag.replace(tag);
            st.refresh_fast();
            previous
        })
        .unwrap_or(0)
}
