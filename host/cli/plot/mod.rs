//! `--plot`: figures as SVG or PNG, by the file's extension. A figure is
//! drawn once for any plotters backend ([`Figure`]); PNG text comes from
//! [`pixel_text`]'s 8x8 glyphs, SVG text is left to the viewer's fonts.

mod alignment;
mod heatmap;
mod pixel_text;

pub use alignment::AlignmentFigure;
pub use heatmap::HeatMap;

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

/// Checks `--plot` before any work: `.svg` or `.png`, in an existing
/// folder, not a folder itself.
pub fn check_plot_path(path: &Path) -> Result<(), Failure> {
    let fail = |problem: &str| Err(Failure::usage(format!("{}: {problem}", path.display())));
    let extension = path.extension().map(|e| e.to_string_lossy().to_lowercase());
    if !matches!(extension.as_deref(), Some("svg" | "png")) {
        return fail("a plot must end in .svg or .png");
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        return fail("no such folder");
    }
    if path.is_dir() {
        return fail("is a folder; give a file name ending in .svg or .png");
    }
    Ok(())
}

/// A usage error unless a side of `length` fits the limit of a figure.
pub fn check_plot_limit(what: &str, length: usize, limit: usize) -> Result<(), Failure> {
    if length > limit {
        return Err(Failure::usage(format!(
            "--plot: {what} has {length}, more than the {limit} a plot can show; \
             leave out --plot"
        )));
    }
    Ok(())
}

/// Draws `figure` into `path` (`.svg` or `.png`, `size` in pixels)
/// through a temporary file, renamed at the end.
pub fn save(figure: &impl Figure, path: &Path, size: (u32, u32)) -> Result<(), Failure> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let extension = path
        .extension()
        .unwrap_or_default()
        .to_string_lossy()
        .to_lowercase();
    let temporary: PathBuf = path.with_file_name(format!(
        ".{name}.{}.partial.{extension}",
        std::process::id()
    ));
    let drawn = if extension == "png" {
        let root = pixel_text::PixelText(BitMapBackend::new(&temporary, size)).into_drawing_area();
        figure
            .draw(&root)
            .and_then(|()| root.present().map_err(failed))
    } else {
        let root = SVGBackend::new(&temporary, size).into_drawing_area();
        figure
            .draw(&root)
            .and_then(|()| root.present().map_err(failed))
    };
    let result = drawn.and_then(|()| std::fs::rename(&temporary, path).map_err(failed));
    result.map_err(|problem| {
        let _ = std::fs::remove_file(&temporary);
        Failure::runtime(format!("{}: drawing the plot: {problem}", path.display()))
    })
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
    /// Draw a figure into PATH (.svg or .png)
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

    /// Draws `figure` if `--plot` was given (built only then).
    pub fn save_with<F: Figure>(&self, figure: impl FnOnce() -> F) -> Result<(), Failure> {
        match &self.plot {
            Some(path) => save(&figure(), path, self.plot_size),
            None => Ok(()),
        }
    }
}

/// Sides of a heat map (rows or columns of a matrix, classes of a confusion
/// matrix) beyond which a plot is refused: each cell is a rectangle, and a
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
