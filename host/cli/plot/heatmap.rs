//! A matrix as a heat map with a colour bar: distance matrices (grouped by
//! class when the files have labels) and confusion matrices.

use super::layout::{
    draw_title, ellipsize, label_count, text_height, text_width, tick_count, SMALL,
};
use super::{colour, failed, Figure};
use ndarray::Array2;
use plotters::coord::types::RangedCoordf64;
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

/// Where each group starts, its middle, in rows or columns, its name and
/// its size.
fn boundaries(groups: &Groups) -> Vec<(f64, f64, &str, usize)> {
    let mut start = 0;
    groups
        .iter()
        .map(|(name, count)| {
            let at = (
                start as f64,
                start as f64 + *count as f64 / 2.0,
                name.as_str(),
                *count,
            );
            start += count;
            at
        })
        .collect()
}

impl Figure for HeatMap {
    fn draw<B: DrawingBackend>(&self, root: &DrawingArea<B, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(failed)?;
        let body = draw_title(root, &self.title)?;
        let (n, m) = self.values.dim();
        let (low, high) = self.range();
        let (width, _) = body.dim_in_pixel();
        let bar_width = colour_bar_width(low, high);
        let (main, bar) = body.split_horizontally(width.saturating_sub(bar_width));
        let grouped = self.row_groups.is_some() || self.column_groups.is_some();
        // Room for the row labels: indices, or the widest class name.
        let row_names = self
            .row_groups
            .iter()
            .flatten()
            .map(|(name, _)| name.as_str());
        let widest = row_names
            .chain([n.to_string().as_str()])
            .map(|name| text_width(name, SMALL))
            .max()
            .unwrap_or(0);
        let line = text_height(SMALL);
        let x_area = 3 * line + if grouped { 16 } else { 8 };
        let mut chart = ChartBuilder::on(&main)
            .margin(MARGIN)
            .x_label_area_size(x_area)
            .y_label_area_size(widest + 2 * line + 12)
            .build_cartesian_2d(0f64..m as f64, n as f64..0f64)
            .map_err(failed)?;
        let (plot_width, plot_height) = chart.plotting_area().dim_in_pixel();
        let index = |v: f64| format!("{}", v.floor() as i64);
        let columns = tick_count(plot_width, 0.0..m as f64, index);
        let label = |v: &f64| index(*v);
        let mut mesh = chart.configure_mesh();
        mesh.disable_mesh()
            .x_desc(ellipsize(&self.x_label, plot_width, SMALL))
            .y_desc(ellipsize(&self.y_label, plot_height, SMALL))
            .label_style(("sans-serif", SMALL))
            .x_label_formatter(&label)
            .y_label_formatter(&label);
        if grouped {
            mesh.x_labels(0).y_labels(0);
        } else {
            // No more ticks than cells, so that each names one.
            mesh.x_labels(columns.min(m + 1))
                .y_labels(label_count(plot_height, line).min(n + 1));
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
            self.draw_values(&mut chart, low, high)?;
        }
        if !self.path.is_empty() {
            self.draw_path(&mut chart)?;
        }
        self.draw_groups(root, &mut chart)?;
        colour_bar(&bar, low, high, x_area)
    }
}

/// The chart of a heat map: columns along x, rows down y.
type Chart<'a, B> = ChartContext<'a, B, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

impl HeatMap {
    /// Each cell's value in it, where it fits, in ink that shows on the
    /// cell's colour (the colour map runs from `low` to `high`).
    fn draw_values<B: DrawingBackend>(
        &self,
        chart: &mut Chart<B>,
        low: f64,
        high: f64,
    ) -> Result<(), String> {
        let (n, m) = self.values.dim();
        let (plot_width, plot_height) = chart.plotting_area().dim_in_pixel();
        let line = text_height(SMALL);
        let (cell_width, cell_height) =
            (plot_width / m.max(1) as u32, plot_height / n.max(1) as u32);
        let labels = self.values.indexed_iter().filter_map(|((i, j), &v)| {
            let text = format!("{v}");
            let fits = text_width(&text, SMALL) + 4 <= cell_width && line + 4 <= cell_height;
            let ink = if (v - low) / (high - low) > 0.6 {
                BLACK
            } else {
                WHITE
            };
            fits.then(|| {
                Text::new(
                    text,
                    (j as f64 + 0.5, i as f64 + 0.5),
                    ("sans-serif", SMALL)
                        .into_font()
                        .color(&ink)
                        .pos(Pos::new(HPos::Center, VPos::Center)),
                )
            })
        });
        chart.draw_series(labels).map_err(failed)?;
        Ok(())
    }

