//! `HEAPDELTA=depth=N` over a tracker with exact sites keeps as many of the program's frames as
//! `Tracker::depth(N)` does: the capture starts from the same frame either way.

#[path = "children/rerun.rs"]
mod rerun;
use rerun::rerun_under;

use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new().depth(12);

/// Set in the child process, which runs under the override.
const CHILD: &str = "HEAPDELTA_TEST_DEPTH_OVERRIDE_CHILD";

#[inline(never)]
fn leaf() -> Box<[u8; 100]> {
    Box::new(std::hint::black_box([1; 100]))
}

/// Twelve distinct frames above `leaf`, so that a capture of 12 frames from the allocator is
/// cut inside this chain: the program's frames it keeps are 12 less the allocator's.
macro_rules! chain {
    ($($caller:ident calls $callee:ident;)*) => {$(
        #[inline(never)]
        fn $caller() -> Box<[u8; 100]> {
            std::hint::black_box($callee())
        }
    )*};
}

chain! {
    l1 calls leaf; l2 calls l1; l3 calls l2; l4 calls l3; l5 calls l4; l6 calls l5;
    l7 calls l6; l8 calls l7; l9 calls l8; l10 calls l9; l11 calls l10; l12 calls l11;
}

/// In the child: how many frames the site of `leaf`'s boxes kept, printed for the parent.
fn print_frames_of_leaf() {
    let mut kept = Vec::with_capacity(10);
    let ((), delta) = heapdelta::measure(|| {
        for _ in 0..10 {
            kept.push(l12());
        }
    });
    let site = delta
        .sites()
        .iter()
        .find(|s| s.site.to_string().contains("leaf"))
        .unwrap_or_else(|| panic!("no site of leaf: {delta}"));
    eprintln!("frames kept: {}", site.site.frames().len());
}

fn frames_kept_under(heapdelta: &str) -> usize {
    let stderr = rerun_under(
        "depth_from_the_environment_keeps_as_many_frames_as_in_code",
        CHILD,
        heapdelta,
    );
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("frames kept: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the child did not say: {stderr}"))
}

#[test]
fn depth_from_the_environment_keeps_as_many_frames_as_in_code() {
    if std::env::var_os(CHILD).is_some() {
        print_frames_of_leaf();
        return;
    }
    // `depth=12` repeats the tracker's own setting, so it is dropped: the capture in code. Which
    // allocator frames lie above the program's first (the global allocator's shim can be inlined
    // into its caller or not, depending on the build) is the same at every depth, so an override
    // keeps as many of the program's frames as code would when it keeps 8 and 7 fewer. Before
    // the override's captures started from the same frame, `depth=4` kept one fewer.
    let in_code = frames_kept_under("depth=12");
    assert!(
        in_code >= 10,
        "the allocator's frames took {} of 12",
        12 - in_code
    );
    assert_eq!(frames_kept_under("depth=4"), in_code - 8);
    assert_eq!(frames_kept_under("depth=5"), in_code - 7);
}
