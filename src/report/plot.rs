//! The timeline plot (feature `plot`): live, peak and (under a `Pool`) reserved bytes per
//! checkpoint, and the live bytes of the sites that grew at every step and of those that grew
//! most, one line each.

use std::io;
use std::path::Path;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use std::collections::HashMap;

use crate::callsite::Site;
use crate::diff::{live_by_site, live_change, not_kept_between, Leaves, Timeline};
use crate::report::text::{count, estimates_note, OneLine};
use crate::snapshot::Snapshot;

/// Height of the chart, above the legend.
const CHART_HEIGHT: u32 = 560;

/// The binary unit to count `top` bytes in (bytes, KiB, MiB …): the largest not above it.
fn binary_unit(top: u64) -> (f64, &'static str) {
    const NAMES: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 1u64;
    let mut at = 0;
    while at + 1 < NAMES.len() && top / unit >= 1024 {
        unit *= 1024;
        at += 1;
    }
    (unit as f64, NAMES[at])
}

/// A tick value as a short number: up to two decimals, trailing zeros dropped (`1.5`, `0.25`, `3`).
fn round_number(v: f64) -> String {
    let text = format!("{v:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Most checkpoints named under the x axis.
const X_LABELS: usize = 12;
/// Width of the picture, of the y axis labels and of the chart's margin, in pixels.
const WIDTH_PIXELS: usize = 1000;
const Y_LABELS_PIXELS: usize = 80;
const MARGIN_PIXELS: usize = 16;
/// A label's character, in pixels, at most (the axis labels' font), and the room kept between
/// two labels.
const LABEL_CHAR_PIXELS: usize = 7;
const LABEL_GAP_PIXELS: usize = 14;
/// Longest checkpoint label shown under the x axis, in characters; a longer one keeps its end
/// (`…number 28`), where labels that count steps or times differ.
const LABEL_CHARS: usize = 24;

/// How many checkpoints can be named under the x axis, the longest label `chars` long, without
/// two labels running into each other: from 2 to `X_LABELS`. With `right_axis`, a second y axis
/// takes room on the right.
fn labels_that_fit(chars: usize, right_axis: bool) -> usize {
    let right = if right_axis { Y_LABELS_PIXELS } else { 0 };
    let axis = (WIDTH_PIXELS - Y_LABELS_PIXELS - MARGIN_PIXELS - right)
        .saturating_sub(right_margin(chars));
    (axis / (chars * LABEL_CHAR_PIXELS + LABEL_GAP_PIXELS)).clamp(2, X_LABELS)
}

/// The chart's right margin, in pixels: room for half the last checkpoint's label, centred on
/// the axis's end, the longest label `chars` long.
fn right_margin(chars: usize) -> usize {
    (chars * LABEL_CHAR_PIXELS / 2).max(MARGIN_PIXELS)
}

/// Columns a character takes in the axis labels' font: 2 for the wide characters of East Asian
/// scripts and emoji (their main Unicode blocks), 1 for others.
fn columns(c: char) -> usize {
    let wide = matches!(c as u32,
        0x1100..=0x115F | 0x2E80..=0x303E | 0x3041..=0x33FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF | 0xAC00..=0xD7A3 | 0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6 | 0x1F300..=0x1F64F | 0x1F900..=0x1F9FF | 0x20000..=0x3FFFD);
    if wide {
        2
    } else {
        1
    }
}

/// `label`, cut to its last `LABEL_CHARS - 1` characters after an ellipsis when longer.
fn axis_label(label: &str) -> String {
    let chars = label.chars().count();
    if chars <= LABEL_CHARS {
        return label.to_string();
    }
    let end: String = label.chars().skip(chars - (LABEL_CHARS - 1)).collect();
    format!("\u{2026}{end}")
}

/// The checkpoints named under the x axis, of `n`, at most `most` (at least 2): every one when
/// they fit, else every k-th from the first, the last of those replaced by the last checkpoint
/// when it is not one of them (so the last two named are k to 2k − 1 apart, never crowded).
fn label_points(n: usize, most: usize) -> Vec<f64> {
    let last = n.saturating_sub(1);
    let every = last.div_ceil(most.max(2) - 1).max(1);
    let mut points: Vec<usize> = (0..=last).step_by(every).collect();
    if points.last() != Some(&last) {
        if points.len() > 1 {
            points.pop();
        }
        points.push(last);
    }
    points.into_iter().map(|i| i as f64).collect()
}

/// The x axis: checkpoints by index, ticked and named at `points` only, so that the last is
/// always named (plotters' own ticks fall on round numbers, which can skip it).
struct CheckpointAxis {
    inner: RangedCoordf64,
    points: Vec<f64>,
}

impl Ranged for CheckpointAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.points.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// The runs a line through `gaps.len() + 1` points is drawn in, as (solid, first point, last
/// point): solid between checkpoints the timeline kept in a row, dashed across each span where it
/// dropped some (`gaps[i]`: checkpoints were dropped between points `i` and `i + 1`). One point
/// alone is a solid run of itself.
fn spans(gaps: &[bool]) -> Vec<(bool, usize, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    for (i, &gap) in gaps.iter().enumerate() {
        if gap {
            if i > from {
                out.push((true, from, i));
            }
            out.push((false, i, i + 1));
            from = i + 1;
        }
    }
    if from < gaps.len() || out.is_empty() {
        out.push((true, from, gaps.len()));
    }
    out
}

/// Sites drawn as their own lines.
const TOP_SITES: usize = 5;
/// Longest site name in the legend (a line of its own under the chart).
const NAME_CHARS: usize = 90;

const SITE_COLOURS: [RGBColor; TOP_SITES] = [
    RGBColor(230, 120, 0),
    RGBColor(0, 150, 70),
    RGBColor(150, 60, 180),
    RGBColor(0, 150, 170),
    RGBColor(170, 110, 60),
];

struct Series {
    name: String,
    colour: RGBColor,
    points: Vec<u64>,
    /// A site's line, as opposed to a total.
    site: bool,
}

/// Whether the sites' lines get a y axis of their own, on the right: when the largest of them
/// stays under a quarter of the largest total, on whose scale they would lie flat (a leak of
/// kilobytes in a heap of megabytes, the case the plot is for).
fn sites_on_their_own_axis(totals_top: u64, sites_top: u64) -> bool {
    sites_top > 0 && sites_top.saturating_mul(4) < totals_top
}

/// The series to draw: totals first (the peak before live, so that live is drawn over it where
/// they meet), then the sites that grew at every step, then the others that grew most.
fn series(t: &Timeline) -> Vec<Series> {
    let cps = t.checkpoints();
    let mut out = vec![
        Series {
            name: "peak".to_string(),
            colour: RGBColor(30, 60, 200),
            points: cps.iter().map(|c| c.totals().peak_bytes).collect(),
            site: false,
        },
        Series {
            name: "live".to_string(),
            colour: RGBColor(200, 30, 30),
            points: cps.iter().map(|c| c.totals().live_bytes).collect(),
            site: false,
        },
    ];
    if cps.iter().any(|c| c.pool().is_some()) {
        out.push(Series {
            name: "reserved (pool)".to_string(),
            colour: RGBColor(90, 90, 90),
            points: cps
                .iter()
                .map(|c| c.pool().map_or(0, |p| p.bytes_reserved))
                .collect(),
            site: false,
        });
    }
    // Sites are picked by their growth up to the last step's end: a final `exit` snapshot, taken
    // once the program has dropped its data, is drawn but does not hide what grew.
    let last_step = t.step_ends().len().saturating_sub(1);
    let (Some(first), Some(last)) = (cps.first(), cps.get(last_step)) else {
        return out;
    };
    let (first, last) = (live_by_site(first), live_by_site(last));
    let mut growing: Vec<(&Site, i64)> = last
        .iter()
        .map(|(site, &end)| {
            let start = first.get(site).copied().unwrap_or(0);
            (site, end.saturating_sub(start))
        })
        .filter(|(_, growth)| *growth > 0)
        .collect();
    growing.sort_by_cached_key(|(site, growth)| (std::cmp::Reverse(*growth), site.to_string()));
    // The sites that grew at every step (`Timeline::growing`, the leak) come first: picked by
    // growth alone, one-off table resizes crowded a small steady leak out (a user trial).
    let leaking: Vec<Site> = t.growing().into_iter().map(|g| g.site).collect();
    growing.sort_by_key(|(site, _)| !leaking.contains(site));
    let drawn: Vec<&Site> = growing
        .into_iter()
        .take(SITE_COLOURS.len())
        .map(|(site, _)| site)
        .collect();
    for ((site, points), colour) in drawn
        .iter()
        .zip(live_of(cps, &first, &drawn))
        .zip(SITE_COLOURS)
    {
        out.push(Series {
            name: legend_name(site),
            colour,
            points: points.into_iter().map(|b| b.max(0) as u64).collect(),
            site: true,
        });
    }
    out
}

/// The live bytes of each of `sites` at each checkpoint of `cps`, from those at the first
/// (`first`, as `live_by_site` gives them) and each step's change (`live_change`): a fuzzing
/// run's timeline of 5,000 sites over 2,000 checkpoints took 2.3 GB to plot when every
/// checkpoint's sites were mapped whole, for the five drawn.
fn live_of(cps: &[Snapshot], first: &HashMap<Site, i64>, sites: &[&Site]) -> Vec<Vec<i64>> {
    let mut now: Vec<i64> = sites
        .iter()
        .map(|&site| first.get(site).copied().unwrap_or(0))
        .collect();
    let mut out: Vec<Vec<i64>> = now.iter().map(|&live| vec![live]).collect();
    let mut leaves = Leaves::new();
    for pair in cps.windows(2) {
        let change = live_change(&pair[0], &pair[1], &mut leaves);
        for ((points, live), &site) in out.iter_mut().zip(&mut now).zip(sites) {
            *live = live.saturating_add(change.get(site).copied().unwrap_or(0));
            points.push(*live);
        }
    }
    out
}

/// A site's name in the legend, at most `NAME_CHARS` characters: `function (file:line) [type]`
/// with the file's name only, the function's path cut from the left when it is too long, so that
/// the line and the type, which tell two sites of one function apart, stay.
fn legend_name(site: &Site) -> String {
    let Some((frame, outer)) = site.frames().split_first() else {
        return site.to_string();
    };
    let mut tail = String::new();
    if let Some(file) = &frame.file {
        let name = Path::new(file)
            .file_name()
            .map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned());
        tail += &format!(" ({}", OneLine(&name));
        if let Some(line) = frame.line {
            tail += &format!(":{line}");
        }
        tail.push(')');
    }
    if let Some(type_name) = site.known_type() {
        tail += &format!(" [{}]", OneLine(type_name));
    }
    let shown = crate::callsite::site::shown_name(frame, outer);
    let function: Vec<char> = OneLine(&shown).to_string().chars().collect();
    let room = NAME_CHARS.saturating_sub(tail.chars().count()).max(2);
    let name = if function.len() <= room {
        function.iter().collect::<String>() + &tail
    } else {
        let kept: String = function[function.len() - (room - 1)..].iter().collect();
        format!("\u{2026}{kept}{tail}")
    };
    match name.chars().count() > NAME_CHARS {
        true => name.chars().take(NAME_CHARS - 1).collect::<String>() + "\u{2026}",
        false => name,
    }
}

fn plot_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("drawing the plot failed: {e}"))
}

