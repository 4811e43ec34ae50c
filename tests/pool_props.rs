//! Property test: random alloc / realloc / free sequences keep the pool's invariants.
//!
//! After every operation: live blocks never overlap (each block is handed out once), their
//! contents survive (including across realloc), free lists are disjoint from each other and from
//! live blocks, pymalloc's structural invariants hold (`Pool::check_invariants`), and the
//! statistics equal a model computed from the live set.
//!
//! Also run under valgrind memcheck in CI (see `.ci/run`).

use heapdelta::{Pool, PoolConfig};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashSet};

#[derive(Clone, Debug)]
enum Op {
    Alloc { size: usize, align: usize },
    Free(usize),
    Realloc(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1usize..=600, prop_oneof![8 => Just(8usize), 1 => Just(16), 1 => Just(64)])
            .prop_map(|(size, align)| Op::Alloc { size, align }),
        3 => any::<usize>().prop_map(Op::Free),
        2 => (any::<usize>(), 1usize..=600).prop_map(|(i, n)| Op::Realloc(i, n)),
    ]
}

struct Live {
    ptr: *mut u8,
    layout: Layout,
    tag: u8,
    /// Size class, `None` for a block of the inner allocator.
    class: Option<usize>,
}

fn fill(l: &Live) {
    // SAFETY: the block holds `layout.size()` writable bytes.
    unsafe { std::ptr::write_bytes(l.ptr, l.tag, l.layout.size()) };
}

fn intact(l: &Live, len: usize) -> bool {
    // SAFETY: the block holds at least `len` initialised bytes.
    unsafe { std::slice::from_raw_parts(l.ptr, len) }
        .iter()
        .all(|&b| b == l.tag)
}

