//! Finding a delta's call sites by function, for the tests that check sites are named.

/// The sites whose innermost frame is `function` (or ends with it: `app::load` for `load`).
pub fn sites_of<'a>(delta: &'a heapdelta::Delta, function: &str) -> Vec<&'a heapdelta::SiteDelta> {
    delta
        .sites()
        .iter()
        .filter(|s| {
            s.site
                .frames()
                .first()
                .is_some_and(|f| f.function.ends_with(function))
        })
        .collect()
}
