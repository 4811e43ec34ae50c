//! The scenarios of `own_blocks_under_a_strict_inner.rs` (included with `#[path]`), run one after
//! the other by a single test, since some compare process-wide totals.
//! Each file defines `fn in_inner(p, align) -> Option<bool>`: whether the block at user pointer
//! `p` is the inner allocator's (`None`: cannot tell), and `fn fail_inner(on: bool) -> bool`,
//! which makes the inner allocator fail on this thread (returns whether it can).

use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, Layout};

use crate::strict::{check, fill, inside, ALIGNS_TO_TRY};
use crate::{fail_inner, in_inner};

// Each file also defines `const HAS_POOL: bool`: whether `pool_stats` finds a global pool.

fn expect_inner(p: *const u8, align: usize, want: bool) {
    if let Some(got) = in_inner(p, align) {
        assert_eq!(
            got, want,
            "block {p:?} of alignment {align}: the inner allocator's?"
        );
    }
}

const SIZES: [usize; 6] = [1, 7, 8, 24, 100, 5000];

pub fn a_tracked_block_goes_to_system_inside_and_back_outside_for_every_alignment() {
    for align in ALIGNS_TO_TRY {
        for size in SIZES {
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY (this block and the scenarios' others): each block goes through the global
            // allocator with the layout it has at that moment, valid from `Layout::from_size_align`,
            // and only bytes `fill` wrote are read.
            let (_, d) = heapdelta::measure(|| unsafe {
                let p = alloc(l);
                assert!(!p.is_null());
                expect_inner(p, align, true);
                fill(p, size, 3);
                // Grown inside heapdelta: to System, the old block counted as freed.
                let q = inside(|| realloc(p, l, size * 3));
                assert!(!q.is_null());
                assert_eq!(q as usize % align, 0);
                expect_inner(q, align, false);
                check(q, size, 3);
                // Grown again inside: stays with System (System.realloc).
                let l3 = Layout::from_size_align(size * 3, align).unwrap();
                let r = inside(|| realloc(q, l3, size * 5));
                assert!(!r.is_null());
                expect_inner(r, align, false);
                assert_eq!(r as usize % align, 0);
                check(r, size, 3);
                // Shrunk outside: back to the inner allocator, counted again.
                let l5 = Layout::from_size_align(size * 5, align).unwrap();
                let s = realloc(r, l5, size * 2);
                assert!(!s.is_null());
                expect_inner(s, align, true);
                assert_eq!(s as usize % align, 0);
                check(s, size, 3);
                dealloc(s, Layout::from_size_align(size * 2, align).unwrap());
            });
            assert_eq!(d.live_bytes(), 0, "align {align} size {size}");
            assert_eq!(d.live_blocks(), 0, "align {align} size {size}");
            assert_eq!(
                d.allocated_bytes(),
                (size + size * 2) as u64,
                "align {align} size {size}"
            );
            assert_eq!(d.allocated_blocks(), 2, "align {align} size {size}");
        }
    }
}

pub fn own_blocks_of_every_alignment_are_freed_and_grown_by_the_program() {
    for align in ALIGNS_TO_TRY {
        for size in SIZES {
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY: as in the first scenario.
            let (_, d) = heapdelta::measure(|| unsafe {
                let (a, z) = inside(|| (alloc(l), alloc_zeroed(l)));
                assert!(!a.is_null() && !z.is_null());
                expect_inner(a, align, false);
                expect_inner(z, align, false);
                assert_eq!(a as usize % align, 0);
                assert_eq!(z as usize % align, 0);
                check_zero(z, size);
                fill(a, size, 9);
                dealloc(z, l); // not counted
                               // Shrunk inside: stays System's.
                let b = if size > 1 {
                    inside(|| realloc(a, l, size / 2))
                } else {
                    a
                };
                let lb =
                    Layout::from_size_align(if size > 1 { size / 2 } else { size }, align).unwrap();
                expect_inner(b, align, false);
                check(b, lb.size(), 9);
                // Grown by the program: the inner allocator's, counted.
                let c = realloc(b, lb, size * 4);
                expect_inner(c, align, true);
                check(c, lb.size(), 9);
                dealloc(c, Layout::from_size_align(size * 4, align).unwrap());
            });
            assert_eq!(d.live_bytes(), 0, "align {align} size {size}");
            assert_eq!(
                d.allocated_bytes(),
                (size * 4) as u64,
                "align {align} size {size}"
            );
            assert_eq!(d.allocated_blocks(), 1, "align {align} size {size}");
        }
    }
}

fn check_zero(p: *const u8, n: usize) {
    for i in 0..n {
        // SAFETY: the caller passes `n` bytes from `alloc_zeroed`.
        assert_eq!(unsafe { *p.add(i) }, 0);
    }
}

pub fn a_failed_move_leaves_the_old_block_and_the_counters_as_they_were() {
    let huge = isize::MAX as usize / 2;
    for align in ALIGNS_TO_TRY {
        let l = Layout::from_size_align(64, align).unwrap();
        // SAFETY: as in the first scenario; a null result leaves the old block as it was.
        unsafe {
            // A tracked block grown inside heapdelta to a size System refuses.
            let p = alloc(l);
            fill(p, 64, 1);
            let before = heapdelta::snapshot().totals();
            let q = inside(|| realloc(p, l, huge));
            assert!(q.is_null(), "align {align}");
            let after = heapdelta::snapshot().totals();
            assert_eq!(before.live_bytes, after.live_bytes, "align {align}");
            assert_eq!(before.total_bytes, after.total_bytes, "align {align}");
            expect_inner(p, align, true);
            check(p, 64, 1);
            // An own block grown inside to a size System refuses (System.realloc).
            let o = inside(|| alloc(l));
            fill(o, 64, 2);
            assert!(inside(|| realloc(o, l, huge)).is_null());
            check(o, 64, 2);
            // An own block grown outside while the inner allocator fails.
            if !fail_inner(false) {
                dealloc(o, l);
                dealloc(p, l);
                continue;
            }
            let before = heapdelta::snapshot().totals();
            fail_inner(true);
            let r = realloc(o, l, 128);
            let r2 = std::hint::black_box(alloc(l));
            fail_inner(false);
            let after = heapdelta::snapshot().totals();
            assert!(
                r.is_null(),
                "realloc of an own block while the inner fails: {r:?} align {align}"
            );
            assert!(r2.is_null(), "alloc while the inner fails: align {align}");
            assert_eq!(before.live_bytes, after.live_bytes, "align {align}");
            assert_eq!(before.total_bytes, after.total_bytes, "align {align}");
            check(o, 64, 2);
            dealloc(o, l);
            dealloc(p, l);
        }
    }
}

pub fn own_blocks_cross_threads_and_are_freed_or_grown_there() {
    for align in ALIGNS_TO_TRY {
        let l = Layout::from_size_align(40, align).unwrap();
        // SAFETY: `l` has a non-zero size.
        let blocks: Vec<usize> = inside(|| (0..4).map(|_| unsafe { alloc(l) } as usize).collect());
        let blocks2 = blocks.clone();
        // SAFETY: the blocks were allocated with `l`; each is freed or grown once, with the layout
        // it has then, the last by the thread's exit path.
        std::thread::spawn(move || unsafe {
            let p = blocks2[0] as *mut u8;
            dealloc(p, l);
            let q = realloc(blocks2[1] as *mut u8, l, 4000);
            expect_inner(q, align, true);
            dealloc(q, Layout::from_size_align(4000, align).unwrap());
            let r = inside(|| realloc(blocks2[2] as *mut u8, l, 4000));
            expect_inner(r, align, false);
            dealloc(r, Layout::from_size_align(4000, align).unwrap());
            // The last one is left to be freed by the thread's exit path (a thread local).
            thread_local! { static KEEP: Keep = const { Keep(0, 0) }; }
            struct Keep(usize, usize);
            impl Drop for Keep {
                fn drop(&mut self) {
                    if self.0 != 0 {
                        let l = Layout::from_size_align(40, self.1).unwrap();
                        // SAFETY: `self.0` is a live block of 40 bytes aligned to `self.1`,
                        // handed over by the spawning thread; each step uses its layout then.
                        unsafe {
                            // Grown inside heapdelta and outside, during teardown.
                            let p = inside(|| realloc(self.0 as *mut u8, l, 80));
                            let l80 = Layout::from_size_align(80, self.1).unwrap();
                            let q = realloc(p, l80, 160);
                            expect_inner(q, self.1, true);
                            let q2 = inside(|| {
                                realloc(q, Layout::from_size_align(160, self.1).unwrap(), 320)
                            });
                            expect_inner(q2, self.1, false);
                            dealloc(q2, Layout::from_size_align(320, self.1).unwrap());
                        }
                    }
                }
            }
            KEEP.with(|k| {
                let k = k as *const Keep as *mut Keep;
                (*k).0 = blocks2[3];
                (*k).1 = align;
            });
        })
        .join()
        .unwrap();
        drop(blocks);
    }
}

pub fn pool_stats_inside_and_outside_heapdelta() {
    // The probe goes through the inner allocator both ways and is given back to it.
    // (The result is dropped inside the measure: it holds a vector when a pool is found.)
    let (r, d) = heapdelta::measure(|| heapdelta::pool_stats().is_some());
    assert_eq!(r, crate::HAS_POOL);
    assert_eq!(d.live_bytes(), 0);
    let (r, d) = heapdelta::measure(|| inside(|| heapdelta::pool_stats().is_some()));
    assert_eq!(r, crate::HAS_POOL);
    assert_eq!(d.live_bytes(), 0);
    assert_eq!(
        d.allocated_bytes(),
        0,
        "the probe inside heapdelta is not counted"
    );
    // Snapshots and reports built while growing program blocks.
    let mut s = String::with_capacity(1);
    for _ in 0..50 {
        use std::fmt::Write as _;
        let a = heapdelta::snapshot();
        write!(s, "{}", heapdelta::snapshot().since(&a)).unwrap();
        s.push_str(&"y".repeat(100));
        s.shrink_to_fit();
    }
    assert!(s.len() > 5000);
}

pub fn many_threads_swap_own_and_tracked_blocks() {
    let (tx, rx) = std::sync::mpsc::channel::<(usize, usize, usize, u8)>();
    let producers: Vec<_> = (0..3)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for i in 0..300usize {
                    let align = ALIGNS_TO_TRY[(i + t) % ALIGNS_TO_TRY.len()];
                    let size = 1 + (i * 37) % 700;
                    let l = Layout::from_size_align(size, align).unwrap();
                    // SAFETY: `l` has a non-zero size.
                    let p = if i % 2 == 0 {
                        inside(|| unsafe { alloc(l) })
                    } else {
                        // SAFETY: as above.
                        unsafe { alloc(l) }
                    };
                    // SAFETY: `p` has `size` bytes.
                    unsafe { fill(p, size, i as u8) };
                    tx.send((p as usize, size, align, i as u8)).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let consumer = std::thread::spawn(move || {
        for (n, (p, size, align, seed)) in rx.into_iter().enumerate() {
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a producer allocated `p` with `l` and filled it; it is grown and freed once.
            unsafe {
                check(p as *const u8, size, seed);
                let q = if n % 3 == 0 {
                    inside(|| realloc(p as *mut u8, l, size + 50))
                } else {
                    realloc(p as *mut u8, l, size + 50)
                };
                check(q, size, seed);
                dealloc(q, Layout::from_size_align(size + 50, align).unwrap());
            }
        }
    });
    for p in producers {
        p.join().unwrap();
    }
    consumer.join().unwrap();
}

/// A thread-local registered before the thread's first heapdelta event, so that its destructor
/// runs after heapdelta's own (`Owner`: the thread's slot given back, the shared slot in use).
pub fn blocks_move_both_ways_in_a_destructor_that_runs_after_heapdeltas() {
    struct Late(std::cell::Cell<usize>);
    impl Drop for Late {
        fn drop(&mut self) {
            let align = self.0.get();
            if align == 0 {
                return;
            }
            let l = Layout::from_size_align(24, align).unwrap();
            // SAFETY: as in the first scenario.
            unsafe {
                let p = alloc(l);
                fill(p, 24, 5);
                expect_inner(p, align, true);
                let q = inside(|| realloc(p, l, 48));
                expect_inner(q, align, false);
                let own = inside(|| alloc_zeroed(l));
                expect_inner(own, align, false);
                let l48 = Layout::from_size_align(48, align).unwrap();
                let r = realloc(q, l48, 96);
                expect_inner(r, align, true);
                check(r, 24, 5);
                dealloc(r, Layout::from_size_align(96, align).unwrap());
                dealloc(own, l);
            }
            LATE_RAN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    static LATE_RAN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! { static LATE: Late = const { Late(std::cell::Cell::new(0)) }; }
    for align in ALIGNS_TO_TRY {
        let before = heapdelta::snapshot().totals();
        std::thread::spawn(move || {
            LATE.with(|l| l.0.set(align));
            let v = vec![1u8; 100];
            drop(v);
        })
        .join()
        .unwrap();
        let after = heapdelta::snapshot().totals();
        // The thread's blocks are all freed; the main thread allocated nothing meanwhile
        // beyond what it frees (the thread handle).
        assert_eq!(after.live_bytes, before.live_bytes, "align {align}");
    }
    assert_eq!(
        LATE_RAN.load(std::sync::atomic::Ordering::SeqCst),
        ALIGNS_TO_TRY.len()
    );
}

pub fn alignments_above_a_page_move_both_ways() {
    for align in [8192usize, 65536, 1 << 20] {
        let l = Layout::from_size_align(3, align).unwrap();
        // SAFETY: as in the first scenario.
        let (_, d) = heapdelta::measure(|| unsafe {
            let p = alloc(l);
            assert_eq!(p as usize % align, 0);
            fill(p, 3, 4);
            let q = inside(|| realloc(p, l, 5000));
            assert_eq!(q as usize % align, 0);
            expect_inner(q, align, false);
            let q = inside(|| realloc(q, Layout::from_size_align(5000, align).unwrap(), 2));
            let r = realloc(q, Layout::from_size_align(2, align).unwrap(), 7);
            assert_eq!(r as usize % align, 0);
            expect_inner(r, align, true);
            check(r, 2, 4);
            dealloc(r, Layout::from_size_align(7, align).unwrap());
        });
        assert_eq!(d.live_bytes(), 0);
        assert_eq!(d.allocated_bytes(), 10);
    }
}
