//! Growth by allocated type: each type is reported with the right block count.

#[path = "fixtures/alloc_kinds/src/workload.rs"]
mod workload;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

fn blocks_of(delta: &heapdelta::Delta, type_name: &str) -> i64 {
    delta
        .types()
        .iter()
        .filter(|t| t.type_name == type_name)
        .map(|t| t.live_blocks)
        .sum()
}

#[test]
fn each_allocated_type_is_reported_with_its_block_count() {
    let mut kept = workload::containers();
    let ((), delta) = heapdelta::measure(|| workload::allocate(&mut kept));
    let listing: Vec<String> = delta
        .types()
        .iter()
        .map(|t| format!("{} {}", t.type_name, t.live_blocks))
        .collect();
    assert_eq!(
        blocks_of(&delta, "Vec<f32>"),
        workload::VECS as i64,
        "{listing:?}"
    );
    assert_eq!(
        blocks_of(&delta, "String"),
        (workload::FORMATTED + workload::ENTRIES) as i64,
        "{listing:?}"
    );
    assert_eq!(
        blocks_of(&delta, "Box<[u64; 4]>"),
        workload::BOXES as i64,
        "{listing:?}"
    );
    assert!(
        blocks_of(&delta, "HashMap<String, u32>") >= 1,
        "{listing:?}"
    );
    assert_eq!(blocks_of(&delta, "(unknown)"), 0, "{listing:?}");
    std::hint::black_box(&kept);
}

#[inline(never)]
fn push_strings(v: &mut Vec<String>) {
    for _ in 0..40 {
        v.push(String::new());
    }
}

#[test]
fn a_growing_vec_of_strings_is_not_named_after_its_layout_twin() {
    // `RawVec<String>::grow_one` and `RawVec<Vec<u8>>::grow_one` compile to the same code and may
    // be merged under one name; the inlined `Vec<String>::push` frame says which it was.
    let mut v = Vec::new();
    let ((), delta) = heapdelta::measure(|| push_strings(&mut v));
    let names: Vec<&str> = delta.types().iter().map(|t| t.type_name.as_str()).collect();
    assert_eq!(names, ["Vec<String>"]);
}
