//! The latency plot: end-to-end latency of every frame over the run with the budget line (frames
//! over budget marked), and under it the same frames' latency stacked by stage.
//!
//! ```text
//! octopipe run pipelines/demo.pipe --set root=demo-data --set out=o.jsonl --plot latency.svg
//! ```
//!
//! `.svg` files are drawn with plotters' SVG backend; `.png` files with a small raster backend of
//! this module whose text uses the built-in 8x8 bitmap font (no system fonts needed).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use image::{Rgb, RgbImage};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind, FontTransform,
};

use crate::errors::ObserveError;
use crate::units::ms;
use octopipe_core::budget::Report;
use octopipe_core::observer::Observer;
use octopipe_stages::batch::CropBatch;

/// Fill colours of the stages in the stacked panel, in pipeline order (repeating after six).
const STAGE_COLORS: [RGBColor; 6] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0xb0, 0x7a, 0xa1),
];

/// One processed frame: when it arrived (s since the first), its end-to-end and stage times (ms).
#[derive(Debug, Clone)]
struct Row {
    t: f64,
    total: f64,
    /// By report row.
    stages: Vec<f64>,
}

/// Records every frame's timings and draws the plot when the run finishes.
pub struct LatencyPlot {
    path: PathBuf,
    size: (u32, u32),
    t0: Option<Instant>,
    budget: Duration,
    rows: Vec<Row>,
    /// The report rows (stage names).
    names: Vec<String>,
}

impl LatencyPlot {
    /// Plot to `path` (`.svg` or `.png`), 1200x800 pixels.
    pub fn new(path: &Path) -> Self {
        LatencyPlot {
            path: path.to_path_buf(),
            size: (1200, 800),
            t0: None,
            budget: Duration::ZERO,
            rows: Vec::new(),
            names: Vec::new(),
        }
    }

    /// Frames recorded so far.
    pub fn frames(&self) -> usize {
        self.rows.len()
    }

    /// Draw the plot to the file now.
    pub fn write(&mut self) -> Result<(), ObserveError> {
        self.rows.sort_by(|a, b| a.t.total_cmp(&b.t));
        let png = self
            .path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("png"));
        if png {
            let mut img = RgbImage::from_pixel(self.size.0, self.size.1, Rgb([255, 255, 255]));
            draw(
                RasterBackend { img: &mut img }.into_drawing_area(),
                &self.rows,
                &self.names,
                ms(self.budget),
            )?;
            img.save(&self.path).map_err(|e| ObserveError::Write {
                path: self.path.display().to_string(),
                source: Box::new(e),
            })
        } else {
            draw(
                SVGBackend::new(&self.path, self.size).into_drawing_area(),
                &self.rows,
                &self.names,
                ms(self.budget),
            )
        }
    }
}

impl Observer for LatencyPlot {
    fn start(&mut self, stages: &[String]) {
        self.names = stages.to_vec();
    }

    fn batch(&mut self, batch: &CropBatch, budget: Duration) {
        self.budget = budget;
        // A frame in parts is plotted once, with its last part.
        for f in batch.frames.iter().filter(|f| f.part.is_last()) {
            let Some(total) = f.times.total() else {
                continue;
            };
            let t0 = *self.t0.get_or_insert(f.times.arrival);
            let mut row = Row {
                t: f.times.arrival.saturating_duration_since(t0).as_secs_f64(),
                total: ms(total),
                stages: vec![0.0; self.names.len()],
            };
            for (slot, d) in f.times.stages() {
                if let Some(v) = row.stages.get_mut(slot as usize) {
                    *v += ms(d);
                }
            }
            self.rows.push(row);
        }
    }

    fn finish(&mut self, report: &mut Report) {
        if self.budget.is_zero() {
            self.budget = report.budget;
        }
        match self.write() {
            Ok(()) => report.extra.push(format!(
                "plot: latency of {} frames written to {}",
                self.rows.len(),
                self.path.display()
            )),
            // Asked for and not written: the run fails, saying why.
            Err(e) => report.not_written.push(format!(
                "--plot {}: cannot draw the plot: {e}",
                self.path.display()
            )),
        }
    }
}

