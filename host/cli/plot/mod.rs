//! `--plot`: figures as SVG or PNG, by the file's extension. A figure is
//! drawn once for any plotters backend ([`Figure`]); PNG text comes from
//! [`pixel_text`]'s 8x8 glyphs, SVG text is left to the viewer's fonts.

mod alignment;
mod heatmap;
mod layout;
mod pixel_text;
mod search;

pub use alignment::AlignmentFigure;
pub use heatmap::HeatMap;
pub use search::SearchFigure;

use super::output::{check_destination, Outputs};
use super::Failure;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// A figure, drawn the same way on every backend.
pub trait Figure {
    fn draw<B: DrawingBackend>(&self, root: &DrawingArea<B, Shift>) -> Result<(), String>;
}

/// A plotters error as a message.
pub fn failed(error: impl std::fmt::Display) -> String {
    error.to_string()
}

/// `--plot-size`: `WIDTHxHEIGHT` in pixels, each from 200 to 4000.
pub fn plot_size(text: &str) -> Result<(u32, u32), String> {
    let parse = |part: Option<&str>| part.and_then(|p| p.trim().parse::<u32>().ok());
    let mut parts = text.split('x');
    match (parse(parts.next()), parse(parts.next()), parts.next()) {
        (Some(w), Some(h), None) if (200..=4000).contains(&w) && (200..=4000).contains(&h) => {
            Ok((w, h))
        }
        _ => Err(format!(
            "{text:?}: the plot size is WIDTHxHEIGHT in pixels, each from 200 to 4000"
        )),
    }
}

/// Checks `--plot` before any work: `.svg` or `.png`, a file that can be
/// written.
pub fn check_plot_path(path: &Path) -> Result<(), Failure> {
    check_destination(path, &["svg", "png"], "a plot")
}

/// `figure` drawn in memory, `size` in pixels: PNG bytes, or SVG text.
/// Nothing here touches a file, so a failure is the figure's own.
fn render(figure: &impl Figure, png: bool, size: (u32, u32)) -> Result<Vec<u8>, String> {
    if !png {
        let mut text = String::new();
        {
            let root = SVGBackend::with_string(&mut text, size).into_drawing_area();
            figure.draw(&root)?;
            root.present().map_err(failed)?;
        }
        return Ok(text.into_bytes());
    }
    let (width, height) = size;
    let mut pixels = vec![0u8; 3 * width as usize * height as usize];
    {
        let bitmap = BitMapBackend::with_buffer(&mut pixels, size);
        let root = pixel_text::PixelText(bitmap).into_drawing_area();
        figure.draw(&root)?;
        root.present().map_err(failed)?;
    }
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(failed)?;
    writer.write_image_data(&pixels).map_err(failed)?;
    writer.finish().map_err(failed)?;
    Ok(bytes)
}

/// A colour of the viridis-like map for `t` in [0, 1]: dark blue (low)
/// through green to yellow (high).
pub fn colour(t: f64) -> RGBColor {
    const STOPS: [(u8, u8, u8); 5] = [
        (68, 1, 84),
        (59, 82, 139),
        (33, 145, 140),
        (94, 201, 98),
        (253, 231, 37),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let at = t * (STOPS.len() - 1) as f64;
    let k = (at.floor() as usize).min(STOPS.len() - 2);
    let f = at - k as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (STOPS[k], STOPS[k + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// `--plot` and `--plot-size`, shared by the commands that draw.
#[derive(clap::Args)]
pub struct PlotArgs {
    /// Draw a figure into PATH (.svg or .png); left out, with a warning,
    /// when the data are larger than a figure can show
    #[arg(long, value_name = "PATH")]
    pub plot: Option<PathBuf>,
    /// The figure's size in pixels
    #[arg(long, value_name = "WxH", default_value = "1000x600", value_parser = plot_size)]
    pub plot_size: (u32, u32),
}

impl PlotArgs {
    /// Checks `--plot` before any work.
    pub fn check(&self) -> Result<(), Failure> {
        self.plot.as_deref().map_or(Ok(()), check_plot_path)
    }

    /// Leaves out the plot, with a warning on stderr, when `what` has
    /// `length`, more than the `limit` a figure can show: the run's other
    /// outputs are still written.
    pub fn leave_out_over(&mut self, what: &str, length: usize, limit: usize) {
        if self.plot.is_some() && length > limit {
            eprintln!(
                "timewarp: --plot: {what} has {length}, more than the {limit} a plot can show; \
                 leaving out the plot"
            );
            self.plot = None;
        }
    }

    /// Draws `figure` (built only then) into `outputs` if `--plot` was
    /// given.
    pub fn write_with<F: Figure>(
        &self,
        outputs: &mut Outputs,
        figure: impl FnOnce() -> F,
    ) -> Result<(), Failure> {
        let Some(path) = &self.plot else {
            return Ok(());
        };
        let png = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("png"));
        let bytes = render(&figure(), png, self.plot_size).map_err(|problem| {
            Failure::runtime(format!("{}: drawing the plot: {problem}", path.display()))
        })?;
        outputs.write_bytes(path, &bytes)
    }
}

/// Sides of a heat map (rows or columns of a matrix, classes of a confusion
/// matrix) beyond which a plot is left out: each cell is a rectangle, and a
/// larger map is neither legible nor a reasonable SVG.
pub const MAX_HEATMAP_SIDE: usize = 500;

/// Groups of equal labels, in the order of a stable sort by label (numeric
/// when every label is a number), and the order of the items.
pub fn class_order(labels: &[String]) -> (Vec<usize>, heatmap::Groups) {
    let numeric: Option<Vec<f64>> = labels.iter().map(|l| l.trim().parse().ok()).collect();
    let mut order: Vec<usize> = (0..labels.len()).collect();
    match &numeric {
        Some(values) => order.sort_by(|&a, &b| values[a].total_cmp(&values[b])),
        None => order.sort_by(|&a, &b| labels[a].cmp(&labels[b])),
    }
    let mut groups: heatmap::Groups = Vec::new();
    for &k in &order {
        match groups.last_mut() {
            Some((name, count)) if *name == labels[k] => *count += 1,
            _ => groups.push((labels[k].clone(), 1)),
        }
    }
    (order, groups)
}
