//! A call site whose capture stops at `Tracker::depth` before any frame of the program's says so,
//! instead of reading like an allocation made by the standard library alone.

use heapdelta::Tracker;

/// Two frames: the allocator's caller and its caller, which for `format!` are the standard
/// library's own compiled code.
#[global_allocator]
static GLOBAL: Tracker = Tracker::new().depth(2);

#[test]
fn a_site_cut_before_the_programs_frames_says_to_raise_the_depth() {
    let mut kept: Vec<String> = Vec::with_capacity(100);
    let ((), delta) = heapdelta::measure(|| {
        for i in 0..100 {
            kept.push(format!("{i:>40}"));
        }
    });
    let cut: i64 = delta
        .sites()
        .iter()
        .filter(|s| {
            s.site
                .to_string()
                .starts_with("(stack cut at 2 frames, before any of the program's: raise")
        })
        .map(|s| s.live_blocks)
        .sum();
    assert_eq!(cut, 100, "{:#?}", delta.sites());
}
