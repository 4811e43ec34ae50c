//! `Pool` under threads: the pool is this test binary's global allocator (so the test harness,
//! channels and thread spawning all run on it), and explicit pools are shared between threads.

use heapdelta::{pool_stats, Pool, PoolConfig};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::mpsc;
use std::thread;

#[global_allocator]
static GLOBAL: Pool = Pool::new();

/// A block with its layout, sendable to another thread.
struct Block(*mut u8, Layout);
// SAFETY: the block is plain memory owned by whoever holds the `Block`.
unsafe impl Send for Block {}

fn fill(b: &Block, tag: u8) {
    // SAFETY: the block holds `b.1.size()` writable bytes.
    unsafe { std::ptr::write_bytes(b.0, tag, b.1.size()) };
}

fn check(b: &Block, tag: u8) {
    // SAFETY: the block holds `b.1.size()` initialised bytes.
    let s = unsafe { std::slice::from_raw_parts(b.0, b.1.size()) };
    assert!(s.iter().all(|&x| x == tag), "block corrupted");
}

/// Four threads allocate from one pool; every second block is freed by the next thread.
fn churn_with_cross_thread_frees(pool: &'static Pool<System>) {
    const THREADS: usize = 4;
    const ROUNDS: usize = 20_000;
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel::<Block>()).unzip();
    let handles: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(t, rx)| {
            let tx = txs[(t + 1) % THREADS].clone();
            thread::spawn(move || {
                let mut mine = Vec::new();
                let mut seed = t as u64 * 7919 + 1;
                for r in 0..ROUNDS {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let size = 1 + (seed % 700) as usize; // some pass through to System
                    let layout = Layout::from_size_align(size, 8).unwrap();
                    // SAFETY: non-zero size.
                    let p = unsafe { pool.alloc(layout) };
                    assert!(!p.is_null());
                    let b = Block(p, layout);
                    fill(&b, (size % 251) as u8);
                    if r % 2 == 0 {
                        tx.send(b).unwrap();
                    } else {
                        mine.push(b);
                    }
                    while let Ok(b) = rx.try_recv() {
                        check(&b, (b.1.size() % 251) as u8);
                        // SAFETY: allocated by `pool` with this layout on another thread.
                        unsafe { pool.dealloc(b.0, b.1) };
                    }
                    if mine.len() > 500 {
                        let b = mine.swap_remove((seed % 500) as usize);
                        check(&b, (b.1.size() % 251) as u8);
                        // SAFETY: allocated by `pool` with this layout.
                        unsafe { pool.dealloc(b.0, b.1) };
                    }
                }
                drop(tx);
                (mine, rx)
            })
        })
        .collect();
    drop(txs);
    let leftovers: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (mine, rx) in leftovers {
        for b in mine.into_iter().chain(rx.try_iter()) {
            check(&b, (b.1.size() % 251) as u8);
            // SAFETY: allocated by `pool` with this layout.
            unsafe { pool.dealloc(b.0, b.1) };
        }
    }
}

#[test]
fn four_threads_with_cross_thread_frees_end_balanced() {
    static POOL: Pool = Pool::with_config(System, PoolConfig::CPYTHON);
    churn_with_cross_thread_frees(&POOL);
    let s = POOL.stats();
    let in_use: u64 = s.classes.iter().map(|c| c.blocks_in_use).sum();
    assert_eq!((in_use, s.bytes_in_use), (0, 0), "{s:#?}");
    assert_eq!((s.large_blocks, s.large_bytes), (0, 0));
    assert!(s
        .classes
        .iter()
        .all(|c| c.pools == 0 && c.blocks_available == 0));
    assert!(
        s.arenas_current >= 1 && s.arenas_current <= 4,
        "one kept arena per heap at most"
    );
    assert_eq!(s.unused_pools, s.arenas_current * 64);
}

#[test]
fn heap_of_an_exited_thread_is_adopted_not_leaked() {
    static POOL: Pool = Pool::with_config(System, PoolConfig::CPYTHON);
    let layout = Layout::from_size_align(64, 8).unwrap();
    // SAFETY: non-zero size; the block is freed once below.
    let keep = thread::spawn(move || Block(unsafe { POOL.alloc(layout) }, layout))
        .join()
        .unwrap();
    let before = POOL.stats();
    assert_eq!(before.arenas_current, 1);
    // A new thread reuses the dead thread's heap (and its arena) instead of a new one.
    thread::spawn(move || {
        // Move the whole `Block` (it is `Send`; its fields are not).
        let keep = keep;
        // SAFETY: allocated by POOL with this layout; freeing from another thread is allowed;
        // the new block is freed once with its layout.
        unsafe {
            POOL.dealloc(keep.0, keep.1);
            let p = POOL.alloc(layout);
            POOL.dealloc(p, layout);
        }
    })
    .join()
    .unwrap();
    let after = POOL.stats();
    assert_eq!(after.arenas_allocated_total, 1, "{after:#?}");
    assert_eq!(after.classes[3].blocks_in_use, 0);
}

#[test]
fn global_pool_stats_are_found_and_see_live_blocks() {
    let before = pool_stats().expect("the global allocator is a Pool");
    let v: Vec<Box<[u8; 100]>> = (0..10_000).map(|_| Box::new([7u8; 100])).collect();
    let during = pool_stats().unwrap();
    assert!(during.classes[6].blocks_in_use >= before.classes[6].blocks_in_use + 10_000);
    assert!(during.bytes_reserved >= 10_000 * 112);
    drop(v);
    // Threads allocate and free through the global pool while another reads the stats.
    let hs: Vec<_> = (0..3)
        .map(|t| {
            thread::spawn(move || {
                for i in 0..2_000 {
                    if t == 0 {
                        let s = pool_stats().unwrap();
                        assert!(s.bytes_reserved >= s.bytes_in_use);
                    } else {
                        let v = vec![i as u8; 1 + i % 600];
                        assert_eq!(v[0], i as u8);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
}

/// A `Pool` value may move between uses (its state lives behind a stable pointer), and a moved
/// or dropped pool is never mistaken for the global one by `pool_stats()`.
#[test]
fn pools_moved_after_use_stay_valid_and_are_not_the_global_pool() {
    fn make() -> Pool<System> {
        let pool = Pool::with_config(System, PoolConfig::CPYTHON);
        let l = Layout::from_size_align(48, 8).unwrap();
        // SAFETY: non-zero size; freed once.
        unsafe { pool.dealloc(pool.alloc(l), l) };
        pool
    }
    let moved = Box::new(make());
    let l = Layout::from_size_align(48, 8).unwrap();
    // SAFETY: non-zero size; freed once.
    let p = unsafe { moved.alloc(l) };
    assert_eq!(moved.stats().classes[2].blocks_in_use, 1);
    let global = pool_stats().unwrap();
    assert_ne!(global.arenas_allocated_total, 0);
    // SAFETY: allocated above with `l`.
    unsafe { moved.dealloc(p, l) };
    drop(moved);
    assert!(pool_stats().is_some());
}
