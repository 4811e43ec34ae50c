//! The call-site pipeline end to end, from inside a real global allocator: frame-pointer capture
//! through std's allocation paths, interning, symbolisation, trimming and type derivation.
//!
//! The allocator here is a minimal stand-in for the `Tracker`: it captures only while the
//! current thread has armed it, and disarms itself first, so nested allocations are not captured.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use heapdelta::__internals::{capture_hashed, intern_hashed, resolve, unwound_count};
use heapdelta::Site;

struct Capturing;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LAST_SITE: Cell<u32> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; capturing a
// site on the side neither allocates through this allocator nor touches the blocks.
unsafe impl GlobalAlloc for Capturing {
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED
            .try_with(|armed| armed.replace(false))
            .unwrap_or(false)
        {
            let mut stack = [0usize; 32];
            // Skip this function's own frame, as the tracker skips its own.
            let (n, hash) = capture_hashed(&mut stack, 1);
            let id = intern_hashed(&stack[..n], hash);
            let _ = LAST_SITE.try_with(|site| site.set(id));
        }
        // SAFETY: forwards the caller's layout unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Capturing = Capturing;

/// The site of the first allocation `f` makes.
fn site_of<R>(f: impl FnOnce() -> R) -> Site {
    LAST_SITE.with(|site| site.set(0));
    ARMED.with(|armed| armed.set(true));
    let result = f();
    ARMED.with(|armed| armed.set(false));
    drop(result);
    let id = LAST_SITE.with(Cell::get);
    assert_ne!(id, 0, "no allocation was captured");
    resolve(id)
}

#[inline(never)]
fn make_floats() -> Vec<f32> {
    vec![0.0f32; 100]
}

#[inline(never)]
fn make_greeting() -> String {
    String::from("hello, world")
}

#[inline(never)]
fn make_label(step: u32) -> String {
    format!("step {step}")
}

#[inline(never)]
fn make_box() -> Box<[u64; 4]> {
    Box::new([7u64; 4])
}

#[inline(never)]
fn fill_map(map: &mut HashMap<String, u32>, key: String) {
    // Using the result keeps `insert` from being a tail call, which would leave no frame of
    // this function on the stack (for any unwinder).
    std::hint::black_box(map.insert(key, 1));
}

#[inline(never)]
fn make_shared() -> Arc<[u8; 24]> {
    Arc::new([1u8; 24])
}

#[inline(never)]
fn push_byte(bytes: &mut Vec<u8>) {
    bytes.push(1);
}

#[inline(never)]
fn recurse(depth: u32) -> Vec<u64> {
    if depth == 0 {
        vec![1u64; 8]
    } else {
        let v = recurse(depth - 1);
        std::hint::black_box(v)
    }
}

fn innermost_is(site: &Site, function: &str) {
    let first = &site.frames()[0];
    assert!(
        first.function.ends_with(function),
        "innermost frame {first} is not {function}: {site:#?}"
    );
    assert_eq!(first.file.as_deref(), Some("tests/callsite_pipeline.rs"));
}

/// The derived type must be `expected`. Unoptimised builds name std's generic functions without
/// their generic arguments (legacy mangling, no inlining), so there the only other acceptable
/// answer is the honest `unknown` form, never another type.
fn type_is(site: &Site, expected: &str, unknown: &str) {
    let got = site.type_name();
    if cfg!(debug_assertions) && got == unknown {
        return;
    }
    assert_eq!(got, expected, "{site:#?}");
}

#[test]
fn vec_macro_site_is_the_user_function_and_a_vec_of_f32() {
    let site = site_of(make_floats);
    innermost_is(&site, "make_floats");
    type_is(&site, "Vec<f32>", "(unknown)");
}

#[test]
fn string_from_is_a_string() {
    let site = site_of(make_greeting);
    innermost_is(&site, "make_greeting");
    assert_eq!(site.type_name(), "String");
}

#[test]
fn format_is_a_string() {
    let site = site_of(|| make_label(3));
    innermost_is(&site, "make_label");
    assert_eq!(site.type_name(), "String");
}

#[test]
fn box_new_is_a_box() {
    let site = site_of(make_box);
    innermost_is(&site, "make_box");
    type_is(&site, "Box<[u64; 4]>", "(unknown)");
}

#[test]
fn hashmap_insert_is_the_map() {
    let mut map = HashMap::new();
    let key = String::from("k");
    let site = site_of(|| fill_map(&mut map, key));
    innermost_is(&site, "fill_map");
    type_is(&site, "HashMap<String, u32>", "HashMap<_, _>");
}

#[test]
fn arc_new_is_an_arc() {
    let site = site_of(make_shared);
    innermost_is(&site, "make_shared");
    type_is(&site, "Arc<[u8; 24]>", "Arc<_>");
}

#[test]
fn vec_growth_is_a_vec_of_bytes() {
    let mut bytes = Vec::new();
    let site = site_of(|| push_byte(&mut bytes));
    innermost_is(&site, "push_byte");
    assert_eq!(site.type_name(), "Vec<u8>");
}

#[test]
fn recursion_is_folded_into_one_frame() {
    let site = site_of(|| recurse(5));
    innermost_is(&site, "recurse");
    let recursive = site
        .frames()
        .iter()
        .filter(|f| f.function.ends_with("recurse"))
        .count();
    assert_eq!(recursive, 1, "{site:#?}");
}

#[test]
fn the_same_call_path_gives_the_same_site_and_others_differ() {
    let sites: Vec<Site> = (0..2).map(|_| site_of(make_greeting)).collect();
    let other = site_of(make_floats);
    assert_eq!(sites[0], sites[1]);
    assert_ne!(sites[0], other);
}

#[test]
fn std_allocation_paths_keep_the_frame_pointer_chain_intact() {
    // Every capture above went through std's precompiled code (`grow_one`, `format_inner` …);
    // none needed the unwinder.
    let _ = site_of(make_label_twice);
    assert_eq!(unwound_count(), 0);
}

#[inline(never)]
fn make_label_twice() -> String {
    make_label(1) + &make_label(2)
}
