//! A snapshot taken while other threads allocate is read back: its counters are read a moment
//! apart (a class's blocks and bytes above 4 KiB, the totals before the call sites), which
//! reading a file must allow. (A review: a check that a class's bytes fit its blocks rejected
//! 1,366 of 20,000 such snapshots.)

use std::sync::atomic::{AtomicBool, Ordering};

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[test]
fn snapshots_taken_while_threads_allocate_large_blocks_read_back() {
    static STOP: AtomicBool = AtomicBool::new(false);
    let workers: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                let mut k = 13;
                while !STOP.load(Ordering::Relaxed) {
                    let v: Vec<u8> = Vec::with_capacity((1 << k) + t);
                    std::hint::black_box(v);
                    k = if k == 20 { 13 } else { k + 1 };
                }
            })
        })
        .collect();
    let mut out = Vec::new();
    for i in 0..300 {
        out.clear();
        heapdelta::snapshot()
            .write_json_to(&mut out)
            .expect("written");
        if let Err(e) = heapdelta::Snapshot::read_json_from(&out[..]) {
            STOP.store(true, Ordering::Relaxed);
            panic!("snapshot {i} was not read back: {e}");
        }
    }
    STOP.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("the worker ends");
    }
}
