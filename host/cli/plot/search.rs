//! `timewarp search --plot`: the series (its min and max per pixel column,
//! so that a series of any length draws as a few thousand segments) with
//! the matches shaded and numbered, and below it the query over the best
//! match.

use super::heatmap::format_tick;
use super::layout::{draw_title, label_count, text_height, tick_count, SMALL};
use super::{failed, Figure};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub struct SearchFigure {
    pub title: String,
    /// The series' first dimension: (first sample, min, max) per bucket.
    pub buckets: Vec<(usize, f64, f64)>,
    pub length: usize,
    /// The query's length, and the matches' starts, best first.
    pub m: usize,
    pub starts: Vec<usize>,
    /// The query and the best match, as compared (z-normalised or not),
    /// first dimension.
    pub query: Vec<f64>,
    pub best: Vec<f64>,
}

const SERIES: RGBColor = RGBColor(31, 119, 180);
const QUERY: RGBColor = RGBColor(255, 127, 14);
const MATCH: RGBColor = RGBColor(214, 39, 40);

impl Figure for SearchFigure {
    fn draw<B: DrawingBackend>(&self, root: &DrawingArea<B, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(failed)?;
        let body = draw_title(root, &self.title)?;
        let (_, height) = body.dim_in_pixel();
        let (top, bottom) = body.split_vertically(height * 3 / 5);
        self.draw_series(&top)?;
        self.draw_overlay(&bottom)
    }
}

/// A chart over `x` and `y` with labelled axes.
fn chart<'a, B: DrawingBackend>(
    area: &'a DrawingArea<B, Shift>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    x_name: &str,
    y_name: &str,
) -> Result<ChartContext<'a, B, Cartesian2d<RangedCoordf64, RangedCoordf64>>, String> {
    let line = text_height(SMALL);
    let mut chart = ChartBuilder::on(area)
        .margin(8)
        .x_label_area_size(3 * line + 8)
        .y_label_area_size(6 * line + 16)
        .build_cartesian_2d(x.clone(), y)
        .map_err(failed)?;
    let (width, height) = chart.plotting_area().dim_in_pixel();
    let whole = |v: f64| format!("{}", v.round() as i64);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(x_name)
        .y_desc(y_name)
        .label_style(("sans-serif", SMALL))
        .x_labels(tick_count(width, x, whole))
        .y_labels(label_count(height, line))
        .x_label_formatter(&|v| whole(*v))
        .y_label_formatter(&|v| format_tick(*v))
        .draw()
        .map_err(failed)?;
    Ok(chart)
}

fn range(values: impl Iterator<Item = f64> + Clone) -> std::ops::Range<f64> {
    let low = values.clone().fold(f64::INFINITY, f64::min);
    let high = values.fold(f64::NEG_INFINITY, f64::max);
    let span = if high > low { high - low } else { 1.0 };
    low - 0.05 * span..high + 0.05 * span
}

impl SearchFigure {
    fn draw_series<B: DrawingBackend>(&self, area: &DrawingArea<B, Shift>) -> Result<(), String> {
        let values = self.buckets.iter().flat_map(|&(_, lo, hi)| [lo, hi]);
        let y = range(values);
        let mut chart = chart(area, 0.0..self.length as f64, y.clone(), "sample", "value")?;
        let spans = self.starts.iter().map(|&s| {
            Rectangle::new(
                [(s as f64, y.start), ((s + self.m) as f64, y.end)],
                MATCH.mix(0.25).filled(),
            )
        });
        chart.draw_series(spans).map_err(failed)?;
        let bars = self.buckets.iter().map(|&(at, lo, hi)| {
            PathElement::new(
                vec![(at as f64, lo), (at as f64, hi)],
                SERIES.stroke_width(1),
            )
        });
        chart.draw_series(bars).map_err(failed)?;
        if self.buckets.len() > 1 {
            let middle = self
                .buckets
                .iter()
                .map(|&(at, lo, hi)| (at as f64, (lo + hi) / 2.0));
            chart
                .draw_series(LineSeries::new(middle, SERIES.stroke_width(1)))
                .map_err(failed)?;
        }
        let style = ("sans-serif", SMALL)
            .into_font()
            .color(&MATCH)
            .pos(Pos::new(HPos::Center, VPos::Top));
        let labels = self.starts.iter().enumerate().map(|(rank, &s)| {
            Text::new(
                format!("{}", rank + 1),
                ((s as f64 + self.m as f64 / 2.0), y.end),
                style.clone(),
            )
        });
        chart.draw_series(labels).map_err(failed)?;
        Ok(())
    }

    fn draw_overlay<B: DrawingBackend>(&self, area: &DrawingArea<B, Shift>) -> Result<(), String> {
        let (_, height) = area.dim_in_pixel();
        let (legend, rest) = area.split_vertically((text_height(SMALL) + 10).min(height / 4));
        let style = ("sans-serif", SMALL)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        let y = legend.dim_in_pixel().1 as i32 / 2;
        for (k, (name, colour)) in [("query", QUERY), ("best match", MATCH)]
            .into_iter()
            .enumerate()
        {
            let x = 20 + 160 * k as i32;
            legend
                .draw(&PathElement::new(
                    vec![(x, y), (x + 20, y)],
                    colour.stroke_width(3),
                ))
                .map_err(failed)?;
            legend
                .draw(&Text::new(name, (x + 26, y), style.clone()))
                .map_err(failed)?;
        }
        let values = self.query.iter().chain(&self.best).copied();
        let y = range(values);
        let x = 0.0..(self.m.max(2) - 1) as f64;
        let mut chart = chart(&rest, x, y, "sample of the query", "value as compared")?;
        for (values, colour) in [(&self.best, MATCH), (&self.query, QUERY)] {
            let points = values.iter().enumerate().map(|(i, &v)| (i as f64, v));
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                .map_err(failed)?;
        }
        Ok(())
    }
}
