//! A thread that starts after checkpoints were taken gives its blocks the current epoch: freed in
//! the step they were born in, by any thread, they are not counted as older blocks.

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new().call_sites(heapdelta::CallSites::Off);

const OLDER: usize = 3;
const NEW: usize = 40;
const SIZE: usize = 333;

#[test]
fn blocks_of_a_thread_started_after_checkpoints_are_young_in_their_step() {
    heapdelta::checkpoint("one");
    // On the stack, so that the only blocks born in this step are these.
    let older: [Box<[u8; SIZE]>; OLDER] = std::array::from_fn(|_| Box::new([1; SIZE]));
    heapdelta::checkpoint("two");
    // A new thread claims a slot no thread used before; its blocks are freed here, in the step
    // they were born in.
    let made = std::thread::spawn(|| (0..NEW).map(|_| Box::new([2; SIZE])).collect::<Vec<_>>())
        .join()
        .expect("the thread allocates");
    drop(made);
    drop(older);
    let step = heapdelta::checkpoint("three");
    let s = step
        .survivors()
        .expect("consecutive checkpoints have survivors");
    assert_eq!(
        (s.freed_older_blocks, s.freed_older_bytes),
        (OLDER as u64, (OLDER * SIZE) as u64)
    );
}
