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

#[inline(never)]
fn l1() -> Box<[u8; 100]> {
    std::hint::black_box(leaf())
}

#[inline(never)]
fn l2() -> Box<[u8; 100]> {
    std::hint::black_box(l1())
}

#[inline(never)]
fn l3() -> Box<[u8; 100]> {
    std::hint::black_box(l2())
}

#[inline(never)]
fn l4() -> Box<[u8; 100]> {
    std::hint::black_box(l3())
}

/// In the child: how many frames the site of `leaf`'s boxes kept, printed for the parent.
fn print_frames_of_leaf() {
    let mut kept = Vec::with_capacity(10);
    let ((), delta) = heapdelta::measure(|| {
        for _ in 0..10 {
            kept.push(l4());
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
    // `Tracker::new().depth(4)` and `depth(5)` keep `leaf` and the 3 or 4 functions above it
    // (checked with a tracker so built when this test was written); before the override's
    // captures started from the same frame, `depth=4` kept 2 or 3.
    assert_eq!(frames_kept_under("depth=4"), 4);
    assert_eq!(frames_kept_under("depth=5"), 5);
}
