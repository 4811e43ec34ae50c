//! Exact sites from 8 functions chosen at random per allocation (no pattern to learn).
use heapdelta::{CallSites, Tracker};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Instant;
static EXACT: Tracker = Tracker::new().call_sites(CallSites::Exact);
macro_rules! site { ($($n:ident),*) => { $( #[inline(never)] fn $n<A: GlobalAlloc>(a: &A, l: Layout) -> *mut u8 { black_box(unsafe { a.alloc(l) }) } )* } }
site!(s0, s1, s2, s3, s4, s5, s6, s7);
#[inline(never)]
fn run<A: GlobalAlloc>(a: &A, ops: u64, pattern: bool) -> f64 {
    let mut rng = 42u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut live: Vec<(*mut u8, Layout)> = (0..1000)
        .map(|_| {
            let l = Layout::from_size_align(64, 8).unwrap();
            (unsafe { a.alloc(l) }, l)
        })
        .collect();
    let t = Instant::now();
    for op in 0..ops {
        let r = next();
        let i = (r % 1000) as usize;
        let (p, l) = live[i];
        unsafe { a.dealloc(p, l) };
        let l = Layout::from_size_align(8 + ((r >> 20) % 505) as usize, 8).unwrap();
        let which = if pattern { op % 8 } else { (r >> 40) % 8 };
        let p = match which {
            0 => s0(a, l),
            1 => s1(a, l),
            2 => s2(a, l),
            3 => s3(a, l),
            4 => s4(a, l),
            5 => s5(a, l),
            6 => s6(a, l),
            _ => s7(a, l),
        };
        live[i] = (p, l);
    }
    let e = t.elapsed().as_secs_f64();
    for (p, l) in live {
        unsafe { a.dealloc(p, l) }
    }
    e
}
fn main() {
    for pattern in [false, true] {
        let mut ratios = Vec::new();
        for _ in 0..15 {
            let s = run(&System, 200_000, pattern);
            let x = run(&EXACT, 200_000, pattern);
            ratios.push(x / s);
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "8 sites {}: exact {:.2}x system [{:.2}-{:.2}]",
            if pattern { "in turn" } else { "at random" },
            ratios[7],
            ratios[0],
            ratios[14]
        );
    }
}