fn run(config: PoolConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut pool = Pool::with_config(System, config);
    let (max_small, align) = (config.max_small, config.alignment);
    let class = |n: usize| (n.max(1) - 1) / align;
    let is_small = |l: &Layout| l.size() <= max_small && l.align() <= align;
    let mut live: Vec<Live> = Vec::new();
    for (k, op) in ops.into_iter().enumerate() {
        let tag = (k % 251) as u8 + 1;
        match op {
            Op::Alloc { size, align } => {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero size.
                let ptr = unsafe { pool.alloc(layout) };
                prop_assert!(!ptr.is_null());
                prop_assert_eq!(ptr as usize % align, 0);
                let class = is_small(&layout).then(|| class(size));
                let l = Live {
                    ptr,
                    layout,
                    tag,
                    class,
                };
                fill(&l);
                live.push(l);
            }
            Op::Free(i) if !live.is_empty() => {
                let l = live.swap_remove(i % live.len());
                prop_assert!(intact(&l, l.layout.size()));
                // SAFETY: allocated by `pool` with this layout, freed once.
                unsafe { pool.dealloc(l.ptr, l.layout) };
            }
            Op::Realloc(i, n) if !live.is_empty() => {
                let i = i % live.len();
                let old = &live[i];
                // SAFETY: allocated by `pool` with this layout; `n > 0`.
                let ptr = unsafe { pool.realloc(old.ptr, old.layout, n) };
                prop_assert!(!ptr.is_null());
                let layout = Layout::from_size_align(n, old.layout.align()).unwrap();
                let class = match old.class {
                    // A large block stays with the inner allocator even when it shrinks.
                    None => None,
                    // In place: the block keeps its class (shrinking by less than 25%).
                    Some(c) if ptr == old.ptr => Some(c),
                    Some(_) => is_small(&layout).then(|| class(n)),
                };
                let moved = Live {
                    ptr,
                    layout,
                    tag: old.tag,
                    class,
                };
                prop_assert!(
                    intact(&moved, n.min(old.layout.size())),
                    "realloc lost data"
                );
                live[i] = Live { tag, ..moved };
                fill(&live[i]);
            }
            _ => {}
        }

        // Every block handed out once: no two live blocks overlap.
        let mut by_addr = BTreeMap::new();
        for l in &live {
            by_addr.insert(l.ptr as usize, l.layout.size());
        }
        prop_assert_eq!(by_addr.len(), live.len(), "a block was handed out twice");
        let mut end = 0;
        for (&a, &s) in &by_addr {
            prop_assert!(a >= end, "live blocks overlap");
            end = a + s;
        }
        // Structural invariants; free lists disjoint from each other and from live blocks.
        let free = pool.check_invariants().map_err(TestCaseError::fail)?;
        let free_set: HashSet<usize> = free.iter().copied().collect();
        prop_assert_eq!(free_set.len(), free.len(), "a block is on two free lists");
        for l in &live {
            prop_assert!(
                !free_set.contains(&(l.ptr as usize)),
                "live block on a free list"
            );
        }
        // Counters equal the model.
        let s = pool.stats();
        let mut blocks = vec![0u64; max_small / align];
        let (mut lb, mut lbytes) = (0u64, 0u64);
        for l in &live {
            match l.class {
                None => {
                    lb += 1;
                    lbytes += l.layout.size() as u64;
                }
                Some(c) => blocks[c] += 1,
            }
        }
        let got: Vec<u64> = s.classes.iter().map(|c| c.blocks_in_use).collect();
        prop_assert_eq!(got, blocks);
        prop_assert_eq!((s.large_blocks, s.large_bytes), (lb, lbytes));
        let in_use: u64 = s
            .classes
            .iter()
            .map(|c| c.blocks_in_use * c.size as u64)
            .sum();
        prop_assert_eq!(s.bytes_in_use, in_use);
        prop_assert_eq!(
            s.bytes_reserved,
            s.arenas_current * config.arena_size as u64
        );
        prop_assert!(s.arenas_current <= s.arenas_highwater);
        prop_assert_eq!(
            s.arenas_reclaimed,
            s.arenas_allocated_total - s.arenas_current
        );
    }
    for l in live {
        // SAFETY: allocated by `pool` with this layout, freed once.
        unsafe { pool.dealloc(l.ptr, l.layout) };
    }
    pool.check_invariants().map_err(TestCaseError::fail)?;
    let s = pool.stats();
    prop_assert_eq!((s.bytes_in_use, s.large_blocks, s.large_bytes), (0, 0, 0));
    if config.release_empty_arenas {
        prop_assert!(
            s.arenas_current <= 1,
            "at most one wholly free arena is kept"
        );
    } else {
        prop_assert_eq!(s.arenas_reclaimed, 0, "legacy pools never release an arena");
    }
    Ok(())
}

proptest! {
    #[test]
    fn random_operations_keep_cpython_pool_invariants(ops in prop::collection::vec(op(), 1..400)) {
        run(PoolConfig::CPYTHON, ops)?;
    }

    #[test]
    fn random_operations_keep_legacy_pool_invariants(ops in prop::collection::vec(op(), 1..400)) {
        run(PoolConfig::CPYTHON_LEGACY, ops)?;
    }
}

/// Enough blocks of one class to fill several arenas, freed in an order that exercises every
/// `insert_to_freepool` case (arena release, push at head, move right, stay).
#[test]
fn filling_and_draining_arenas_keeps_invariants() {
    let mut pool = Pool::with_config(System, PoolConfig::CPYTHON);
    let layout = Layout::from_size_align(512, 8).unwrap();
    // SAFETY: non-zero size; every pointer is freed once below with the same layout.
    let ptrs: Vec<*mut u8> = (0..31 * 64 * 3 + 5)
        .map(|_| unsafe { pool.alloc(layout) })
        .collect();
    assert_eq!(pool.stats().arenas_current, 4);
    let mut order: Vec<usize> = (0..ptrs.len()).collect();
    // A fixed shuffle (a multiplicative permutation).
    let n = order.len();
    order.sort_by_key(|&i| (i * 7919) % n);
    for (k, &i) in order.iter().enumerate() {
        // SAFETY: see above.
        unsafe { pool.dealloc(ptrs[i], layout) };
        if k % 97 == 0 {
            pool.check_invariants().unwrap();
        }
    }
    pool.check_invariants().unwrap();
    let s = pool.stats();
    assert_eq!(
        (s.arenas_current, s.arenas_allocated_total, s.unused_pools),
        (1, 4, 64)
    );
}

