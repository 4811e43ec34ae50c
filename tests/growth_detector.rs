//! The growth detector flags the site that grows at every step, and nothing in a steady loop.

use std::sync::Mutex;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

/// Both tests take checkpoints (process-wide), so they run one at a time; each takes more than
/// the detector's window of steps, so the window holds only its own.
static SERIAL: Mutex<()> = Mutex::new(());

#[inline(never)]
fn remember(history: &mut Vec<Vec<u64>>) {
    history.push(vec![7; 512]);
}

#[inline(never)]
fn scratch(size: usize) -> Vec<u8> {
    vec![0; size]
}

#[test]
fn the_site_that_leaks_every_step_is_flagged_as_growing() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut history = Vec::with_capacity(64);
    let mut buffer = scratch(1000);
    for step in 0..8 {
        remember(&mut history);
        buffer = scratch(1000 + (step % 3) * 5000); // noisy, not growing
        heapdelta::checkpoint(format!("leak {step}"));
    }
    let growing = heapdelta::timeline().growing();
    let names: Vec<String> = growing.iter().map(|g| g.site.to_string()).collect();
    assert!(names.iter().any(|n| n.contains("remember")), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("scratch")), "{names:?}");
    let leak = growing
        .iter()
        .find(|g| g.site.to_string().contains("remember"))
        .unwrap();
    assert_eq!((leak.steps_grown, leak.steps), (5, 5));
    assert_eq!(leak.live_bytes, 5 * 512 * 8);
    assert!(heapdelta::timeline().to_string().contains("remember"));
    drop(buffer);
}

#[test]
fn a_steady_but_noisy_loop_has_no_growing_site() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let sizes = [
        100_000, 80_000, 120_000, 90_000, 110_000, 70_000, 130_000, 95_000,
    ];
    let mut buffer = scratch(1);
    for (step, size) in sizes.into_iter().enumerate() {
        buffer = scratch(size);
        heapdelta::checkpoint(format!("steady {step}"));
    }
    let growing = heapdelta::timeline().growing();
    assert!(
        growing.is_empty(),
        "{:?}",
        growing
            .iter()
            .map(|g| g.site.to_string())
            .collect::<Vec<_>>()
    );
    drop(buffer);
}
