//! Survivors per call site: in a step, the leaking site keeps every block it allocated, the site
//! of temporaries keeps none.

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

const STEPS: usize = 4;
const LEAK: usize = 40;
const SIZE: usize = 300;

#[inline(never)]
fn leak_one() -> Box<[u8; SIZE]> {
    Box::new([7; SIZE])
}

#[inline(never)]
fn temporaries() {
    let temps: Vec<Vec<u64>> = (0..100).map(|i| vec![i; 16]).collect();
    drop(std::hint::black_box(temps));
}

#[test]
fn each_site_reports_what_it_kept_of_the_blocks_born_in_the_step() {
    let mut kept: Vec<Box<[u8; SIZE]>> = Vec::with_capacity(STEPS * LEAK);
    heapdelta::checkpoint("start");
    for step in 1..=STEPS {
        temporaries();
        for _ in 0..LEAK {
            kept.push(leak_one());
        }
        if step > 1 {
            drop(kept.swap_remove(0));
        }
        let d = heapdelta::checkpoint(format!("step {step}"));
        let sites = d.sites();
        let leak = sites
            .iter()
            .find(|s| s.site.to_string().contains("leak_one"))
            .unwrap_or_else(|| panic!("no leak_one site in step {step}: {d}"));
        let s = leak.survivors.expect("a one-step delta has survivors");
        assert_eq!((s.blocks, s.bytes), (LEAK as u64, (LEAK * SIZE) as u64));
        let older = u64::from(step > 1);
        assert_eq!(
            (s.freed_older_blocks, s.freed_older_bytes),
            (older, older * SIZE as u64)
        );
        let temps = sites
            .iter()
            .find(|s| s.site.to_string().contains("temporaries") && s.allocs == 100)
            .unwrap_or_else(|| panic!("no temporaries site in step {step}: {d}"));
        let t = temps.survivors.expect("a one-step delta has survivors");
        assert_eq!((t.blocks, t.bytes), (0, 0), "step {step}");
        assert!(
            d.to_string()
                .contains(&format!("kept {LEAK} of {LEAK} born")),
            "{d}"
        );
    }
    let whole = heapdelta::timeline().between("start", "step 2").unwrap();
    assert!(whole.sites().iter().all(|s| s.survivors.is_none()));
}
