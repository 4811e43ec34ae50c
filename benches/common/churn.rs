//! The churn workloads the benches share (called through `GlobalAlloc` directly):
//! - `small_churn`: 1,000 live blocks of random sizes 8–512 B; each op frees one and allocates
//!   a replacement;
//! - `mixed_churn`: the same with sizes log-uniform over 8 B–64 KiB;
//! - `small_churn_2t`: `small_churn` on two threads at once;
//! - `small_churn_3sites`: `small_churn` with the allocations made from three functions in turn,
//!   so exact call sites never see the same stack twice in a row, as in most programs;
//! - `small_churn_8sites`: from eight functions in turn, as many places as a thread's capture
//!   buffer remembers;
//! - `small_churn_16sites_random`: from sixteen functions in no particular order, so that the
//!   guess of which stack comes next fails: with frame pointers each stack is then found by where
//!   its walk starts (without them, among the unwinder's 32 remembered walks);
//! - `small_churn_64sites_random`: from sixty-four functions in no particular order (of up to
//!   256, `timed_places`), more than a thread's capture buffer remembered when it kept 32 stacks;
//! - `thread_churn`: a thread per task, as a program that spawns a thread for each piece of
//!   work does: threads started in waves of eight, each making 400 allocations of 8–512 B from
//!   three call sites in turn and freeing them, then exiting;
//! - `growth`: a leaking loop: each op keeps a 64-B block and allocates and frees a temporary of
//!   8–1,024 B, starting from the process's peak, so about a third of the temporaries reach a new
//!   peak (the others stay below recent, larger ones).

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Live blocks in every workload.
pub const LIVE: usize = 1000;
/// Operations per criterion iteration.
pub const OPS: u64 = 1000;

/// `a.alloc(layout)` in a function of its own. A program reaches its global allocator through
/// `__rust_alloc`, a function made for it, so the allocator's code is compiled apart from the
/// program's loop; inlined into the churn loop instead, how the compiler arranged the two together
/// moved the figures (a loop whose random number lived in memory measured the tracker 1.40x
/// `System`, 1.14x once it lived in a register).
///
/// # Safety
/// As for `GlobalAlloc::alloc`.
#[inline(never)]
pub unsafe fn shim_alloc<A: GlobalAlloc>(a: &A, layout: Layout) -> *mut u8 {
    // SAFETY: the caller's contract, passed on.
    unsafe { a.alloc(layout) }
}

/// `a.dealloc(ptr, layout)` in a function of its own, as `shim_alloc`.
///
/// # Safety
/// As for `GlobalAlloc::dealloc`.
#[inline(never)]
pub unsafe fn shim_dealloc<A: GlobalAlloc>(a: &A, ptr: *mut u8, layout: Layout) {
    // SAFETY: the caller's contract, passed on.
    unsafe { a.dealloc(ptr, layout) }
}

/// The churn workload: `LIVE` live blocks; each operation frees one at random and allocates its
/// replacement.
pub struct Churn {
    live: Vec<(*mut u8, Layout)>,
    rng: u64,
    log_sizes: bool,
}

