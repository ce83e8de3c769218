//! A matrix as a heat map with a colour bar: distance matrices (grouped by
//! class when the files have labels) and confusion matrices.

use super::{colour, failed, Figure};
use ndarray::Array2;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Consecutive rows (or columns) of one class: its name and how many.
pub type Groups = Vec<(String, usize)>;

pub struct HeatMap {
    pub values: Array2<f64>,
    pub title: String,
    /// What the columns and the rows are.
    pub x_label: String,
    pub y_label: String,
    /// Classes of the rows and columns, in order, when known: separators
    /// between them and their names instead of indices.
    pub row_groups: Option<Groups>,
    pub column_groups: Option<Groups>,
    /// Write each cell's value in it (small matrices: confusion matrices).
    pub annotate: bool,
    /// A path of cells `(row, column)` drawn over the map.
    pub path: Vec<(usize, usize)>,
}

/// Pixels of the colour bar at the right.
const COLOUR_BAR: u32 = 120;

impl HeatMap {
    fn range(&self) -> (f64, f64) {
        let finite = self.values.iter().copied().filter(|v| v.is_finite());
        let low = finite.clone().fold(f64::INFINITY, f64::min);
        let high = finite.fold(f64::NEG_INFINITY, f64::max);
        match (low.is_finite(), high > low) {
            (true, true) => (low, high),
            (true, false) => (low, low + 1.0),
            _ => (0.0, 1.0),
        }
    }
}

/// Where each group starts, and its middle, in rows or columns.
fn boundaries(groups: &Groups) -> Vec<(f64, f64, &str)> {
    let mut start = 0;
    groups
        .iter()
        .map(|(name, count)| {
            let at = (
                start as f64,
                start as f64 + *count as f64 / 2.0,
                name.as_str(),
            );
            start += count;
            at
        })
        .collect()
}

impl Figure for HeatMap {
    fn draw<B: DrawingBackend>(&self, root: &DrawingArea<B, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(failed)?;
        let (width, _) = root.dim_in_pixel();
        let (main, bar) = root.split_horizontally(width.saturating_sub(COLOUR_BAR));
        let (n, m) = self.values.dim();
        let (low, high) = self.range();
        let grouped = self.row_groups.is_some() || self.column_groups.is_some();
        // A title too long for large glyphs in the bitmap's 8x8 font
        // (16 pixels a character) gets small ones.
        let (main_width, _) = main.dim_in_pixel();
        let title_size = if self.title.len() as u32 * 16 + 40 > main_width {
            14
        } else {
            22
        };
        let mut chart = ChartBuilder::on(&main)
            .caption(&self.title, ("sans-serif", title_size))
            .margin(12)
            .x_label_area_size(if grouped { 60 } else { 45 })
            .y_label_area_size(if grouped { 90 } else { 60 })
            .build_cartesian_2d(0f64..m as f64, n as f64..0f64)
            .map_err(failed)?;
        let mut mesh = chart.configure_mesh();
        mesh.disable_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", 14))
            .x_label_formatter(&|v| format!("{}", v.floor() as i64))
            .y_label_formatter(&|v| format!("{}", v.floor() as i64));
        if grouped {
            mesh.x_labels(0).y_labels(0);
        } else if self.annotate {
            mesh.x_labels(m.min(12) + 1).y_labels(n.min(12) + 1);
        }
        mesh.draw().map_err(failed)?;
        let cells = self.values.indexed_iter().map(|((i, j), &v)| {
            let t = (v - low) / (high - low);
            Rectangle::new(
                [(j as f64, i as f64), (j as f64 + 1.0, i as f64 + 1.0)],
                colour(t).filled(),
            )
        });
        chart.draw_series(cells).map_err(failed)?;
        if self.annotate {
            let labels = self.values.indexed_iter().map(|((i, j), &v)| {
                let ink = if (v - low) / (high - low) > 0.6 {
                    BLACK
                } else {
                    WHITE
                };
                Text::new(
                    format!("{v}"),
                    (j as f64 + 0.5, i as f64 + 0.5),
                    ("sans-serif", 16)
                        .into_font()
                        .color(&ink)
                        .pos(Pos::new(HPos::Center, VPos::Center)),
                )
            });
            chart.draw_series(labels).map_err(failed)?;
        }
        if !self.path.is_empty() {
            let centres = self
                .path
                .iter()
                .map(|&(i, j)| (j as f64 + 0.5, i as f64 + 0.5));
            let line = PathElement::new(centres.collect::<Vec<_>>(), RED.stroke_width(2));
            chart.draw_series([line]).map_err(failed)?;
        }
        let separator = WHITE.stroke_width(2);
        let name_style = ("sans-serif", 14).into_font().color(&BLACK);
        for (start, middle, name) in self.row_groups.iter().flat_map(boundaries) {
            if start > 0.0 {
                let line = PathElement::new(vec![(0.0, start), (m as f64, start)], separator);
                chart.draw_series([line]).map_err(failed)?;
            }
            let (x, y) = chart.backend_coord(&(0.0, middle));
            let style = name_style.clone().pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(name.to_string(), (x - 6, y), style))
                .map_err(failed)?;
        }
        for (start, middle, name) in self.column_groups.iter().flat_map(boundaries) {
            if start > 0.0 {
                let line = PathElement::new(vec![(start, 0.0), (start, n as f64)], separator);
                chart.draw_series([line]).map_err(failed)?;
            }
            let (x, y) = chart.backend_coord(&(middle, n as f64));
            let style = name_style.clone().pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(name.to_string(), (x, y + 6), style))
                .map_err(failed)?;
        }
        colour_bar(&bar, low, high)
    }
}

/// A vertical bar of the colour map from `low` (bottom) to `high`, with
/// its values on an axis.
fn colour_bar<B: DrawingBackend>(
    area: &DrawingArea<B, Shift>,
    low: f64,
    high: f64,
) -> Result<(), String> {
    let mut chart = ChartBuilder::on(area)
        .margin_top(50)
        .margin_bottom(60)
        .margin_right(8)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..1f64, low..high)
        .map_err(failed)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .label_style(("sans-serif", 13))
        .y_label_formatter(&|v| format_tick(*v))
        .draw()
        .map_err(failed)?;
    const STEPS: usize = 100;
    let step = (high - low) / STEPS as f64;
    let strips = (0..STEPS).map(|k| {
        let from = low + k as f64 * step;
        Rectangle::new(
            [(0.0, from), (1.0, from + step)],
            colour(k as f64 / (STEPS - 1) as f64).filled(),
        )
    });
    chart.draw_series(strips).map_err(failed)?;
    Ok(())
}

/// A tick value in at most about 7 characters.
pub fn format_tick(v: f64) -> String {
    let magnitude = v.abs();
    if v == 0.0 {
        "0".into()
    } else if !(1e-3..1e5).contains(&magnitude) {
        format!("{v:.1e}")
    } else if magnitude >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}
