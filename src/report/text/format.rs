//! How the terminal report writes numbers, sizes and names: thousands, binary units, signs,
//! names kept on one line, and the tables' columns.

use std::fmt::{self, Display, Formatter, Write as _};

/// `s` with control characters, line separators, bidirectional controls and noncharacters escaped
/// (`\n`, `\u{1b}`, `\u{2028}`, `\u{202e}`, `\u{ffff}`): a label or name read from a file stays
/// on its line, cannot drive the terminal or turn the rest of the line around, and can be written
/// into an SVG (XML admits no noncharacter).
pub(crate) struct OneLine<'a>(pub &'a str);

/// Whether `c` would break a line, drive a terminal, reorder the text around it or make XML
/// invalid: what `OneLine` escapes.
pub(crate) fn breaks_line(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{61c}' | '\u{200e}' | '\u{200f}'
        )
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        || matches!(c, '\u{fdd0}'..='\u{fdef}')
        || (c as u32) & 0xfffe == 0xfffe
}

impl Display for OneLine<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if breaks_line(c) {
                write!(f, "{}", c.escape_default())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        Ok(())
    }
}

/// `n` things, with the word in the singular for one: `1 block`, `1,024 blocks`.
pub(crate) fn count(n: u64, word: &str) -> String {
    match n {
        1 => format!("1 {word}"),
        n => format!("{} {word}s", thousands(n)),
    }
}

/// `n / d` rounded to the nearest whole number (`d` > 0).
pub(super) fn rounded_div(n: u64, d: u64) -> u64 {
    n / d + u64::from(n % d >= d - n % d)
}

/// `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// `+1,234` / `-56`.
pub(crate) fn signed(n: i64) -> String {
    let sign = if n < 0 { '-' } else { '+' };
    format!("{sign}{}", thousands(n.unsigned_abs()))
}

/// The binary units above bytes, each 1,024 times the one before.
const BINARY_UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// `512 B`, `1.5 KiB`, `112.4 MiB`, `1.18 GiB`.
pub(crate) fn bytes(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    // One decimal up to MiB, two from GiB; the unit is chosen after rounding, so 1,048,575
    // bytes read 1.0 MiB rather than 1024.0 KiB.
    let decimals = |unit: usize| if unit >= 2 { 2 } else { 1 };
    let rounded = |v: f64, unit: usize| {
        let scale = 10f64.powi(decimals(unit));
        (v * scale).round() / scale
    };
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while rounded(v, unit) >= 1024.0 && unit + 1 < BINARY_UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!(
        "{v:.prec$} {}",
        BINARY_UNITS[unit],
        prec = decimals(unit) as usize
    )
}

/// A size class's name, its largest request, exact: `640 B`, `1.25 KiB`, `2.5 MiB` (class tops
/// above 512 B are quarters of powers of two), or in bytes when no binary unit gives it in two
/// decimals. Beside rounded figures, `2,621,440 B +2.1 MiB` read as two units for one thing (a
/// user trial).
pub(crate) fn class_name(size: u64) -> String {
    // The largest unit, at most the size, that gives it in whole hundredths.
    (1..=BINARY_UNITS.len())
        .rev()
        .map(|k| (1u128 << (10 * k), BINARY_UNITS[k - 1]))
        .find(|&(unit, _)| u128::from(size) >= unit && (u128::from(size) * 100) % unit == 0)
        .map_or_else(
            || format!("{} B", thousands(size)),
            // Exact: whole hundredths, printed in their shortest form (`1`, `2.5`, `1.25`).
            |(unit, name)| format!("{} {name}", (u128::from(size) * 100 / unit) as f64 / 100.0),
        )
}

/// `+1.5 KiB` / `-512 B`.
pub(crate) fn signed_bytes(n: i64) -> String {
    let sign = if n < 0 { '-' } else { '+' };
    format!("{sign}{}", bytes(n.unsigned_abs()))
}

/// A table's header and rows of three figures and a name, each line ended: the figures' columns as
/// wide as their widest (a million blocks fits the least widths, 12, 10 and 10).
pub(crate) fn table_rows(header: [&str; 4], rows: Vec<[String; 4]>) -> String {
    let width = |i: usize, least: usize| {
        rows.iter()
            .map(|c| c[i].chars().count())
            .fold(least, usize::max)
    };
    let (w0, w1, w2) = (width(0, 12), width(1, 10), width(2, 10));
    let [a, b, c, name] = header;
    let mut out = format!("{a:>w0$} {b:>w1$} {c:>w2$}  {name}\n");
    for [x, y, z, name] in rows {
        let _ = writeln!(out, "{x:>w0$} {y:>w1$} {z:>w2$}  {name}");
    }
    out
}
