//! What a query costs the thread that makes it: `measure` around a closure that allocates one
//! block, and `snapshot`, with the tracker installed as the global allocator and one thread
//! running (each reads a counter per request size up to 4 KiB; see their docs).

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("queries");
    group.bench_function("measure", |b| {
        b.iter(|| black_box(heapdelta::measure(|| vec![0u8; 64])))
    });
    group.bench_function("snapshot", |b| b.iter(|| black_box(heapdelta::snapshot())));
    group.finish();
}

criterion_group!(queries, benches);
criterion_main!(queries);
