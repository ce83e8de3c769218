//! Sizes of text and how much of it a figure's space holds, so that titles,
//! legends and tick labels fit and do not overlap at every `--plot-size`.
//! Widths are those of the PNG's 8x8 glyphs ([`super::pixel_text`]), wider
//! than a sans-serif font's characters of the same size, so SVG text fits
//! too.

use super::failed;
use super::pixel_text::{scale, GLYPH};
use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;

/// Font sizes: titles (large, or small where the large one does not fit)
/// and every other text.
pub const TITLE: u32 = 22;
pub const SMALL: u32 = 14;
/// Pixels at least between two tick labels.
const LABEL_GAP: u32 = 12;

/// Width in pixels of `text` in font size `size`.
pub fn text_width(text: &str, size: u32) -> u32 {
    (GLYPH * scale(size as f64)) as u32 * text.chars().count() as u32
}

/// Height in pixels of a line in font size `size`.
pub fn text_height(size: u32) -> u32 {
    (GLYPH * scale(size as f64)) as u32
}

/// `text`, cut short with `...` where it is wider than `width`.
pub fn ellipsize(text: &str, width: u32, size: u32) -> String {
    if text_width(text, size) <= width {
        return text.to_string();
    }
    let fits = (width / text_width("x", size)) as usize;
    let kept: String = text.chars().take(fits.saturating_sub(3)).collect();
    format!("{kept}...")
}

/// The font size and lines of a title within `width`: on one line large,
/// else small, else small and broken between words (a word too long for a
/// line cut short).
pub fn fit_title(text: &str, width: u32) -> (u32, Vec<String>) {
    for size in [TITLE, SMALL] {
        if text_width(text, size) <= width {
            return (size, vec![text.to_string()]);
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if text_width(&format!("{line} {word}"), SMALL) <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    let lines = lines.iter().map(|l| ellipsize(l, width, SMALL)).collect();
    (SMALL, lines)
}

/// The most tick labels an axis of `axis` pixels takes, each `label`
/// pixels long along it, with room between them; at least 2. Plotters
/// places at most this many, evenly, so none overlap.
pub fn label_count(axis: u32, label: u32) -> usize {
    ((axis / (label + LABEL_GAP)) as usize).max(2)
}

/// The most tick labels for an axis of `axis` pixels showing `range`, its
/// labels written by `format`: as many as fit the widest of the labels
/// plotters would place for that many ([`label_count`]).
pub fn tick_count(axis: u32, range: Range<f64>, format: impl Fn(f64) -> String) -> usize {
    let mut count = label_count(axis, 0);
    loop {
        let points = RangedCoordf64::from(range.clone()).key_points(count);
        let widest = points.iter().map(|&v| text_width(&format(v), SMALL));
        let fits = label_count(axis, widest.max().unwrap_or(0));
        if fits >= count {
            return count;
        }
        count = fits;
    }
}

/// Draws `title` centred at the top of `area`, fitted to its width, and
/// returns the area below it.
pub fn draw_title<B: DrawingBackend>(
    area: &DrawingArea<B, Shift>,
    title: &str,
) -> Result<DrawingArea<B, Shift>, String> {
    let (width, _) = area.dim_in_pixel();
    let (size, lines) = fit_title(title, width.saturating_sub(16));
    let line_height = text_height(size) + 6;
    let (top, rest) = area.split_vertically(line_height * lines.len() as u32 + 10);
    let style = ("sans-serif", size)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (k, line) in lines.iter().enumerate() {
        let y = 8 + (k as u32 * line_height) as i32;
        top.draw(&Text::new(
            line.clone(),
            (width as i32 / 2, y),
            style.clone(),
        ))
        .map_err(failed)?;
    }
    Ok(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_fit_their_width() {
        let title = "1-NN confusion, accuracy 0.9067";
        assert_eq!(fit_title(title, 600), (TITLE, vec![title.to_string()]));
        assert_eq!(fit_title(title, 300), (SMALL, vec![title.to_string()]));
        // The smallest figure's heat map: broken between words.
        let (size, lines) = fit_title(title, 160);
        assert_eq!(size, SMALL);
        assert_eq!(lines, ["1-NN confusion,", "accuracy 0.9067"]);
        let (_, lines) = fit_title("a_file_name_far_too_long_for_any_line.ts", 100);
        assert!(
            lines.iter().all(|l| text_width(l, SMALL) <= 100),
            "{lines:?}"
        );
        assert!(lines[0].ends_with("..."));
        assert_eq!(ellipsize("short", 100, SMALL), "short");
    }

    /// At the smallest plot, 200 pixels a side, an axis has about 120:
    /// plotters' ticks for the count chosen there (and on larger axes) are
    /// far enough apart for their labels, for ranges of every scale.
    #[test]
    fn tick_labels_do_not_overlap_on_the_smallest_axes() {
        let format = super::super::heatmap::format_tick;
        for axis in [80u32, 120, 200, 330, 1000] {
            for (low, high) in [(0.0, 150.0), (-0.5, 4999.5), (0.0, 2.0), (-1.25, 7.5)] {
                let count = tick_count(axis, low..high, format);
                let points = RangedCoordf64::from(low..high).key_points(count);
                assert!(!points.is_empty() && points.len() <= count, "{points:?}");
                let pixels = |v: f64| (v - low) / (high - low) * axis as f64;
                for pair in points.windows(2) {
                    let apart = pixels(pair[1]) - pixels(pair[0]);
                    let widest = text_width(&format(pair[0]), SMALL)
                        .max(text_width(&format(pair[1]), SMALL));
                    assert!(
                        apart >= widest as f64 + 4.0,
                        "axis {axis}, {low}..{high}: {points:?} {apart} px apart"
                    );
                }
            }
        }
        // Where the labels of 0..150 ran together at 600 x 400.
        assert_eq!(tick_count(60, 0.0..150.0, format), 2);
        assert!(tick_count(1000, 0.0..150.0, format) >= 10);
    }
}
