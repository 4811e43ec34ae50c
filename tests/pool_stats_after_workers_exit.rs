//! `pool_stats()` leaves out of its counts the blocks other threads freed into the heap of a thread
//! that has since exited, instead of counting them as in use until another thread takes that heap
//! over.

use std::sync::mpsc;

#[global_allocator]
static GLOBAL: heapdelta::Pool = heapdelta::Pool::new();

fn in_use() -> u64 {
    heapdelta::pool_stats()
        .expect("a pool is the global allocator")
        .bytes_in_use
}

#[test]
fn blocks_freed_into_an_exited_threads_heap_are_not_counted_as_in_use() {
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
