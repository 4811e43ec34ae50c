//! What a query costs the thread that makes it: `measure` around a closure that allocates one
//! block, and `snapshot`, with the tracker installed as the global allocator and one thread
//! running (each reads a counter per request size up to 4 KiB; see their docs); and `timeline`,
//! the copy of a timeline of 20,000 checkpoints of a frame loop.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// A frame loop that checkpoints every frame, `n` frames: 20 temporaries of 8–407 bytes each.
fn frames(n: u32) {
    for frame in 0..n {
        let scratch: Vec<Vec<u8>> = (0..20)
            .map(|i| vec![0u8; 8 + (i * 37 + frame as usize) % 400])
            .collect();
        black_box(&scratch);
        heapdelta::checkpoint(format!("frame {frame}"));
    }
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("queries");
    group.bench_function("measure", |b| {
        b.iter(|| black_box(heapdelta::measure(|| vec![0u8; 64])))
    });
    group.bench_function("snapshot", |b| b.iter(|| black_box(heapdelta::snapshot())));
    frames(20_000);
    group.bench_function("timeline of 20,000 checkpoints", |b| {
        b.iter(|| black_box(heapdelta::timeline()))
    });
    group.finish();
}

criterion_group!(queries, benches);
criterion_main!(queries);
