//! Freeing a block whose header was overwritten stops the process with a message, instead of
//! counting garbage or handing the inner allocator a wrong pointer.

use std::alloc::{GlobalAlloc, Layout};
use std::process::Command;

use heapdelta::{CallSites, Tracker};

static TRACKER: Tracker = Tracker::new().call_sites(CallSites::Off);

/// Set in the child process, which does the damage.
const CHILD: &str = "HEAPDELTA_TEST_DAMAGE_CHILD";

#[test]
fn freeing_a_block_with_an_overwritten_header_aborts_with_a_message() {
    if std::env::var_os(CHILD).is_some() {
        let layout = Layout::from_size_align(48, 8).unwrap();
        // SAFETY: non-zero size; the 8 bytes before the block are its header (the tracker's
        // documented layout), overwritten on purpose as a buffer underflow would.
        unsafe {
            let p = TRACKER.alloc(layout);
            assert!(!p.is_null());
            p.sub(8).write_bytes(0, 8);
            TRACKER.dealloc(p, layout);
        }
        unreachable!("dealloc returned after the header was overwritten");
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "freeing_a_block_with_an_overwritten_header_aborts_with_a_message",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the child survived: {stderr}");
    assert!(
        stderr.contains("has no valid header"),
        "the child did not say why it stopped: {stderr}"
    );
    assert!(
        !stderr.contains("unreachable"),
        "dealloc returned after the header was overwritten: {stderr}"
    );
}
