//! Under `Tracker<Pool>`, a block of the program's grown while heapdelta runs its own work moves
//! to the system allocator, and back to the pool when the program grows it again: its bytes are
//! kept, and it is counted while it is the program's.

use heapdelta::{CallSites, Pool, Tracker};

#[global_allocator]
static GLOBAL: Tracker<Pool> = Tracker::wrap(Pool::new()).call_sites(CallSites::Off);

#[test]
fn a_string_grown_inside_heapdelta_keeps_its_bytes_both_ways() {
    let (len, d) = heapdelta::measure(|| {
        let mut s = String::with_capacity(8);
        s.push_str("start ");
        // Grown inside heapdelta: the block moves to the system allocator.
        heapdelta::__internals::untracked(|| s.push_str(&"y".repeat(100)));
        assert!(s.starts_with("start yyy") && s.ends_with('y'), "{s}");
        // Grown by the program: back to the pool, counted again.
        s.push_str(&"x".repeat(10_000));
        assert!(s.starts_with("start yyy") && s.ends_with("xxxx"));
        s.len()
    });
    assert_eq!(len, 6 + 100 + 10_000);
    // The 8-byte block, the `repeat`'s 10,000 bytes and the grown one, all freed.
    assert_eq!(d.live_bytes(), 0);
    assert!(
        d.allocated_bytes() >= 8 + 10_000 + len as u64,
        "{}",
        d.allocated_bytes()
    );
}
