//! Why a pymalloc-style heap never shrinks: allocate a million small objects, free 99% of them,
//! and compare the bytes still in use with the bytes the pool keeps reserved, once with the
//! survivors scattered at random over the heap and once with the survivors packed together.
//!
//! ```text
//! cargo run --release --example never_shrinking
//! ```

use heapdelta::{Pool, PoolConfig, PoolStats};
use std::alloc::{GlobalAlloc, Layout, System};

const OBJECTS: usize = 1_000_000;
const SURVIVORS: usize = OBJECTS / 100;

/// Request sizes loosely resembling CPython objects (ints, floats, small tuples, dict parts...).
const MIX: [(usize, u32); 12] = [
    (16, 2),
    (24, 6),
    (32, 10),
    (48, 12),
    (56, 8),
    (64, 10),
    (80, 5),
    (96, 5),
    (128, 4),
    (192, 3),
    (256, 2),
    (512, 1),
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn size(&mut self) -> usize {
        let total: u32 = MIX.iter().map(|m| m.1).sum();
        let mut r = (self.next() % total as u64) as u32;
        for (size, weight) in MIX {
            if r < weight {
                return size;
            }
            r -= weight;
        }
        512
    }
}

struct Row {
    name: &'static str,
    peak: PoolStats,
    after: PoolStats,
}

/// Allocates `OBJECTS` blocks, then frees all but `SURVIVORS` of them: random ones when
/// `scattered`, else the first ones allocated. Returns the stats at the peak and at the end.
fn scenario(name: &'static str, scattered: bool) -> Row {
    let pool = Pool::with_config(System, PoolConfig::CPYTHON);
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let blocks: Vec<(*mut u8, Layout)> = (0..OBJECTS)
        .map(|_| {
            let layout = Layout::from_size_align(rng.size(), 8).unwrap();
            // SAFETY: non-zero size.
            let p = unsafe { pool.alloc(layout) };
            assert!(!p.is_null(), "out of memory");
            (p, layout)
        })
        .collect();
    let peak = pool.stats();
    let mut order: Vec<usize> = (0..OBJECTS).collect();
    if scattered {
        for i in (1..OBJECTS).rev() {
            order.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
    }
    // Keep the first SURVIVORS of `order`, free the rest in random order.
    let mut doomed = order.split_off(SURVIVORS);
    for i in (1..doomed.len()).rev() {
        doomed.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    for i in doomed {
        let (p, l) = blocks[i];
        // SAFETY: allocated by `pool` with `l`, freed once.
        unsafe { pool.dealloc(p, l) };
    }
    let after = pool.stats();
    for &i in &order {
        let (p, l) = blocks[i];
        // SAFETY: the survivors, freed once before the pool goes away.
        unsafe { pool.dealloc(p, l) };
    }
    Row { name, peak, after }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let rows = [
        scenario("scattered survivors", true),
        scenario("packed survivors", false),
    ];
    println!(
        "{} small objects allocated through heapdelta::Pool (CPython 3.11 layout), then 99% freed\n",
        rows[0].peak.classes.iter().map(|c| c.blocks_in_use).sum::<u64>()
    );
    println!(
        "{:<20} {:>12} {:>14} {:>12} {:>14} {:>9} {:>10}",
        "", "peak live", "peak reserved", "live after", "reserved after", "arenas", "reserved/"
    );
    println!(
        "{:<20} {:>12} {:>14} {:>12} {:>14} {:>9} {:>10}",
        "", "MiB", "MiB", "MiB", "MiB", "kept", "peak"
    );
    for r in &rows {
        println!(
            "{:<20} {:>12.1} {:>14.1} {:>12.2} {:>14.1} {:>9} {:>9.0}%",
            r.name,
            mib(r.peak.bytes_in_use),
            mib(r.peak.bytes_reserved),
            mib(r.after.bytes_in_use),
            mib(r.after.bytes_reserved),
            format!("{}/{}", r.after.arenas_current, r.peak.arenas_current),
            100.0 * r.after.bytes_reserved as f64 / r.peak.bytes_reserved as f64,
        );
    }
    let s = &rows[0];
    let pinned = s.after.arenas_current;
    let per_arena =
        s.after.classes.iter().map(|c| c.blocks_in_use).sum::<u64>() as f64 / pinned as f64;
    let why = format!(
        "Why: the pool gets memory from the system in {} KiB arenas, cuts each into {} pools (each \
         holding blocks of one size class), and gives an arena back only when every block in \
         every one of its pools is free. With the survivors scattered at random, each of the {} arenas still holds about {:.0} \
         live blocks, so {:.1} MiB stay reserved for {:.2} MiB of live data ({:.0}x): the freed \
         blocks are reusable by later small allocations of the same class, but never returned. \
         When the survivors were allocated together they sit in a few arenas, the others become \
         wholly free and are released, and reserved memory falls to {:.1} MiB. This is CPython's \
         \"memory never goes down\" behaviour, and why a live-bytes profile and RSS disagree.",
        PoolConfig::CPYTHON.arena_size / 1024,
        PoolConfig::CPYTHON.arena_size / PoolConfig::CPYTHON.pool_size,
        pinned,
        per_arena,
        mib(s.after.bytes_reserved),
        mib(s.after.bytes_in_use),
        s.after.bytes_reserved as f64 / s.after.bytes_in_use.max(1) as f64,
        mib(rows[1].after.bytes_reserved),
    );
    println!("\n{}", wrap(&why, 80));
}

/// `text` with its lines broken between words to at most `width` characters.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.len();
    }
    out
}
