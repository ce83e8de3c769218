//! An alignment: the two series, one above the other, with a line between
//! the samples it matches, and for pairs small enough the matrix (costs or
//! expected alignment) with the path over it.

use super::heatmap::{format_tick, HeatMap};
use super::layout::{
    draw_title, ellipsize, label_count, text_height, text_width, tick_count, SMALL,
};
use super::{failed, Figure};
use plotters::coord::ranged1d::Ranged;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub struct AlignmentFigure {
    pub title: String,
    /// The first dimension of each series, and the series' names.
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub x_name: String,
    pub y_name: String,
    /// Matched samples `(i, j)` with a weight in [0, 1] (1: drawn solid).
    pub links: Vec<(usize, usize, f64)>,
    /// Samples deleted by a TWED path, marked on their series.
    pub deleted_x: Vec<usize>,
    pub deleted_y: Vec<usize>,
    /// The matrix beside the series, with the path over it.
    pub matrix: Option<HeatMap>,
}

const X_COLOUR: RGBColor = RGBColor(31, 119, 180);
const Y_COLOUR: RGBColor = RGBColor(255, 127, 14);

/// Narrowest room for the matrix beside the series; a narrower figure
/// shows the series alone.
const MIN_MATRIX_WIDTH: u32 = 260;

impl Figure for AlignmentFigure {
    fn draw<B: DrawingBackend>(&self, root: &DrawingArea<B, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(failed)?;
        let body = draw_title(root, &self.title)?;
        let (width, _) = body.dim_in_pixel();
        let series_area = match &self.matrix {
            Some(matrix) if width * 9 / 20 >= MIN_MATRIX_WIDTH => {
                let (left, right) = body.split_horizontally(width * 11 / 20);
                matrix.draw(&right)?;
                left
            }
            _ => body,
        };
        let series_area = self.draw_legend(&series_area)?;
        self.draw_series(&series_area)
    }
}

impl AlignmentFigure {
    /// The series' names and colours above the chart, on one line where
    /// they fit, else one a line; returns the area below.
    fn draw_legend<B: DrawingBackend>(
        &self,
        area: &DrawingArea<B, Shift>,
    ) -> Result<DrawingArea<B, Shift>, String> {
        const SWATCH: u32 = 20;
        let (width, _) = area.dim_in_pixel();
        let room = width.saturating_sub(2 * SWATCH);
        let names = [&self.x_name, &self.y_name].map(|n| ellipsize(n, room, SMALL));
        let entry = |name: &str| SWATCH + 6 + text_width(name, SMALL) + SWATCH;
        let one_line = names.iter().map(|n| entry(n)).sum::<u32>() <= width;
        let line = text_height(SMALL) + 6;
        let lines = if one_line { 1 } else { 2 };
        let (top, rest) = area.split_vertically(line * lines + 4);
        let mut at = (SWATCH as i32 / 2, line as i32 / 2);
        for (name, colour) in names.iter().zip([X_COLOUR, Y_COLOUR]) {
            let (x, y) = at;
            top.draw(&PathElement::new(
                vec![(x, y), (x + SWATCH as i32, y)],
                colour.stroke_width(3),
            ))
            .map_err(failed)?;
            let style = ("sans-serif", SMALL)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Left, VPos::Center));
            top.draw(&Text::new(name.clone(), (x + SWATCH as i32 + 6, y), style))
                .map_err(failed)?;
            at = match one_line {
                true => (x + entry(name) as i32, y),
                false => (x, y + line as i32),
            };
        }
        Ok(rest)
    }

    fn draw_series<B: DrawingBackend>(&self, area: &DrawingArea<B, Shift>) -> Result<(), String> {
        let all = self.x.iter().chain(&self.y).copied();
        let low = all.clone().fold(f64::INFINITY, f64::min);
        let high = all.fold(f64::NEG_INFINITY, f64::max);
        let span = if high > low { high - low } else { 1.0 };
        // The first series drawn above the second, clear of it.
        let shift = 1.25 * span;
        let length = self.x.len().max(self.y.len()) as f64;
        let (bottom, top) = (low - 0.1 * span, high + shift + 0.1 * span);
        let line = text_height(SMALL);
        let x_area = 3 * line + 8;
        // Room for the widest value label, on an axis as tall as the chart's.
        let (_, height) = area.dim_in_pixel();
        let values = RangedCoordf64::from(bottom..top)
            .key_points(label_count(height.saturating_sub(x_area + 16), line));
        let widest = values.iter().map(|&v| text_width(&format_tick(v), SMALL));
        let mut chart = ChartBuilder::on(area)
            .margin(8)
            .x_label_area_size(x_area)
            .y_label_area_size(widest.max().unwrap_or(0) + 2 * line + 16)
            .build_cartesian_2d(-0.5..length - 0.5, bottom..top)
            .map_err(failed)?;
        let (plot_width, plot_height) = chart.plotting_area().dim_in_pixel();
        let sample = |v: f64| format!("{}", v.round() as i64);
        // Whole samples only: no more ticks than samples.
        let x_ticks = tick_count(plot_width, -0.5..length - 0.5, sample).min(length as usize);
        let y_ticks = label_count(plot_height, line);
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(ellipsize("sample", plot_width, SMALL))
            .y_desc(ellipsize(
                "value (first series shifted up)",
                plot_height,
                SMALL,
            ))
            .label_style(("sans-serif", SMALL))
            .x_labels(x_ticks)
            .y_labels(y_ticks)
            .x_label_formatter(&|v| sample(*v))
            .y_label_formatter(&|v| format_tick(*v))
            .draw()
            .map_err(failed)?;
        let lines = self.links.iter().map(|&(i, j, weight)| {
            let grey = RGBColor(120, 120, 120).mix(weight.clamp(0.05, 1.0) * 0.8);
            PathElement::new(
                vec![(i as f64, self.x[i] + shift), (j as f64, self.y[j])],
                grey.stroke_width(1),
            )
        });
        chart.draw_series(lines).map_err(failed)?;
        let x_points = self
            .x
            .iter()
            .enumerate()
            .map(|(i, &v)| (i as f64, v + shift));
        chart
            .draw_series(LineSeries::new(x_points, X_COLOUR.stroke_width(2)))
            .map_err(failed)?;
        let y_points = self.y.iter().enumerate().map(|(j, &v)| (j as f64, v));
        chart
            .draw_series(LineSeries::new(y_points, Y_COLOUR.stroke_width(2)))
            .map_err(failed)?;
        let marks = self
            .deleted_x
            .iter()
            .map(|&i| (i as f64, self.x[i] + shift));
        let marks = marks.chain(self.deleted_y.iter().map(|&j| (j as f64, self.y[j])));
        chart
            .draw_series(marks.map(|point| Circle::new(point, 4, RED.filled())))
            .map_err(failed)?;
        Ok(())
    }
}
