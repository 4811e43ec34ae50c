//! Survivors need a window that starts a step: over a window that starts inside one (`measure`),
//! the free of a block born before the window cannot be told from the free of one born inside.
//! (Its own file: a checkpoint elsewhere in the binary would move the step under the test.)

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[test]
fn a_window_that_starts_inside_a_step_has_no_survivors() {
    let before = Box::new([1u8; 200]);
    let (kept, d) = heapdelta::measure(|| {
        drop(std::hint::black_box(before));
        Box::new([2u8; 200])
    });
    assert_eq!(d.survivors(), None, "{d}");
    drop(kept);
}
