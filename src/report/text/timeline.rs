//! A timeline's text: the sites the growth detector names, then one line per step.

use std::fmt::{self, Display, Formatter};

use super::delta::estimates_note;
use super::format::{bytes, count, signed_bytes, OneLine};
use crate::diff::{Delta, Growth, Timeline};

/// A timeline's text: the sites that grew at every recent step (the first `top` of them), then one
/// line per step. One line per entry, joined, as for `Delta`: no line break at the end.
pub(crate) fn timeline_text(t: &Timeline, top: usize) -> String {
    let growing = t.growing();
    let mut lines = Vec::new();
    // Of a timeline the program and the clock both took checkpoints in, which steps were looked at.
    let between = t
        .detector_follows()
        .map(|which| format!(", between {which}"))
        .unwrap_or_default();
    if let Some(first) = growing.first() {
        lines.push(format!(
            "growing at every step (last {} steps{between}):",
            first.steps
        ));
        growth_rows(t, &growing, top, &mut lines);
        grown_in_some_steps(t, &growing, &mut lines);
    } else if let Some((peak, after, fell, growing)) = t.growing_before_fall() {
        // Not a bare "none" above a list of sites that grew at every step (a user trial read the
        // two as a contradiction): nothing grew at every step up to the last checkpoint.
        lines.push(format!(
            "growing at every step to the last checkpoint{between}: none"
        ));
        let name = match peak.label() {
            Some(label) => format!("{:?}", OneLine(label).to_string()),
            None => "the last rise".to_string(),
        };
        let how = if fell { "fell" } else { "held" };
        lines.push(format!(
            "growing at every step up to {name} (last {} steps to it{between}; live bytes {how} \
             in the {} after it):",
            growing[0].steps,
            count(after as u64, "step")
        ));
        growth_rows(t, &growing, top, &mut lines);
    } else {
        lines.push(nothing_growing(t, &between));
        // Live bytes rose at every step, and no site did: which sites grew most over those
        // steps (a user trial's sampled run missed its leak at one step, and named no site).
        if t.live_rose_at_every_step()
            .is_some_and(|(_, _, sited)| sited)
        {
            grown_in_some_steps(t, &[], &mut lines);
        }
        if let Some((last, kind, growing)) = t.growing_by_the_other_kind() {
            let name = match last.label() {
                Some(label) => format!("{:?}", OneLine(label).to_string()),
                None => "the last of them".to_string(),
            };
            lines.push(format!(
                "growing at every step between {kind} (last {} steps, up to {name}; still held \
                 at the last checkpoint):",
                growing[0].steps
            ));
            growth_rows(t, &growing, top, &mut lines);
        }
    }
    // A blank line between the suspects and the steps.
    lines.push(String::new());
    lines.extend(t.steps().iter().map(Delta::summary));
    lines.join("\n")
}

/// Sites listed under the growth detector's, at most this many: those that grew over its steps
/// but not at every one.
const GROWN_IN_SOME: usize = 3;

/// Under the sites that grew at every step: how much of what the live total rose over those steps
/// they hold, and the sites that grew most in some of the steps, which a leak's own tables do
/// (they grow by doubling). Said when the sites listed hold less than four fifths of the rise,
/// or another grew by a tenth of it (a user trial's session map, 3.6 MiB of 32 MiB). With no
/// site that grew at every step (`growing` empty), the sites that grew most.
fn grown_in_some_steps(t: &Timeline, growing: &[Growth], lines: &mut Vec<String>) {
    let Some((change, some)) = t.grown_in_window() else {
        return;
    };
    // (Nothing to say of a window whose live total fell: every growth would be "a tenth" of it.)
    if change <= 0 {
        return;
    }
    let held = growing
        .iter()
        .fold(0i64, |sum, g| sum.saturating_add(g.live_bytes));
    let short = held.saturating_mul(5) < change.saturating_mul(4);
    let some: Vec<&Growth> = some
        .iter()
        .filter(|g| short || g.live_bytes.saturating_mul(10) >= change)
        .collect();
    if some.is_empty() {
        return;
    }
    let steps = some[0].steps;
    if growing.is_empty() {
        lines.push(format!(
            "   grown most in some of those {steps} steps, of the {} the live total rose:",
            signed_bytes(change)
        ));
    } else {
        lines.push(format!(
            "   these hold {} of the {} the live total rose in those steps; grown in some of \
             them:",
            signed_bytes(held),
            signed_bytes(change)
        ));
    }
    for g in some.iter().take(GROWN_IN_SOME) {
        lines.push(format!(
            "   {:>11} in {} of {steps} steps  {}  [{}]",
            signed_bytes(g.live_bytes),
            g.steps_grown,
            g.site,
            OneLine(g.site.type_name())
        ));
    }
}