    /// The path through the centres of its cells.
    fn draw_path<B: DrawingBackend>(&self, chart: &mut Chart<B>) -> Result<(), String> {
        let centres = self
            .path
            .iter()
            .map(|&(i, j)| (j as f64 + 0.5, i as f64 + 0.5));
        let line = PathElement::new(centres.collect::<Vec<_>>(), RED.stroke_width(2));
        chart.draw_series([line]).map_err(failed)?;
        Ok(())
    }

    /// Lines between the classes of the rows and columns, and each class's
    /// name beside the map (on `root`) where its rows or columns have room
    /// for it.
    fn draw_groups<B: DrawingBackend>(
        &self,
        root: &DrawingArea<B, Shift>,
        chart: &mut Chart<B>,
    ) -> Result<(), String> {
        let (n, m) = self.values.dim();
        let (plot_width, plot_height) = chart.plotting_area().dim_in_pixel();
        let line = text_height(SMALL);
        let separator = WHITE.stroke_width(2);
        let name_style = ("sans-serif", SMALL).into_font().color(&BLACK);
        let row_pixels = plot_height as f64 / n.max(1) as f64;
        let column_pixels = plot_width as f64 / m.max(1) as f64;
        for (start, middle, name, count) in self.row_groups.iter().flat_map(boundaries) {
            if start > 0.0 {
                let between = PathElement::new(vec![(0.0, start), (m as f64, start)], separator);
                chart.draw_series([between]).map_err(failed)?;
            }
            if count as f64 * row_pixels >= line as f64 {
                let (x, y) = chart.backend_coord(&(0.0, middle));
                let style = name_style.clone().pos(Pos::new(HPos::Right, VPos::Center));
                root.draw(&Text::new(name.to_string(), (x - 6, y), style))
                    .map_err(failed)?;
            }
        }
        for (start, middle, name, count) in self.column_groups.iter().flat_map(boundaries) {
            if start > 0.0 {
                let between = PathElement::new(vec![(start, 0.0), (start, n as f64)], separator);
                chart.draw_series([between]).map_err(failed)?;
            }
            if count as f64 * column_pixels >= text_width(name, SMALL) as f64 + 4.0 {
                let (x, y) = chart.backend_coord(&(middle, n as f64));
                let style = name_style.clone().pos(Pos::new(HPos::Center, VPos::Top));
                root.draw(&Text::new(name.to_string(), (x, y + 6), style))
                    .map_err(failed)?;
            }
        }
        Ok(())
    }
}

/// Margin of the charts, in pixels.
const MARGIN: u32 = 8;
/// Width of the colour bar's strip.
const STRIP: u32 = 20;

/// The colour bar's width: its strip, and its labels of values from `low`
/// to `high`.
fn colour_bar_width(low: f64, high: f64) -> u32 {
    let widest = [low, (low + high) / 2.0, high]
        .map(|v| text_width(&format_tick(v), SMALL))
        .into_iter()
        .max()
        .unwrap_or(0);
    widest + STRIP + 3 * MARGIN
}

/// A vertical bar of the colour map from `low` (bottom) to `high`, with
/// its values on an axis, level with a map above `x_area` pixels of labels.
fn colour_bar<B: DrawingBackend>(
    area: &DrawingArea<B, Shift>,
    low: f64,
    high: f64,
    x_area: u32,
) -> Result<(), String> {
    let (width, _) = area.dim_in_pixel();
    let mut chart = ChartBuilder::on(area)
        .margin_top(MARGIN)
        .margin_bottom(MARGIN + x_area)
        .margin_right(MARGIN)
        .y_label_area_size(width.saturating_sub(STRIP + MARGIN))
        .build_cartesian_2d(0f64..1f64, low..high)
        .map_err(failed)?;
    let (_, height) = chart.plotting_area().dim_in_pixel();
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .label_style(("sans-serif", SMALL))
        .y_labels(label_count(height, text_height(SMALL)))
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
