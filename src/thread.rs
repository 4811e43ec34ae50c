//! Per-thread state: the reentrancy guard, the thread's counter slot, and its pending live change.
//!
//! Everything here is `const`-initialised and read with `try_with`, so it works during thread
//! start-up and teardown. The guard is set while heapdelta itself runs (recording an event,
//! building a snapshot, resolving symbols); allocations made meanwhile are passed straight to the
//! inner allocator and marked untracked, which is what makes the tracker safe to re-enter.

use std::cell::Cell;

use crate::stats::{self, Pending, Slot};

const NO_SLOT: u16 = u16::MAX;

struct State {
    busy: Cell<bool>,
    slot: Cell<u16>,
    pending: Cell<Pending>,
    tag: Cell<u8>,
    sample_countdown: Cell<i64>,
    rng: Cell<u64>,
}

thread_local! {
    static STATE: State = const {
        State {
            busy: Cell::new(false),
            slot: Cell::new(NO_SLOT),
            pending: Cell::new(Pending { bytes: 0, blocks: 0 }),
            tag: Cell::new(0),
            sample_countdown: Cell::new(0),
            rng: Cell::new(0),
        }
    };
    /// Owns the thread's slot; its destructor gives the slot back when the thread exits.
    static OWNER: Owner = const { Owner };
}

struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = STATE.try_with(|st| {
            let mut p = st.pending.get();
            stats::flush(&mut p);
            st.pending.set(p);
            let i = st.slot.replace(0);
            stats::release(i);
        });
    }
}

/// What a recording step can use: the thread's slot and its state.
pub struct Ctx<'a> {
    st: Option<&'a State>,
    /// The slot counters go to.
    pub slot: &'static Slot,
}

impl Ctx<'_> {
    /// Applies a live change for the peak.
    #[inline]
    pub fn note_live(&self, bytes: i64, blocks: i64) {
        match self.st {
            Some(st) => {
                let mut p = st.pending.get();
                stats::note_live(&mut p, bytes, blocks);
                st.pending.set(p);
            }
            None => {
                let mut p = Pending::default();
                stats::note_live(&mut p, bytes, blocks);
                stats::flush(&mut p);
            }
        }
    }

    /// The innermost scope tag of the thread (0: none).
    #[inline]
    pub fn tag(&self) -> u8 {
        self.st.map_or(0, |st| st.tag.get())
    }

    /// The thread's sampler state: bytes left until the next sample, and the PRNG state.
    #[inline]
    pub fn sampler(&self) -> Option<(&Cell<i64>, &Cell<u64>)> {
        self.st.map(|st| (&st.sample_countdown, &st.rng))
    }
}

struct Busy<'a>(&'a Cell<bool>);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// Runs `f` with the thread's context while the guard is set, or returns `None` when the thread is
/// already inside heapdelta (a nested allocation, which must not be recorded).
#[inline]
pub fn record<R>(f: impl FnOnce(&Ctx) -> R) -> Option<R> {
    let mut f = Some(f);
    let in_thread = STATE.try_with(|st| {
        if st.busy.get() {
            return None;
        }
        st.busy.set(true);
        let _busy = Busy(&st.busy);
        let slot = slot_of(st);
        f.take().map(|f| f(&Ctx { st: Some(st), slot }))
    });
    match in_thread {
        Ok(r) => r,
        // The thread's state is gone (teardown): count into the shared slot.
        Err(_) => f.take().map(|f| {
            f(&Ctx {
                st: None,
                slot: stats::shared_slot(),
            })
        }),
    }
}

/// Like `record`, but also runs when the guard is already set (for frees, which only count and
/// never allocate, and must be counted whoever triggers them).
#[inline]
pub fn record_always(f: impl FnOnce(&Ctx)) {
    let mut f = Some(f);
    let _ = STATE.try_with(|st| {
        let was = st.busy.replace(true);
        let slot = slot_of(st);
        if let Some(f) = f.take() {
            f(&Ctx { st: Some(st), slot });
        }
        st.busy.set(was);
    });
    if let Some(f) = f.take() {
        f(&Ctx {
            st: None,
            slot: stats::shared_slot(),
        });
    }
}

#[inline]
fn slot_of(st: &State) -> &'static Slot {
    let i = st.slot.get();
    if i != NO_SLOT {
        return stats::slot(i);
    }
    let (i, slot) = stats::claim();
    st.slot.set(i);
    // Registering the destructor may allocate; the guard is set, so that allocation is untracked.
    if OWNER.try_with(|_| ()).is_err() {
        // Too late to register: give the slot back and use the shared one from now on.
        stats::release(i);
        st.slot.set(0);
        return stats::shared_slot();
    }
    slot
}

/// Runs heapdelta's own work (building snapshots, resolving symbols) with the guard set, so its
/// allocations are not counted.
pub fn untracked<R>(f: impl FnOnce() -> R) -> R {
    let prev = STATE.try_with(|st| st.busy.replace(true)).ok();
    struct Restore(Option<bool>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(prev) = self.0 {
                let _ = STATE.try_with(|st| st.busy.set(prev));
            }
        }
    }
    let _restore = Restore(prev);
    f()
}

/// The calling thread's own slot (claimed now if needed), or `None` during teardown.
pub fn own_slot() -> Option<&'static Slot> {
    untracked(|| STATE.try_with(slot_of).ok())
}

/// Sets the thread's scope tag and returns the previous one.
pub fn set_tag(tag: u8) -> u8 {
    STATE.try_with(|st| st.tag.replace(tag)).unwrap_or(0)
}
