//! Checkpoint deltas and survivors over a loop that leaks a known number of blocks per step.
//!
//! Run without the test harness (`harness = false` in Cargo.toml): the figures are process-wide
//! and exact, and the harness's main thread records each test it starts (allocating) while the
//! test's own thread is already running, which on a slow machine landed in the first step.

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

const STEPS: usize = 6;
const LEAK: usize = 50;
const SIZE: usize = 200;

fn main() {
    each_step_reports_its_leaked_blocks_as_survivors_and_older_frees_apart();
    println!("checkpoint_steps: each step reports its leaked blocks as survivors and older frees apart: ok");
}

fn each_step_reports_its_leaked_blocks_as_survivors_and_older_frees_apart() {
    let mut kept: Vec<Box<[u8; SIZE]>> = Vec::with_capacity(STEPS * LEAK);
    let mut deltas = Vec::with_capacity(STEPS);
    heapdelta::checkpoint("start");
    for step in 1..=STEPS {
        // temporaries, all freed within the step
        let temps: Vec<Vec<u64>> = (0..100).map(|i| vec![i; 16]).collect();
        drop(temps);
        for _ in 0..LEAK {
            kept.push(Box::new([7; SIZE]));
        }
        // one block of the previous step is freed: an older block freed in this step
        if step > 1 {
            drop(kept.swap_remove(0));
        }
        deltas.push(heapdelta::checkpoint(format!("step {step}")));
    }
    for (i, d) in deltas.iter().enumerate() {
        let older = if i == 0 { 0 } else { 1 };
        assert_eq!(d.live_blocks(), (LEAK - older) as i64, "step {}", i + 1);
        assert_eq!(
            d.live_bytes(),
            ((LEAK - older) * SIZE) as i64,
            "step {}",
            i + 1
        );
        let s = d
            .survivors()
            .expect("consecutive checkpoints have survivors");
        assert_eq!(
            (s.blocks, s.bytes),
            (LEAK as u64, (LEAK * SIZE) as u64),
            "step {}",
            i + 1
        );
        assert_eq!(
            (s.freed_older_blocks, s.freed_older_bytes),
            (older as u64, (older * SIZE) as u64)
        );
        assert!(d.allocated_blocks() >= (LEAK + 101) as u64);
    }
    let timeline = heapdelta::timeline();
    assert_eq!(timeline.checkpoints().len(), STEPS + 1);
    let whole = timeline.between("start", &format!("step {STEPS}")).unwrap();
    assert_eq!(whole.live_blocks(), (STEPS * LEAK - (STEPS - 1)) as i64);
    assert!(
        whole.survivors().is_none(),
        "a window of several steps has no single-step survivors"
    );
    assert!(timeline
        .between("start", "step 99")
        .unwrap_err()
        .to_string()
        .contains("step 99"));
}
