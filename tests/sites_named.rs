//! Call sites are named after the user's function and line, and recursion is one site.

#[path = "common/sites.rs"]
mod sites;
use sites::sites_of;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

#[inline(never)]
fn load_images(out: &mut Vec<Vec<u8>>) -> u32 {
    let line = line!() + 2;
    for _ in 0..40 {
        out.push(vec![1u8; 300]);
    }
    line
}

#[inline(never)]
fn parse_labels(out: &mut Vec<Vec<u8>>) -> u32 {
    let line = line!() + 2;
    for _ in 0..25 {
        out.push(vec![2u8; 500]);
    }
    line
}

#[inline(never)]
fn walk_tree(depth: u32, out: &mut Vec<Vec<u8>>) -> u32 {
    if depth == 0 {
        out.push(vec![3u8; 700]);
        return line!() - 1;
    }
    walk_tree(depth - 1, out)
}

#[inline(never)]
fn make_row(out: &mut Vec<Vec<u8>>) {
    out.push(vec![4u8; 900]);
}

// The two callers differ in code, so an optimised build cannot merge them into one function
// (whose return addresses could then not tell the callers apart).
#[inline(never)]
fn from_train(out: &mut Vec<Vec<u8>>) {
    make_row(out);
    std::hint::black_box(1u8);
}

#[inline(never)]
fn from_eval(out: &mut Vec<Vec<u8>>) {
    make_row(out);
    std::hint::black_box(2u8);
}

#[test]
fn two_functions_allocating_in_a_loop_are_two_sites_with_their_names_and_lines() {
    let mut kept = Vec::with_capacity(100);
    let ((a, b), delta) = heapdelta::measure(|| (load_images(&mut kept), parse_labels(&mut kept)));
    let images = sites_of(&delta, "load_images");
    let labels = sites_of(&delta, "parse_labels");
    assert_eq!(images.len(), 1, "{:?}", delta.sites());
    assert_eq!(labels.len(), 1, "{:?}", delta.sites());
    assert_eq!(
        (images[0].live_blocks, images[0].live_bytes),
        (40, 40 * 300)
    );
    assert_eq!(
        (labels[0].live_blocks, labels[0].live_bytes),
        (25, 25 * 500)
    );
    assert_eq!(images[0].site.frames()[0].line, Some(a));
    assert_eq!(labels[0].site.frames()[0].line, Some(b));
    let file = images[0].site.frames()[0].file.as_deref().unwrap_or("");
    assert!(file.ends_with("tests/sites_named.rs"), "{file}");
}

#[test]
fn exact_site_figures_are_not_called_estimates() {
    let mut kept = Vec::with_capacity(100);
    let (_, delta) = heapdelta::measure(|| load_images(&mut kept));
    let text = delta.to_string();
    assert!(text.contains("load_images"), "{text}");
    assert!(!text.contains("estimates"), "{text}");
}

#[test]
fn an_allocation_reached_through_recursion_is_one_site_whatever_the_depth() {
    let mut kept = Vec::with_capacity(10);
    let (line, delta) = heapdelta::measure(|| {
        let mut line = 0;
        for depth in 0..6 {
            line = walk_tree(depth, &mut kept);
        }
        line
    });
    let sites = sites_of(&delta, "walk_tree");
    assert_eq!(sites.len(), 1, "{:?}", delta.sites());
    assert_eq!(sites[0].live_blocks, 6);
    assert_eq!(sites[0].site.frames()[0].line, Some(line));
}

#[test]
fn one_allocation_reached_alternately_from_two_callers_is_counted_under_each_caller() {
    let mut kept = Vec::with_capacity(64);
    let ((), delta) = heapdelta::measure(|| {
        for _ in 0..20 {
            from_train(&mut kept);
            from_eval(&mut kept);
        }
    });
    let rows = sites_of(&delta, "make_row");
    let blocks_via = |caller: &str| -> i64 {
        rows.iter()
            .filter(|s| s.site.frames().iter().any(|f| f.function.ends_with(caller)))
            .map(|s| s.live_blocks)
            .sum()
    };
    assert_eq!(blocks_via("from_train"), 20, "{:?}", delta.sites());
    assert_eq!(blocks_via("from_eval"), 20, "{:?}", delta.sites());
}

#[inline(never)]
fn parse_names(text: &str) -> (Vec<String>, u32) {
    let line = line!() + 1;
    let names: Vec<String> = serde_json::from_str(text).unwrap_or_default();
    (names, line)
}

#[test]
fn an_allocation_inside_a_registry_dependency_is_named_after_the_programs_function() {
    let text = serde_json::to_string(&vec!["a fairly long name"; 30]).unwrap();
    let ((names, line), delta) = heapdelta::measure(|| parse_names(&text));
    assert_eq!(names.len(), 30);
    let sites = sites_of(&delta, "parse_names");
    let strings: i64 = sites
        .iter()
        .filter(|s| s.site.type_name() == "String")
        .map(|s| s.live_blocks)
        .sum();
    assert_eq!(strings, 30, "{:?}", delta.sites());
    assert!(sites.iter().all(|s| s.site.frames()[0].line == Some(line)));
    // serde_json's frames lie inside the program's function, so they are trimmed: no site starts
    // in serde_json.
    assert!(
        delta
            .sites()
            .iter()
            .all(|s| !s.site.frames()[0].function.contains("serde_json")),
        "{:?}",
        delta.sites()
    );
}
