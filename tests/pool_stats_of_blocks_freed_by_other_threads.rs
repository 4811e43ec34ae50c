//! `pool_stats()` does not count as in use the blocks a thread freed into another thread's heap,
//! which wait there until that heap's thread (or, once it has exited, another) frees them.

use std::sync::{mpsc, Mutex};

#[global_allocator]
static GLOBAL: heapdelta::Pool = heapdelta::Pool::new();

/// Held by each test: each reads the whole pool's bytes in use.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn in_use() -> u64 {
    heapdelta::pool_stats()
        .expect("a pool is the global allocator")
        .bytes_in_use
}

#[test]
fn blocks_freed_into_an_exited_threads_heap_are_not_counted_as_in_use() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const BLOCKS: usize = 2000;
    let before = in_use();
    let (to_main, from_worker) = mpsc::channel::<Vec<Box<[u8; 40]>>>();
    let (to_worker, from_main) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let blocks: Vec<Box<[u8; 40]>> = (0..BLOCKS).map(|i| Box::new([i as u8; 40])).collect();
        to_main.send(blocks).expect("main receives");
        // Alive while main frees the blocks, so they go on this heap's remote list; then it
        // exits without allocating again.
        from_main.recv().expect("main says when");
    });
    let blocks = from_worker.recv().expect("the worker sends");
    drop(blocks);
    to_worker.send(()).expect("the worker waits");
    worker.join().expect("the worker ends");
    let after = in_use();
    assert!(
        after < before + (BLOCKS as u64 * 48) / 10,
        "in use {before} B before the worker, {after} B after it ended"
    );
}

#[test]
fn blocks_freed_into_a_running_threads_heap_are_not_counted_as_in_use() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    const BLOCKS: usize = 2000;
    let (to_main, from_worker) = mpsc::channel::<Vec<Box<[u8; 40]>>>();
    let (to_worker, from_main) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let blocks: Vec<Box<[u8; 40]>> = (0..BLOCKS).map(|i| Box::new([i as u8; 40])).collect();
        to_main.send(blocks).expect("main receives");
        // Alive, and not allocating, while main frees the blocks and reads the stats: the blocks
        // wait on this heap's remote list meanwhile.
        from_main.recv().expect("main says when");
    });
    let blocks = from_worker.recv().expect("the worker sends");
    let held = in_use();
    drop(blocks);
    let freed = in_use();
    to_worker.send(()).expect("the worker waits");
    worker.join().expect("the worker ends");
    assert!(
        held >= BLOCKS as u64 * 48 && freed + BLOCKS as u64 * 48 <= held,
        "in use {held} B with the worker's blocks held, {freed} B once main freed them"
    );
}