/// Ownership is decided by address, as CPython's `address_in_range` does: a block of the inner
/// allocator stays there when reallocated below `max_small`, even if the caller's layout says small.
#[test]
fn large_block_reallocated_to_100_bytes_stays_with_the_inner_allocator() {
    let mut pool = Pool::with_config(System, PoolConfig::CPYTHON);
    let big = Layout::from_size_align(4096, 8).unwrap();
    // SAFETY: non-zero sizes; each block is freed once with its current layout.
    unsafe {
        let p = pool.alloc(big);
        let q = pool.realloc(p, big, 100);
        let s = pool.stats();
        assert_eq!((s.large_blocks, s.large_bytes), (1, 100));
        assert_eq!(s.arenas_current, 0, "no arena for a block that stays large");
        assert!(s.classes.iter().all(|c| c.blocks_in_use == 0));
        pool.dealloc(q, Layout::from_size_align(100, 8).unwrap());
    }
    let s = pool.stats();
    assert_eq!((s.large_blocks, s.large_bytes), (0, 0));
    pool.check_invariants().unwrap();
}

/// Realloc follows SPEC §7: in place while the size stays in (3/4 size, size]; otherwise the new
/// block is allocated before the old one is freed.
#[test]
fn realloc_stays_in_place_only_within_the_class_and_above_three_quarters() {
    let pool = Pool::with_config(System, PoolConfig::CPYTHON);
    let l = Layout::from_size_align(128, 8).unwrap();
    // SAFETY: non-zero sizes; the block is freed once with its final layout.
    unsafe {
        let p = pool.alloc(l);
        assert_eq!(pool.realloc(p, l, 97), p, "97 > 3/4 of 128: in place");
        let l97 = Layout::from_size_align(97, 8).unwrap();
        let q = pool.realloc(p, l97, 96);
        assert_ne!(q, p, "96 = 3/4 of 128: moves");
        let l96 = Layout::from_size_align(96, 8).unwrap();
        let r = pool.realloc(q, l96, 97);
        assert_ne!(r, q, "growing past the class moves");
        pool.dealloc(r, l97);
    }
}

/// Requests aligned above the class alignment pass through to the inner allocator.
#[test]
fn over_aligned_requests_pass_through() {
    let pool = Pool::with_config(System, PoolConfig::CPYTHON);
    let l = Layout::from_size_align(64, 64).unwrap();
    // SAFETY: non-zero size; freed once.
    unsafe {
        let p = pool.alloc(l);
        assert_eq!(p as usize % 64, 0);
        assert_eq!(pool.stats().large_blocks, 1);
        pool.dealloc(p, l);
    }
    assert_eq!(pool.stats().arenas_current, 0);
}

/// `CPYTHON_LEGACY` (before Python 2.5) never gives an arena back, even when all are empty.
#[test]
fn legacy_pool_never_releases_arenas() {
    let mut pool = Pool::with_config(System, PoolConfig::CPYTHON_LEGACY);
    let layout = Layout::from_size_align(256, 8).unwrap();
    // SAFETY: non-zero size; every pointer is freed once below with the same layout.
    let ptrs: Vec<*mut u8> = (0..5_000).map(|_| unsafe { pool.alloc(layout) }).collect();
    let peak = pool.stats().arenas_current;
    assert!(peak > 1);
    for p in ptrs {
        // SAFETY: see above.
        unsafe { pool.dealloc(p, layout) };
    }
    pool.check_invariants().unwrap();
    let s = pool.stats();
    assert_eq!((s.arenas_current, s.arenas_reclaimed), (peak, 0));
    assert_eq!(s.unused_pools, peak * 64);
}
