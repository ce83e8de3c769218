//! An alignment: the two series, one above the other, with a line between
//! the samples it matches, and for pairs small enough the matrix (costs or
//! expected alignment) with the path over it.

use super::heatmap::HeatMap;
use super::{failed, Figure};
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

impl Figure for AlignmentFigure {
    fn draw<B: DrawingBackend>(&self, root: &DrawingArea<B, Shift>) -> Result<(), String> {
        root.fill(&WHITE).map_err(failed)?;
        let (width, _) = root.dim_in_pixel();
        let (top, root) = root.split_vertically(36);
        let title = ("sans-serif", 22).into_font().color(&BLACK);
        let centred = title.pos(Pos::new(HPos::Center, VPos::Center));
        top.draw(&Text::new(
            self.title.clone(),
            (width as i32 / 2, 20),
            centred,
        ))
        .map_err(failed)?;
        let series_area = match &self.matrix {
            Some(matrix) => {
                let (left, right) = root.split_horizontally(width * 11 / 20);
                matrix.draw(&right)?;
                left
            }
            None => root.clone(),
        };
        self.draw_series(&series_area)
    }
}

impl AlignmentFigure {
    fn draw_series<B: DrawingBackend>(&self, area: &DrawingArea<B, Shift>) -> Result<(), String> {
        let all = self.x.iter().chain(&self.y).copied();
        let low = all.clone().fold(f64::INFINITY, f64::min);
        let high = all.fold(f64::NEG_INFINITY, f64::max);
        let span = if high > low { high - low } else { 1.0 };
        // The first series drawn above the second, clear of it.
        let shift = 1.25 * span;
        let length = self.x.len().max(self.y.len()) as f64;
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(
                -0.5..length - 0.5,
                low - 0.1 * span..high + shift + 0.45 * span,
            )
            .map_err(failed)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("sample")
            .y_desc("value (first series shifted up)")
            .label_style(("sans-serif", 14))
            .x_label_formatter(&|v| format!("{}", v.round() as i64))
            .y_label_formatter(&|v| super::heatmap::format_tick(*v))
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
            .map_err(failed)?
            .label(&self.x_name)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], X_COLOUR.stroke_width(3)));
        let y_points = self.y.iter().enumerate().map(|(j, &v)| (j as f64, v));
        chart
            .draw_series(LineSeries::new(y_points, Y_COLOUR.stroke_width(2)))
            .map_err(failed)?
            .label(&self.y_name)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], Y_COLOUR.stroke_width(3)));
        let marks = self
            .deleted_x
            .iter()
            .map(|&i| (i as f64, self.x[i] + shift));
        let marks = marks.chain(self.deleted_y.iter().map(|&j| (j as f64, self.y[j])));
        chart
            .draw_series(marks.map(|point| Circle::new(point, 4, RED.filled())))
            .map_err(failed)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(failed)?;
        Ok(())
    }
}
