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

const BLOCKS: usize = 2000;

/// Runs `main_side` on `BLOCKS` blocks a worker allocated, while the worker stays alive without
/// allocating (so blocks freed meanwhile wait on its heap's remote list); then lets the worker
/// exit, joins it, and returns what `main_side` returned.
fn with_the_blocks_of_a_waiting_worker<R>(main_side: impl FnOnce(Vec<Box<[u8; 40]>>) -> R) -> R {
    let (to_main, from_worker) = mpsc::channel::<Vec<Box<[u8; 40]>>>();
    let (to_worker, from_main) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let blocks: Vec<Box<[u8; 40]>> = (0..BLOCKS).map(|i| Box::new([i as u8; 40])).collect();
        to_main.send(blocks).expect("main receives");
        from_main.recv().expect("main says when");
    });
    let r = main_side(from_worker.recv().expect("the worker sends"));
    to_worker.send(()).expect("the worker waits");
    worker.join().expect("the worker ends");
    r
}

#[test]
fn blocks_freed_into_an_exited_threads_heap_are_not_counted_as_in_use() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = in_use();
    with_the_blocks_of_a_waiting_worker(drop);
    let after = in_use();
    assert!(
        after < before + (BLOCKS as u64 * 48) / 10,
        "in use {before} B before the worker, {after} B after it ended"
    );
}

#[test]
fn blocks_freed_into_a_running_threads_heap_are_not_counted_as_in_use() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (held, freed) = with_the_blocks_of_a_waiting_worker(|blocks| {
        let held = in_use();
        drop(blocks);
        (held, in_use())
    });
    // Counted as in use, the blocks waiting would leave the figure where it was. (The figure is
    // the whole process's: the other test's thread, starting meanwhile, can allocate a few blocks
    // between the two reads; a CI run saw 16 B.)
    let others = 1024;
    assert!(
        held >= BLOCKS as u64 * 48 && freed + BLOCKS as u64 * 48 <= held + others,
        "in use {held} B with the worker's blocks held, {freed} B once main freed them"
    );
}
