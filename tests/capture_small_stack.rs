//! A thread's first call site allocates its capture buffer inside the allocator; that must not
//! take more of the thread's stack than a small thread has (in a debug build too).

use heapdelta::Tracker;

#[global_allocator]
static GLOBAL: Tracker = Tracker::new();

#[test]
fn a_thread_with_a_small_stack_can_make_its_first_capture() {
    // The buffer is built in place on the heap, never as a value on the thread's stack.
    let len = std::thread::Builder::new()
        .stack_size(32 * 1024)
        .spawn(|| std::hint::black_box(vec![1u8; 10]).len())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(len, 10);
}
