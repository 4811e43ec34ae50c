//! Under a dependency's `GlobalAlloc` around the tracker (`cap::Cap`, which enforces a budget),
//! sites keep the type allocated, as without it: the dependency's frames inside the allocator are
//! not where the program allocated through (a review found `(unknown)` for a `Vec<u64>`).

#[path = "common/sites.rs"]
mod sites;
use sites::sites_of;

#[global_allocator]
static GLOBAL: cap::Cap<heapdelta::Tracker> = cap::Cap::new(heapdelta::Tracker::new(), usize::MAX);

#[inline(never)]
fn grow_index(out: &mut Vec<u64>) {
    for i in 0..5_000 {
        out.push(i);
    }
}

#[test]
fn sites_under_a_dependencys_wrapper_keep_their_type() {
    let mut index = Vec::new();
    let ((), delta) = heapdelta::measure(|| grow_index(&mut index));
    let index_sites = sites_of(&delta, "grow_index");
    assert_eq!(index_sites.len(), 1, "{delta}");
    assert_eq!(index_sites[0].site.type_name(), "Vec<u64>", "{delta}");
}