#[cfg_attr(docsrs, doc(cfg(feature = "plot")))]
impl Timeline {
    /// Draws the timeline as an SVG line plot (feature `plot`): live, peak and (under a
    /// [`Pool`](crate::Pool)) reserved bytes at each checkpoint, and the live bytes of five sites:
    /// those that grew at every step ([`growing`](Timeline::growing)) first, then those that grew
    /// most from the first checkpoint to the last. Across a span of checkpoints the timeline did
    /// not keep ([`keep_checkpoints`](crate::keep_checkpoints)) the lines are dashed. A timeline
    /// without checkpoints has nothing to draw: that is an error.
    ///
    /// ```
    /// for step in 1..=3 {
    ///     heapdelta::checkpoint(format!("step {step}"));
    /// }
    /// let path = std::env::temp_dir().join("heapdelta-doc-timeline.svg");
    /// heapdelta::timeline().write_plot(&path)?;
    /// # let _ = std::fs::remove_file(&path);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_plot(&self, path: impl AsRef<Path>) -> io::Result<()> {
        crate::thread::untracked(|| {
            if self.checkpoints().is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "nothing to plot: the timeline has no checkpoints",
                ));
            }
            let mut svg = String::new();
            self.draw(&mut svg)?;
            crate::report::write_file(path.as_ref(), |w| io::Write::write_all(w, svg.as_bytes()))
        })
    }

    /// Draws the plot of `write_plot` into `svg` (the timeline has checkpoints).
    fn draw(&self, svg: &mut String) -> io::Result<()> {
        let cps = self.checkpoints();
        let labels: Vec<String> = cps
            .iter()
            .enumerate()
            .map(|(i, c)| {
                c.label().map_or_else(
                    || format!("#{}", i + 1),
                    |label| axis_label(&OneLine(label).to_string()),
                )
            })
            .collect();
        let longest = labels
            .iter()
            .map(|l| l.chars().map(columns).sum())
            .max()
            .unwrap_or(0);
        let series = series(self);
        let top_of = |sites: bool| {
            series
                .iter()
                .filter(|s| s.site == sites)
                .flat_map(|s| s.points.iter().copied())
                .max()
                .unwrap_or(0)
        };
        let (totals_top, sites_top) = (top_of(false), top_of(true));
        let right_axis = sites_on_their_own_axis(totals_top, sites_top);
        let top = match right_axis {
            true => totals_top,
            false => totals_top.max(sites_top),
        }
        // At least 16 B, so that an axis in bytes has whole ticks.
        .max(16);
        // Each y axis counts in one binary unit, so that its round ticks are round in that unit.
        let (unit, unit_name) = binary_unit(top);
        let (site_unit, site_unit_name) = binary_unit(sites_top.max(16));
        let last_x = (cps.len() - 1).max(1) as f64;
        let mut notes = Vec::new();
        if right_axis {
            notes.push("the sites' lines are drawn against the right axis".to_string());
        }
        if let Some(note) = estimates_note(cps.last().and_then(|c| c.sampled_mean)) {
            notes.push(note);
        }
        // Where the timeline dropped checkpoints (`keep`), the span between two it kept is many
        // steps, not one: its lines are dashed and the legend says so (a user trial read the
        // span as one ordinary step).
        let gaps: Vec<bool> = cps
            .windows(2)
            .map(|w| not_kept_between(&w[0], &w[1]) > 0)
            .collect();
        if let n @ 1.. = self.dropped() {
            notes.push(format!(
                "dashed: {} between them not kept (keep_checkpoints or HEAPDELTA=keep=)",
                count(n, "checkpoint")
            ));
        }
        let points = label_points(cps.len(), labels_that_fit(longest, right_axis));

        // The legend goes under the chart, one line per series, where it hides no data.
        let legend_lines = (series.len() + notes.len()) as u32;
        let root = SVGBackend::with_string(
            svg,
            (WIDTH_PIXELS as u32, CHART_HEIGHT + 16 + 20 * legend_lines),
        )
        .into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (chart_area, legend_area) = root.split_vertically(CHART_HEIGHT);
        let mut chart = ChartBuilder::on(&chart_area)
            .caption("Heap per checkpoint", ("sans-serif", 22))
            .margin(MARGIN_PIXELS as u32)
            .margin_right(right_margin(longest) as u32)
            .x_label_area_size(40)
            .y_label_area_size(Y_LABELS_PIXELS as u32)
            .right_y_label_area_size(if right_axis {
                Y_LABELS_PIXELS as u32
            } else {
                0
            })
            .build_cartesian_2d(
                CheckpointAxis {
                    inner: (0f64..last_x).into(),
                    points: points.clone(),
                },
                0f64..top as f64 / unit * 1.08,
            )
            .map_err(plot_error)?
            .set_secondary_coord(
                CheckpointAxis {
                    inner: (0f64..last_x).into(),
                    points,
                },
                0f64..sites_top.max(16) as f64 / site_unit * 1.08,
            );
        let x_label = |x: &f64| {
            let i = x.round();
            if (x - i).abs() > 1e-6 || i < 0.0 {
                return String::new();
            }
            labels.get(i as usize).cloned().unwrap_or_default()
        };
        let y_label = |y: &f64| format!("{} {unit_name}", round_number(*y));
        chart
            .configure_mesh()
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .x_desc("checkpoint")
            .y_desc("bytes")
            .draw()
            .map_err(plot_error)?;
        if right_axis {
            let site_label = |y: &f64| format!("{} {site_unit_name}", round_number(*y));
            chart
                .configure_secondary_axes()
                .y_label_formatter(&site_label)
                .y_desc("bytes of the sites")
                .draw()
                .map_err(plot_error)?;
        }
        for s in &series {
            let secondary = s.site && right_axis;
            let scale = if secondary { site_unit } else { unit };
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .enumerate()
                .map(|(i, &v)| (i as f64, v as f64 / scale))
                .collect();
            let colour = s.colour;
            for (solid, from, to) in spans(&gaps) {
                let span = points[from..=to].iter().copied();
                let style = colour.stroke_width(2);
                let drawn = match (solid, secondary) {
                    (true, true) => chart.draw_secondary_series(LineSeries::new(span, style)),
                    (true, false) => chart.draw_series(LineSeries::new(span, style)),
                    (false, true) => {
                        chart.draw_secondary_series(DashedLineSeries::new(span, 6, 6, style))
                    }
                    (false, false) => chart.draw_series(DashedLineSeries::new(span, 6, 6, style)),
                };
                drawn.map_err(plot_error)?;
            }
            let dots = points
                .into_iter()
                .map(move |p| Circle::new(p, 3, colour.filled()));
            if secondary {
                chart.draw_secondary_series(dots).map_err(plot_error)?;
            } else {
                chart.draw_series(dots).map_err(plot_error)?;
            }
        }
        let font = ("sans-serif", 14).into_font();
        for (i, s) in series.iter().enumerate() {
            let y = 8 + 20 * i as i32;
            legend_area
                .draw(&PathElement::new(
                    vec![(96, y + 8), (126, y + 8)],
                    s.colour.stroke_width(2),
                ))
                .map_err(plot_error)?;
            legend_area
                .draw(&Text::new(s.name.as_str(), (136, y), font.clone()))
                .map_err(plot_error)?;
        }
        for (i, note) in notes.iter().enumerate() {
            let y = 8 + 20 * (series.len() + i) as i32;
            legend_area
                .draw(&Text::new(note.as_str(), (96, y), font.clone()))
                .map_err(plot_error)?;
        }
        root.present().map_err(plot_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callsite::Frame;

    fn site(function: &str, line: u32, type_name: &str) -> Site {
        let frame = Frame {
            function: function.to_string(),
            file: Some("examples/some/long/path/write_reports.rs".to_string()),
            line: Some(line),
        };
        Site::from_frames(vec![frame], Some(type_name.to_string()))
    }

    #[test]
    fn every_checkpoint_is_named_when_twelve_or_fewer() {
        assert_eq!(label_points(1, X_LABELS), [0.0]);
        assert_eq!(
            label_points(12, X_LABELS),
            (0..12).map(f64::from).collect::<Vec<_>>()
        );
    }

    #[test]
    fn the_last_checkpoint_is_always_named() {
        for n in 13..200 {
            let points = label_points(n, X_LABELS);
            assert_eq!(points.last(), Some(&((n - 1) as f64)), "{n}");
            assert!(points.len() <= X_LABELS, "{n}: {points:?}");
        }
    }

    #[test]
    fn the_last_named_checkpoint_is_at_least_a_stride_from_the_one_before() {
        assert_eq!(
            label_points(14, X_LABELS),
            [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 13.0]
        );
        for n in 13..200 {
            let points = label_points(n, X_LABELS);
            let gaps: Vec<f64> = points.windows(2).map(|w| w[1] - w[0]).collect();
            let (last, rest) = gaps.split_last().unwrap();
            assert!(rest.iter().all(|g| g == &rest[0]), "{n}: {points:?}");
            assert!(*last >= rest[0], "{n}: {points:?}");
        }
    }

    #[test]
    fn the_longer_the_labels_the_fewer_checkpoints_are_named() {
        assert_eq!(labels_that_fit("step 12".len(), false), X_LABELS);
        assert_eq!(labels_that_fit("iteration number 28".len(), false), 5);
        assert_eq!(labels_that_fit(LABEL_CHARS, false), 4);
        assert_eq!(labels_that_fit(500, false), 2);
        assert_eq!(right_margin("#1".len()), MARGIN_PIXELS);
        assert_eq!(
            right_margin(LABEL_CHARS),
            LABEL_CHARS * LABEL_CHAR_PIXELS / 2
        );
        let points = label_points(300, labels_that_fit(19, false));
        assert_eq!(points, [0.0, 75.0, 150.0, 299.0]);
    }

    #[test]
    fn a_wide_character_takes_two_columns() {
        let width = |label: &str| label.chars().map(columns).sum::<usize>();
        assert_eq!(width("step 3"), 6);
        assert_eq!(width("第3步"), 5);
    }

    #[test]
    fn a_long_axis_label_keeps_its_end() {
        assert_eq!(axis_label("step 3"), "step 3");
        let long = axis_label("the model's iteration number 28");
        assert_eq!(long.chars().count(), LABEL_CHARS);
        assert_eq!(long, "\u{2026}l's iteration number 28");
    }

    #[test]
    fn a_legend_name_keeps_the_line_and_the_type_and_cuts_the_function_path() {
        let name = legend_name(&site(
            "write_reports::service::cache::Cache::remember_everything",
            27,
            "HashMap<u64, Vec<u8>>",
        ));
        assert!(name.chars().count() <= NAME_CHARS, "{name}");
        assert!(name.starts_with('\u{2026}'), "{name}");
        assert!(
            name.ends_with("_everything (write_reports.rs:27) [HashMap<u64, Vec<u8>>]"),
            "{name}"
        );
    }

    #[test]
    fn the_y_axis_counts_in_the_largest_binary_unit_below_the_top() {
        assert_eq!(binary_unit(1000), (1.0, "B"));
        assert_eq!(binary_unit(1024), (1024.0, "KiB"));
        assert_eq!(binary_unit(10 << 20), (1048576.0, "MiB"));
    }

    #[test]
    fn tick_values_are_short_numbers() {
        assert_eq!(round_number(1.5), "1.5");
        assert_eq!(round_number(0.25), "0.25");
        assert_eq!(round_number(3.0), "3");
        assert_eq!(round_number(0.0), "0");
    }

    #[test]
    fn sites_get_their_own_axis_when_they_would_lie_flat_on_the_totals() {
        assert!(sites_on_their_own_axis(80 << 20, 97 << 10));
        assert!(!sites_on_their_own_axis(100, 40));
        assert!(!sites_on_their_own_axis(100, 0));
    }

    #[test]
    fn a_right_axis_leaves_room_for_fewer_labels() {
        assert_eq!(
            (labels_that_fit(10, false), labels_that_fit(10, true)),
            (10, 9)
        );
    }

    /// The SVG of four checkpoints holding `total` live bytes, with one site growing by 8 bytes
    /// a step.
    fn plot_of_a_small_site_in(total: u64) -> String {
        use crate::snapshot::{SiteCount, SiteList, Snapshot};
        let checkpoints = (0..4u32)
            .map(|epoch| {
                let mut s = Snapshot::zero();
                s.epoch = epoch;
                s.checkpoint = true;
                s.label = Some(format!("step {epoch}"));
                s.totals.live_bytes = total;
                s.totals.peak_bytes = total;
                let site = site("app::remember", 7, "Vec<u8>");
                s.sites = SiteList::new(vec![SiteCount {
                    site: Some(site),
                    ..SiteCount::live(1, u64::from(epoch))
                }]);
                s
            })
            .collect();
        let mut svg = String::new();
        Timeline::new(checkpoints).draw(&mut svg).unwrap();
        svg
    }

    #[test]
    fn a_site_small_beside_the_heap_is_drawn_against_an_axis_of_its_own() {
        let svg = plot_of_a_small_site_in(80 << 20);
        assert!(svg.contains("bytes of the sites"), "{svg}");
        assert!(svg.contains("drawn against the right axis"));
    }

    #[test]
    fn a_site_as_large_as_the_heap_shares_its_axis() {
        let svg = plot_of_a_small_site_in(32);
        assert!(!svg.contains("bytes of the sites"), "{svg}");
    }

    #[test]
    fn a_line_is_dashed_across_each_span_of_dropped_checkpoints_only() {
        assert_eq!(spans(&[]), [(true, 0, 0)]);
        assert_eq!(spans(&[false, false]), [(true, 0, 2)]);
        assert_eq!(spans(&[true, false, false]), [(false, 0, 1), (true, 1, 3)]);
        assert_eq!(
            spans(&[false, true, false, true]),
            [(true, 0, 1), (false, 1, 2), (true, 2, 3), (false, 3, 4)]
        );
    }

    #[test]
    fn a_plot_of_a_timeline_that_dropped_checkpoints_says_how_many() {
        use crate::snapshot::Snapshot;
        let checkpoints = [0u32, 7, 8, 9]
            .into_iter()
            .map(|epoch| {
                let mut s = Snapshot::zero();
                s.epoch = epoch;
                s.checkpoint = true;
                s.totals.live_bytes = 100 * u64::from(epoch);
                s
            })
            .collect();
        let mut svg = String::new();
        Timeline::new(checkpoints).draw(&mut svg).unwrap();
        assert!(
            svg.contains("dashed: 6 checkpoints between them not kept"),
            "{svg}"
        );
        // The live line's colour: its legend, one solid run, and the dashes across the span.
        let live_lines = svg.matches(r##"<polyline fill="none" opacity="1" stroke="#C81E1E""##);
        assert!(live_lines.count() > 2, "{svg}");
    }

    #[test]
    fn a_short_legend_name_is_whole() {
        let name = legend_name(&site("cache::insert", 42, "Vec<u8>"));
        assert_eq!(name, "cache::insert (write_reports.rs:42) [Vec<u8>]");
    }
}
