//! A bitmap backend that draws its text from font8x8's 8x8 glyphs, so
//! PNG plots need no font file and no system font library.

use font8x8::legacy::BASIC_LEGACY;
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind,
};

/// Pixels of a glyph's side at scale 1.
pub(super) const GLYPH: i32 = 8;

/// [`BitMapBackend`] with text in 8x8 glyphs, scaled to the font size
/// (ASCII only: other characters are drawn as `?`).
pub struct PixelText<'a>(pub BitMapBackend<'a>);

/// The glyphs' scale for a font size in pixels: whole multiples, so the
/// glyphs stay sharp.
pub(super) fn scale(size: f64) -> i32 {
    ((size / 11.0).round() as i32).max(1)
}

type Failed<'a> = DrawingErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>;

impl<'a> DrawingBackend for PixelText<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), Failed<'a>> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), Failed<'a>> {
        self.0.present()
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Failed<'a>> {
        self.0.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Failed<'a>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.0.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Failed<'a>> {
        self.0.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vertices: I,
        style: &S,
    ) -> Result<(), Failed<'a>> {
        self.0.fill_polygon(vertices, style)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), Failed<'a>> {
        let side = GLYPH * scale(style.size());
        Ok(((side * text.chars().count() as i32) as u32, side as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        position: BackendCoord,
    ) -> Result<(), Failed<'a>> {
        let color = style.color();
        let scale = scale(style.size());
        let side = GLYPH * scale;
        let width = side * text.chars().count() as i32;
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Center => -width / 2,
            HPos::Right => -width,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -side / 2,
            VPos::Bottom => -side,
        };
        let transform = style.transform();
        let (w, h) = self.get_size();
        for (k, c) in text.chars().enumerate() {
            let glyph = BASIC_LEGACY[if c.is_ascii() {
                c as usize
            } else {
                b'?' as usize
            }];
            for (row, bits) in glyph.iter().enumerate() {
                for column in 0..GLYPH {
                    if bits >> column & 1 == 0 {
                        continue;
                    }
                    for (sx, sy) in (0..scale).flat_map(|a| (0..scale).map(move |b| (a, b))) {
                        let x = k as i32 * side + column * scale + sx + dx;
                        let y = row as i32 * scale + sy + dy;
                        let (x, y) = transform.transform(x, y);
                        let (x, y) = (position.0 + x, position.1 + y);
                        if x >= 0 && y >= 0 && x < w as i32 && y < h as i32 {
                            self.0.draw_pixel((x, y), color)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