/// The rows of the growth detector's sites (the first `top` of `growing`), with the note on
/// sampled estimates first, added to `lines`.
fn growth_rows(t: &Timeline, growing: &[Growth], top: usize, lines: &mut Vec<String>) {
    let sampled = t.checkpoints.last().and_then(|c| c.sampled_mean);
    if let Some(note) = estimates_note(sampled) {
        lines.push(format!("   {note}"));
    }
    for g in growing.iter().take(top) {
        lines.push(format!(
            "   {:>11} over {} steps  {}  [{}]",
            signed_bytes(g.live_bytes),
            g.steps,
            g.site,
            OneLine(g.site.type_name())
        ));
    }
    if let Some(more) = growing.len().checked_sub(top).filter(|&n| n > 0) {
        let sites = if more == 1 { "site" } else { "sites" };
        lines.push(format!("   … and {more} more {sites}"));
    }
}

/// The growth detector's line when no site grew at every step: `none`, or, when the live total
/// did grow at every step, why no site was found; `between` names the kind of checkpoints
/// followed, if one was.
fn nothing_growing(t: &Timeline, between: &str) -> String {
    let ends = t.unbroken_step_ends().len();
    if ends < 3 {
        // Not "none": nothing was looked at (a user trial read an empty timeline file so). Where
        // the timeline dropped checkpoints, say so: it may hold many, and only the ones after the
        // last gap count (a user trial with `keep=3` read "2" with no word of why).
        let dropped = match t.dropped() {
            0 => String::new(),
            n => format!(
                "; {} before them not kept (keep_checkpoints or HEAPDELTA=keep=), and no step \
                 is compared across them",
                count(n, "checkpoint")
            ),
        };
        return format!(
            "growing at every step{between}: too few checkpoints to tell ({ends}; it compares \
             the steps between checkpoints, and takes three{dropped})"
        );
    }
    let Some((steps, growth, sited)) = t.live_rose_at_every_step() else {
        return format!("growing at every step{between}: none");
    };
    let sampled = t.checkpoints.last().and_then(|c| c.sampled_mean);
    let why = match (sampled, sited) {
        (Some(mean), _) => format!(
            "no sampled call site grew at every step (sampled about once per {}): record exact \
             sites, or sample more often (`CallSites::Sampled` with a smaller `mean_bytes`, \
             `HEAPDELTA=sites=sampled:N`)",
            bytes(mean)
        ),
        (None, false) => {
            "no call site was recorded (call sites off); each step's size classes say what grew"
                .to_string()
        }
        (None, true) => "no single call site grew at every step".to_string(),
    };
    format!(
        "growing at every step{between}: no site, but live bytes rose in each of the last {steps} steps \
         ({} in all): {why}",
        signed_bytes(growth)
    )
}

impl Display for Timeline {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        // Made inside heapdelta's guard, written outside it: the formatter may be writing into a
        // buffer of the program's, whose growth is the program's.
        let text = crate::thread::untracked(|| timeline_text(self, usize::MAX));
        f.write_str(&text)
    }
}
