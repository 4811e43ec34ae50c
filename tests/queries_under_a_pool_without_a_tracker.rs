//! Under a `Pool` without a tracker, the queries' one-time hint says how to put a tracker over
//! the pool.

use std::process::Command;

#[global_allocator]
static POOL: heapdelta::Pool = heapdelta::Pool::new();

/// Set in the child (see `the_child`).
const CHILD: &str = "HEAPDELTA_TEST_POOL_NO_TRACKER_CHILD";

/// In the child: a checkpoint.
#[test]
fn the_child() {
    if std::env::var_os(CHILD).is_some() {
        let kept = vec![0u8; 100];
        assert_eq!(heapdelta::checkpoint("step").live_bytes(), 0);
        drop(kept);
    }
}

#[test]
fn the_hint_under_a_pool_says_to_wrap_the_pool() {
    let out = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["the_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .expect("the child runs");
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("heapdelta::Tracker::wrap(heapdelta::Pool::new())"),
        "{stderr}"
    );
}
