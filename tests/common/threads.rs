//! Threads that each hold a block of their own while a test looks.

use std::sync::{Arc, Barrier};

/// Starts `n` threads that each allocate a block with `make` (their first allocation, so each
/// claims its counters then), runs `f` once every one holds its block, then lets them free it and
/// exit, and returns what `f` returned once all have exited.
pub fn while_threads_hold<T: 'static, R>(n: usize, make: fn() -> T, f: impl FnOnce() -> R) -> R {
    let holding = Arc::new(Barrier::new(n + 1));
    let done = Arc::new(Barrier::new(n + 1));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let (holding, done) = (holding.clone(), done.clone());
            std::thread::spawn(move || {
                let block = std::hint::black_box(make());
                holding.wait();
                done.wait();
                drop(block);
            })
        })
        .collect();
    holding.wait();
    let r = f();
    done.wait();
    // `join` returns once a thread has exited, its thread-local destructors included.
    for t in threads {
        t.join().unwrap();
    }
    r
}