/// Both panels on `root`.
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    rows: &[Row],
    names: &[String],
    budget: f64,
) -> Result<(), ObserveError>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| ObserveError::Draw(Box::new(e));
    root.fill(&WHITE).map_err(err)?;
    let (_, h) = root.dim_in_pixel();
    let (top, bottom) = root.split_vertically(h / 2);
    let t_max = rows.last().map(|r| r.t).unwrap_or(0.0).max(1e-3) * 1.02;
    let y_max = rows
        .iter()
        .map(|r| r.total)
        .fold(budget, f64::max)
        .max(1e-3)
        * 1.15;
    let misses = rows.iter().filter(|r| r.total > budget).count();

    let mut chart = panel(
        &top,
        &format!(
            "end-to-end latency per frame: {} frames, {} over the {:.1} ms budget",
            rows.len(),
            misses,
            budget
        ),
        t_max,
        y_max,
    )?;
    chart
        .draw_series(LineSeries::new(
            rows.iter().map(|r| (r.t, r.total)),
            BLUE.stroke_width(1),
        ))
        .map_err(err)?
        .label("end-to-end")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
    chart
        .draw_series(
            rows.iter()
                .filter(|r| r.total > budget)
                .map(|r| Circle::new((r.t, r.total), 3, RED.filled())),
        )
        .map_err(err)?;
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, budget), (t_max, budget)],
            8,
            5,
            RED.stroke_width(2),
        ))
        .map_err(err)?
        .label(format!("budget {budget:.1} ms"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], RED.stroke_width(2)));
    legend(&mut chart)?;

    let stack_max = rows
        .iter()
        .map(|r| r.stages.iter().sum::<f64>())
        .fold(budget, f64::max)
        .max(1e-3)
        * 1.15;
    let mut chart = panel(
        &bottom,
        "the same frames, stacked by stage (each stage: time since the previous mark)",
        t_max,
        stack_max,
    )?;
    // Top layer first, so that each lower cumulative area paints over the ones above it.
    for (k, name) in names.iter().enumerate().rev() {
        let color = STAGE_COLORS[k % STAGE_COLORS.len()];
        chart
            .draw_series(AreaSeries::new(
                rows.iter()
                    .map(|r| (r.t, r.stages[..=k].iter().sum::<f64>())),
                0.0,
                color.mix(0.9).filled(),
            ))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .draw_series(DashedLineSeries::new(
            [(0.0, budget), (t_max, budget)],
            8,
            5,
            RED.stroke_width(2),
        ))
        .map_err(err)?;
    legend(&mut chart)?;
    root.present().map_err(err)
}

/// The coordinates of both panels: seconds across, milliseconds up.
type Latency =
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>;

/// A panel's chart: `caption` above, frame arrival 0..`t_max` s across, latency 0..`y_max` ms up,
/// with its mesh drawn.
fn panel<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    t_max: f64,
    y_max: f64,
) -> Result<ChartContext<'a, DB, Latency>, ObserveError>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(34)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..t_max, 0f64..y_max)
        .map_err(|e| ObserveError::Draw(Box::new(e)))?;
    chart
        .configure_mesh()
        .x_desc("frame arrival (s)")
        .y_desc("latency (ms)")
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(|e| ObserveError::Draw(Box::new(e)))?;
    Ok(chart)
}

/// The legend box of a panel's labelled series, upper right.
fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Latency>,
) -> Result<(), ObserveError>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| ObserveError::Draw(Box::new(e)))
}

/// A raster backend over an [`RgbImage`] with the built-in bitmap font for text.
struct RasterBackend<'a> {
    img: &'a mut RgbImage,
}

/// Font pixels per glyph pixel for a plotters font size.
fn text_scale(size: f64) -> u32 {
    if size >= 24.0 {
        2
    } else {
        1
    }
}

impl DrawingBackend for RasterBackend<'_> {
    type ErrorType = std::io::Error;

    fn get_size(&self) -> (u32, u32) {
        self.img.dimensions()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        Ok(())
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        Ok(())
    }

    fn draw_pixel(
        &mut self,
        (x, y): BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let (w, h) = self.img.dimensions();
        if x < 0 || y < 0 || x >= w as i32 || y >= h as i32 || color.alpha <= 0.0 {
            return Ok(());
        }
        let a = color.alpha.min(1.0);
        let p = self.img.get_pixel_mut(x as u32, y as u32);
        let src = [color.rgb.0, color.rgb.1, color.rgb.2];
        for (d, s) in p.0.iter_mut().zip(src) {
            *d = (*d as f64 * (1.0 - a) + s as f64 * a).round() as u8;
        }
        Ok(())
    }

    fn estimate_text_size<TStyle: BackendTextStyle>(
        &self,
        text: &str,
        style: &TStyle,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let s = text_scale(style.size());
        Ok((super::text_width(text, s), super::GLYPH * s))
    }

    fn draw_text<TStyle: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &TStyle,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        let s = text_scale(style.size());
        let (tw, th) = (super::text_width(text, s) as i32, (super::GLYPH * s) as i32);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -tw,
            HPos::Center => -tw / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -th / 2,
            VPos::Bottom => -th,
        };
        // Render upright into a scratch image, then copy its set pixels with the rotation.
        let mut glyphs = RgbImage::new(tw.max(1) as u32, th.max(1) as u32);
        super::draw_text(&mut glyphs, 0, 0, text, [255, 255, 255], s, None);
        let trans = style.transform();
        for (gx, gy, p) in glyphs.enumerate_pixels() {
            if p.0[0] == 0 {
                continue;
            }
            let (x, y) = match trans {
                FontTransform::None => (gx as i32 + dx, gy as i32 + dy),
                _ => trans.transform(gx as i32 + dx, gy as i32 + dy),
            };
            self.draw_pixel((pos.0 + x, pos.1 + y), color)?;
        }
        Ok(())
    }
}
