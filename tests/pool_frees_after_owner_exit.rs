//! A `Pool` frees at once a block whose heap's thread has exited, so that the global figures
//! (`pool_stats`, a checkpoint's `reserved`) stop counting it as in use when the program frees it.

use heapdelta::{CallSites, Pool, Tracker};

#[global_allocator]
static GLOBAL: Tracker<Pool> = Tracker::wrap(Pool::new()).call_sites(CallSites::Off);

#[test]
fn blocks_of_an_exited_thread_freed_by_another_are_free_in_the_global_figures() {
    let before = heapdelta::pool_stats().expect("the global allocator is a pool");
    let blocks: Vec<Vec<u8>> = std::thread::spawn(|| {
        (0..20_000)
            .map(|i| std::hint::black_box(vec![1u8; 64 + i % 300]))
            .collect()
    })
    .join()
    .unwrap();
    let held = heapdelta::pool_stats().unwrap();
    assert!(
        held.bytes_in_use >= before.bytes_in_use + 4_000_000,
        "{} in use while held, {} before",
        held.bytes_in_use,
        before.bytes_in_use
    );
    drop(blocks);
    let after = heapdelta::pool_stats().unwrap();
    assert!(
        after.bytes_in_use < before.bytes_in_use + 64 * 1024,
        "{} in use after the free, {} before",
        after.bytes_in_use,
        before.bytes_in_use
    );
    // The exited thread's heap keeps one wholly free arena, as every pymalloc heap does.
    assert!(
        after.arenas_current <= before.arenas_current + 1,
        "{} arenas after the free, {} before",
        after.arenas_current,
        before.arenas_current
    );
}