impl Churn {
    /// Allocates the live blocks from `a`; sizes are 8–512 B, or log-uniform over 8 B–64 KiB
    /// with `log_sizes`.
    pub fn new<A: GlobalAlloc>(a: &A, log_sizes: bool, seed: u64) -> Churn {
        let mut c = Churn {
            live: Vec::with_capacity(LIVE),
            rng: seed | 1,
            log_sizes,
        };
        for _ in 0..LIVE {
            let l = c.layout();
            // SAFETY: non-zero size.
            let p = unsafe { shim_alloc(a, l) };
            c.live.push((p, l));
        }
        c
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn layout(&mut self) -> Layout {
        let size = if self.log_sizes {
            let r = self.next();
            let bits = 3 + (r % 14) as u32; // 8 B .. 64 KiB
            (1usize << bits) + ((r >> 8) as usize & ((1 << bits) - 1))
        } else {
            8 + (self.next() % 505) as usize
        };
        Layout::from_size_align(size.min(65536), 8).unwrap()
    }

    /// `ops` operations on `a`.
    pub fn run<A: GlobalAlloc>(&mut self, a: &A, ops: u64) {
        self.run_with(a, ops, alloc_here::<A>);
    }

    /// `run`, with the allocations made from three call sites in turn (as a program's usually
    /// are), so no capture finds the stack of the one before.
    pub fn run_three_sites<A: GlobalAlloc>(&mut self, a: &A, ops: u64) {
        self.run_with(a, ops, alloc_at_three_sites::<A>);
    }

    /// `run`, with the allocations made from eight call sites in turn.
    pub fn run_eight_sites<A: GlobalAlloc>(&mut self, a: &A, ops: u64) {
        self.run_with(a, ops, |a, l, op| alloc_at_sites(a, l, op % 8));
    }

    /// `run`, with the allocations made from sixteen call sites in an order without a pattern
    /// (SplitMix64's mix of the operation's number: the same order in every run).
    pub fn run_sixteen_random_sites<A: GlobalAlloc>(&mut self, a: &A, ops: u64) {
        self.run_with(a, ops, |a, l, op| {
            let mut z = op.wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            alloc_at_sites(a, l, (z ^ (z >> 31)) >> 60)
        });
    }

    /// `ops` operations, each freeing a random live block and allocating its replacement with
    /// `alloc(a, layout, op)`: a function marked `#[inline(always)]` (a closure could be left out
    /// of line, which would add a call to every allocation for some allocators and not others).
    #[inline(always)]
    fn run_with<A: GlobalAlloc>(
        &mut self,
        a: &A,
        ops: u64,
        mut alloc: impl FnMut(&A, Layout, u64) -> *mut u8,
    ) {
        for op in 0..ops {
            let i = (self.next() % LIVE as u64) as usize;
            let (p, l) = self.live[i];
            // SAFETY: `p` is live with `l`.
            unsafe { shim_dealloc(a, p, l) };
            let l = self.layout();
            let p = alloc(a, l, op);
            // SAFETY: the block has at least one byte.
            unsafe { p.write(1) };
            self.live[i] = (black_box(p), l);
        }
    }

    /// Frees the live blocks.
    pub fn free_all<A: GlobalAlloc>(self, a: &A) {
        for (p, l) in self.live {
            // SAFETY: `p` is live with `l`.
            unsafe { shim_dealloc(a, p, l) };
        }
    }
}

/// Allocates from the churn loop itself.
#[inline(always)]
fn alloc_here<A: GlobalAlloc>(a: &A, l: Layout, _op: u64) -> *mut u8 {
    // SAFETY: every layout has a non-zero size.
    unsafe { shim_alloc(a, l) }
}

/// Allocates from one of three functions, in turn.
#[inline(always)]
fn alloc_at_three_sites<A: GlobalAlloc>(a: &A, l: Layout, op: u64) -> *mut u8 {
    match op % 3 {
        0 => alloc_at_first_site(a, l),
        1 => alloc_at_second_site(a, l),
        _ => alloc_at_third_site(a, l),
    }
}

#[inline(never)]
fn alloc_at_first_site<A: GlobalAlloc>(a: &A, l: Layout) -> *mut u8 {
    // SAFETY: non-zero size.
    black_box(unsafe { shim_alloc(a, l) })
}

#[inline(never)]
fn alloc_at_second_site<A: GlobalAlloc>(a: &A, l: Layout) -> *mut u8 {
    // SAFETY: non-zero size.
    black_box(unsafe { shim_alloc(a, l) })
}

#[inline(never)]
fn alloc_at_third_site<A: GlobalAlloc>(a: &A, l: Layout) -> *mut u8 {
    // SAFETY: non-zero size.
    black_box(unsafe { shim_alloc(a, l) })
}

/// Allocates from the `pick`th of sixteen functions (`pick` < 16).
#[inline(always)]
fn alloc_at_sites<A: GlobalAlloc>(a: &A, l: Layout, pick: u64) -> *mut u8 {
    match pick {
        0 => alloc_at_site::<A, 0>(a, l),
        1 => alloc_at_site::<A, 1>(a, l),
        2 => alloc_at_site::<A, 2>(a, l),
        3 => alloc_at_site::<A, 3>(a, l),
        4 => alloc_at_site::<A, 4>(a, l),
        5 => alloc_at_site::<A, 5>(a, l),
        6 => alloc_at_site::<A, 6>(a, l),
        7 => alloc_at_site::<A, 7>(a, l),
        8 => alloc_at_site::<A, 8>(a, l),
        9 => alloc_at_site::<A, 9>(a, l),
        10 => alloc_at_site::<A, 10>(a, l),
        11 => alloc_at_site::<A, 11>(a, l),
        12 => alloc_at_site::<A, 12>(a, l),
        13 => alloc_at_site::<A, 13>(a, l),
        14 => alloc_at_site::<A, 14>(a, l),
        _ => alloc_at_site::<A, 15>(a, l),
    }
}

/// One of sixteen call sites (`K` keeps their code apart, so none is merged with another).
#[inline(never)]
fn alloc_at_site<A: GlobalAlloc, const K: usize>(a: &A, l: Layout) -> *mut u8 {
    black_box(K);
    // SAFETY: non-zero size.
    black_box(unsafe { shim_alloc(a, l) })
}

/// Most places `run_places` allocates from.
pub const PLACES: usize = 256;

/// One of `PLACES` call sites, `H * 16 + L` (the constants keep their code apart, so none is
/// merged with another).
#[inline(never)]
fn alloc_at_place<A: GlobalAlloc, const H: usize, const L: usize>(a: &A, l: Layout) -> *mut u8 {
    black_box(H * 16 + L);
    // SAFETY: non-zero size.
    black_box(unsafe { shim_alloc(a, l) })
}

/// A place allocating from `a` with a layout.
type Place<A> = fn(&A, Layout) -> *mut u8;

/// The sixteen places `alloc_at_place::<A, H, _>`.
macro_rules! sixteen_places {
    ($a:ty, $h:literal) => {
        [
            alloc_at_place::<$a, $h, 0>,
            alloc_at_place::<$a, $h, 1>,
            alloc_at_place::<$a, $h, 2>,
            alloc_at_place::<$a, $h, 3>,
            alloc_at_place::<$a, $h, 4>,
            alloc_at_place::<$a, $h, 5>,
            alloc_at_place::<$a, $h, 6>,
            alloc_at_place::<$a, $h, 7>,
            alloc_at_place::<$a, $h, 8>,
            alloc_at_place::<$a, $h, 9>,
            alloc_at_place::<$a, $h, 10>,
            alloc_at_place::<$a, $h, 11>,
            alloc_at_place::<$a, $h, 12>,
            alloc_at_place::<$a, $h, 13>,
            alloc_at_place::<$a, $h, 14>,
            alloc_at_place::<$a, $h, 15>,
        ]
    };
}

/// The `PLACES` places, sixteen to a row.
fn places<A: GlobalAlloc>() -> [[Place<A>; 16]; PLACES / 16] {
    [
        sixteen_places!(A, 0),
        sixteen_places!(A, 1),
        sixteen_places!(A, 2),
        sixteen_places!(A, 3),
        sixteen_places!(A, 4),
        sixteen_places!(A, 5),
        sixteen_places!(A, 6),
        sixteen_places!(A, 7),
        sixteen_places!(A, 8),
        sixteen_places!(A, 9),
        sixteen_places!(A, 10),
        sixteen_places!(A, 11),
        sixteen_places!(A, 12),
        sixteen_places!(A, 13),
        sixteen_places!(A, 14),
        sixteen_places!(A, 15),
    ]
}

impl Churn {
    /// `run`, with the allocations made from the first `n` of `PLACES` functions (called
    /// through a table), in an order without a pattern (xorshift, the same in every run).
    pub fn run_places<A: GlobalAlloc>(&mut self, a: &A, ops: u64, n: usize) {
        let table = places::<A>();
        let n = n.clamp(1, PLACES) as u64;
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        self.run_with(a, ops, |a, l, _| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = ((x >> 32) % n) as usize;
            table[k / 16][k % 16](a, l)
        });
    }
}

