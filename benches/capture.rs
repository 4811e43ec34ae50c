//! Cost of capturing a call stack (frame-pointer walk), of capture + interning of a known stack,
//! and of the unwinder fallback (the cached walk of `callsite/cfi.rs` on x86_64 Linux, and the
//! general unwinder it falls back to), at realistic depths; and of a `malloc` + `free` through a
//! tracker with exact call sites from the same place over and over, where the stack is replayed
//! rather than walked (`callsite/buffer.rs`).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use heapdelta::__internals::{
    capture, capture_general_unwind, capture_hashed, capture_unwind, intern, intern_hashed,
    unwound_count,
};
use heapdelta::Tracker;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

/// Exact call sites, 32 frames deep (not installed: called directly).
static EXACT: Tracker = Tracker::new();

/// One allocation and free of 32 bytes through `a`.
fn malloc_free<A: GlobalAlloc>(a: &A) {
    let layout = Layout::new::<[u64; 4]>();
    // SAFETY: a fresh 32-byte block freed with the same layout.
    unsafe {
        let p = a.alloc(layout);
        a.dealloc(black_box(p), layout);
    }
}

/// Calls `f` with `depth` more frames on the stack.
#[inline(never)]
fn nest(depth: usize, f: &mut dyn FnMut()) {
    if depth == 0 {
        f();
    } else {
        nest(depth - 1, f);
        black_box(());
    }
}

/// Frames a capture sees at the bottom of `nest(0, ..)` from here.
fn base_depth() -> usize {
    let mut n = 0;
    nest(0, &mut || {
        let mut out = [0usize; 256];
        n = capture(&mut out, 0);
    });
    n
}

fn benches(c: &mut Criterion) {
    let base = base_depth();
    let mut group = c.benchmark_group("callsite");
    for depth in [20usize, 32] {
        let extra = depth.saturating_sub(base);
        let mut out = [0usize; 32];
        nest(extra, &mut || {
            let n = capture(&mut out, 0);
            eprintln!("depth {depth}: {n} frames captured (buffer 32)");
        });
        nest(extra, &mut || {
            group.bench_function(BenchmarkId::new("capture", depth), |b| {
                b.iter(|| {
                    let mut out = [0usize; 32];
                    black_box(capture(&mut out, 0))
                })
            });
        });
        nest(extra, &mut || {
            group.bench_function(BenchmarkId::new("capture+intern", depth), |b| {
                b.iter(|| {
                    let mut out = [0usize; 32];
                    let (n, hash) = capture_hashed(&mut out, 0);
                    black_box(intern_hashed(&out[..n], hash))
                })
            });
        });
        nest(extra, &mut || {
            group.bench_function(
                BenchmarkId::new("capture, then intern (hash apart)", depth),
                |b| {
                    b.iter(|| {
                        let mut out = [0usize; 32];
                        let n = capture(&mut out, 0);
                        black_box(intern(&out[..n]))
                    })
                },
            );
        });
        nest(extra, &mut || {
            group.bench_function(
                BenchmarkId::new("exact tracker malloc+free 32 B, same stack", depth),
                |b| b.iter(|| malloc_free(&EXACT)),
            );
        });
        nest(extra, &mut || {
            group.bench_function(BenchmarkId::new("unwinder capture", depth), |b| {
                b.iter(|| {
                    let mut out = [0usize; 32];
                    black_box(capture_unwind(&mut out, 0))
                })
            });
        });
        nest(extra, &mut || {
            group.bench_function(BenchmarkId::new("general unwinder capture", depth), |b| {
                b.iter(|| {
                    let mut out = [0usize; 32];
                    black_box(capture_general_unwind(&mut out, 0))
                })
            });
        });
    }
    group.bench_function("system malloc+free 32 B", |b| {
        b.iter(|| malloc_free(&System))
    });
    group.finish();
    // Criterion measures wall time, which a shared, loaded machine inflates; thread CPU time
    // excludes the time this thread spends descheduled.
    for depth in [20usize, 32] {
        nest(depth.saturating_sub(base), &mut || {
            let iterations = 2_000_000u32;
            let capture_ns = cpu_ns_per_iteration(iterations, || {
                let mut out = [0usize; 32];
                black_box(capture(&mut out, 0));
            });
            let interned_ns = cpu_ns_per_iteration(iterations, || {
                let mut out = [0usize; 32];
                let (n, hash) = capture_hashed(&mut out, 0);
                black_box(intern_hashed(&out[..n], hash));
            });
            let tracked_ns = cpu_ns_per_iteration(iterations, || malloc_free(&EXACT));
            let system_ns = cpu_ns_per_iteration(iterations, || malloc_free(&System));
            eprintln!(
                "depth {depth}, thread CPU time: capture {capture_ns:.1} ns, \
                 capture+intern {interned_ns:.1} ns; malloc+free 32 B: System {system_ns:.1} ns, \
                 exact tracker (stack replayed) {tracked_ns:.1} ns"
            );
        });
    }
    eprintln!(
        "captures that fell back to the unwinder: {}",
        unwound_count()
    );
}

/// Thread CPU nanoseconds per call of `f`.
fn cpu_ns_per_iteration(iterations: u32, mut f: impl FnMut()) -> f64 {
    let now = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
    };
    let start = now();
    for _ in 0..iterations {
        f();
    }
    (now() - start) / f64::from(iterations)
}

criterion_group!(capture_benches, benches);
criterion_main!(capture_benches);