/// One timed run of `small_churn` from `n` places in no order (`Churn::run_places`) on `a`.
pub fn timed_places<A: GlobalAlloc>(a: &A, ops: u64, n: usize) -> Duration {
    let mut c = Churn::new(a, false, 42);
    let start = Instant::now();
    c.run_places(a, ops, n);
    let t = start.elapsed();
    c.free_all(a);
    t
}

/// `small_churn` on two threads at once, `iters * OPS` operations each.
pub fn two_threads<A: GlobalAlloc + Sync>(a: &'static A, iters: u64) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..2 {
            s.spawn(move || {
                let mut c = Churn::new(a, false, 0x1234_5678 + t);
                c.run(a, iters * OPS);
                c.free_all(a);
            });
        }
    });
    start.elapsed()
}

/// Threads per wave in `thread_churn`: started together, joined together.
const WAVE: usize = 8;

/// One timed run of `thread_churn` on `a`: `waves` waves of `WAVE` threads, each allocating 400
/// blocks of 8–512 B from three call sites in turn (keeping 40 live at a time) and freeing them.
/// Starting and joining the threads is timed too, under every allocator alike.
pub fn thread_churn<A: GlobalAlloc + Sync>(a: &'static A, waves: u64) -> Duration {
    const KEPT: usize = 40;
    const ALLOCATIONS: u64 = 400;
    let start = Instant::now();
    for wave in 0..waves {
        std::thread::scope(|s| {
            for t in 0..WAVE as u64 {
                s.spawn(move || {
                    let mut c = Churn {
                        live: Vec::with_capacity(KEPT),
                        rng: (wave * WAVE as u64 + t) | 1,
                        log_sizes: false,
                    };
                    for op in 0..ALLOCATIONS {
                        if c.live.len() == KEPT {
                            let i = (c.next() % KEPT as u64) as usize;
                            let (p, l) = c.live.swap_remove(i);
                            // SAFETY: allocated below with `l`.
                            unsafe { shim_dealloc(a, p, l) };
                        }
                        let l = c.layout();
                        let p = black_box(alloc_at_three_sites(a, l, op));
                        c.live.push((p, l));
                    }
                    c.free_all(a);
                });
            }
        });
    }
    start.elapsed()
}

/// One timed run of `small_churn` / `mixed_churn` (`log_sizes`) on `a`: `ops` operations after
/// setting up the live blocks, which are freed after the clock stops.
pub fn timed_churn<A: GlobalAlloc>(a: &A, log_sizes: bool, ops: u64) -> Duration {
    let mut c = Churn::new(a, log_sizes, 42);
    let start = Instant::now();
    c.run(a, ops);
    let t = start.elapsed();
    c.free_all(a);
    t
}

/// One timed run of `small_churn_8sites` (`small_churn_16sites_random` with `random`) on `a`.
pub fn timed_many_sites<A: GlobalAlloc>(a: &A, ops: u64, random: bool) -> Duration {
    let mut c = Churn::new(a, false, 42);
    let start = Instant::now();
    if random {
        c.run_sixteen_random_sites(a, ops);
    } else {
        c.run_eight_sites(a, ops);
    }
    let t = start.elapsed();
    c.free_all(a);
    t
}

/// One timed run of `small_churn_3sites` on `a`: `ops` operations from three call sites in turn.
pub fn timed_three_sites<A: GlobalAlloc>(a: &A, ops: u64) -> Duration {
    let mut c = Churn::new(a, false, 42);
    let start = Instant::now();
    c.run_three_sites(a, ops);
    let t = start.elapsed();
    c.free_all(a);
    t
}

/// One timed run of `growth` on `a`: `ops` operations. A ballast block first brings the tracked
/// live bytes up to the peak (heapdelta's counters are process-wide, so earlier runs raised it),
/// so that the run's temporaries reach new peaks; the ballast and the kept blocks are freed after
/// the clock stops.
pub fn timed_growth<A: GlobalAlloc>(a: &A, ops: u64) -> Duration {
    let t = heapdelta::snapshot().totals();
    let ballast =
        Layout::from_size_align((t.peak_bytes - t.live_bytes).max(8) as usize, 8).unwrap();
    // SAFETY: non-zero size.
    let ballast_block = unsafe { shim_alloc(a, ballast) };
    let kept_layout = Layout::from_size_align(64, 8).unwrap();
    let mut kept = Vec::with_capacity(ops as usize);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let start = Instant::now();
    for _ in 0..ops {
        // SAFETY: non-zero sizes; the temporary is freed with the layout it was allocated with.
        unsafe {
            kept.push(black_box(shim_alloc(a, kept_layout)));
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let temp = Layout::from_size_align(8 + (rng % 1017) as usize, 8).unwrap();
            let p = black_box(shim_alloc(a, temp));
            shim_dealloc(a, p, temp);
        }
    }
    let t = start.elapsed();
    for p in kept {
        // SAFETY: each was allocated with `kept_layout`.
        unsafe { shim_dealloc(a, p, kept_layout) };
    }
    // SAFETY: allocated above with `ballast`.
    unsafe { shim_dealloc(a, ballast_block, ballast) };
    t
}
