//! The report's charts: SVG text drawn with `plotters`' pure-Rust SVG backend (no font files, no
//! system library; text is left to the viewer's fonts, so the output is the same on every host).
//!
//! Every chart has one shape: categories down the left side, one row per category, and within a
//! row one mark per series (a dot at the median, a whisker from min to max), values along the
//! bottom, linear or logarithmic. A footer names where the data came from.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One mark: `(min, median, max)`.
pub type Mark = (f64, f64, f64);

/// What a chart shows.
pub struct Chart {
    /// The title, on top.
    pub title: String,
    /// The unit or meaning of the values, under the value axis.
    pub axis: String,
    /// Lines under the chart: the data's source, command, machine and date.
    pub footer: Vec<String>,
    /// The rows, top to bottom.
    pub categories: Vec<String>,
    /// `(name, one mark or none per category)`, in legend order.
    pub series: Vec<(String, Vec<Option<Mark>>)>,
    /// A vertical reference line at this value (a ratio of 1).
    pub reference: Option<f64>,
}

/// Pixel width of every chart.
const WIDTH: u32 = 960;
/// Pixels per mark within a category's row, and between rows.
const MARK_PX: u32 = 11;
const ROW_GAP_PX: u32 = 12;
/// Pixels per footer line.
const FOOTER_LINE_PX: u32 = 16;

impl Chart {
    /// The values' span: logarithmic when the largest is over 20 times the smallest.
    fn range(&self) -> (f64, f64, bool) {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for mark in self.series.iter().flat_map(|(_, marks)| marks.iter().flatten()) {
            for v in [mark.0, mark.1, mark.2] {
                if v.is_finite() {
                    lo = lo.min(v);
                    hi = hi.max(v);
                }
            }
        }
        if let Some(r) = self.reference {
            lo = lo.min(r);
            hi = hi.max(r);
        }
        if !lo.is_finite() || !hi.is_finite() {
            return (0.0, 1.0, false);
        }
        if lo > 0.0 && hi / lo > 20.0 {
            (lo / 1.5, hi * 1.5, true)
        } else {
            let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
            ((lo - pad).min(if lo >= 0.0 { 0.0 } else { lo - pad }), hi + pad, false)
        }
    }

    /// The chart as an SVG document.
    pub fn to_svg(&self) -> Result<String, String> {
        let rows = self.categories.len().max(1) as u32;
        let per_row = self.series.len().max(1) as u32 * MARK_PX + ROW_GAP_PX;
        let legend = self.series.len() as u32 * 18;
        let footer = self.footer.len() as u32 * FOOTER_LINE_PX + 8;
        let height = 90 + (rows * per_row).max(legend + 20) + footer;
        let longest = self.categories.iter().map(|c| c.chars().count()).max().unwrap_or(0) as u32;
        let label_px = (longest * 7 + 16).clamp(80, 420);
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
            root.fill(&WHITE).map_err(|e| e.to_string())?;
            let (main, foot) = root.split_vertically(height - footer);
            for (i, line) in self.footer.iter().enumerate() {
                foot.draw(&Text::new(
                    line.clone(),
                    (12, 4 + i as i32 * FOOTER_LINE_PX as i32),
                    ("sans-serif", 12).into_font().color(&RGBColor(80, 80, 80)),
                ))
                .map_err(|e| e.to_string())?;
            }
            let (lo, hi, log) = self.range();
            if log {
                self.draw(&root, &main, label_px, (lo..hi).log_scale())?;
            } else {
                self.draw(&root, &main, label_px, lo..hi)?;
            }
            root.present().map_err(|e| e.to_string())?;
        }
        Ok(svg)
    }

    fn draw<X>(
        &self,
        root: &DrawingArea<SVGBackend<'_>, Shift>,
        area: &DrawingArea<SVGBackend<'_>, Shift>,
        label_px: u32,
        x_range: X,
    ) -> Result<(), String>
    where
        X: AsRangedCoord<Value = f64>,
        X::CoordDescType: ValueFormatter<f64>,
    {
        let rows = self.categories.len();
        let top = rows as f64 - 0.5;
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, ("sans-serif", 17))
            .margin(12)
            .margin_right(24)
            .x_label_area_size(42)
            .y_label_area_size(label_px)
            .build_cartesian_2d(x_range, -0.5f64..top)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(self.axis.as_str())
            .x_label_formatter(&|v| number(*v))
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 13))
            .draw()
            .map_err(|e| e.to_string())?;
        let (x_lo, _) = {
            let r = chart.x_range();
            (r.start, r.end)
        };
        // Category labels, right-aligned against the axis, and a faint band on every other row.
        for (i, name) in self.categories.iter().enumerate() {
            let y = row_y(i, rows);
            let (px, py) = chart.backend_coord(&(x_lo, y));
            root.draw(&Text::new(
                name.clone(),
                (px - 8, py),
                TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(|e| e.to_string())?;
        }
        if let Some(r) = self.reference {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(r, -0.5), (r, top)],
                    RGBColor(120, 120, 120).stroke_width(1),
                )))
                .map_err(|e| e.to_string())?;
        }
        let count = self.series.len().max(1) as f64;
        for (s, (name, marks)) in self.series.iter().enumerate() {
            let color = Palette99::pick(s).to_rgba();
            // Within a row, the first series on top.
            let offset = 0.35 - 0.7 * (s as f64 + 0.5) / count;
            let points: Vec<(f64, Mark)> = marks
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.map(|m| (row_y(i, rows) + offset, m)))
                .collect();
            chart
                .draw_series(points.iter().map(|&(y, (min, median, max))| {
                    ErrorBar::new_horizontal(y, min, median, max, color.stroke_width(1), 6)
                }))
                .map_err(|e| e.to_string())?;
            chart
                .draw_series(
                    points.iter().map(|&(y, (_, median, _))| Circle::new((median, y), 3, color.filled())),
                )
                .map_err(|e| e.to_string())?
                .label(name.as_str())
                .legend(move |(x, y)| Circle::new((x + 6, y), 4, color.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// The vertical position of row `i` of `rows`, the first on top.
fn row_y(i: usize, rows: usize) -> f64 {
    (rows - 1 - i) as f64
}

/// A value for an axis label or a table cell: three significant digits, `k`, `M`, `G` for large
/// values (as the report's tables write them).
pub fn number(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let a = x.abs();
    if a >= 1e9 {
        format!("{} G", sig3(x / 1e9))
    } else if a >= 1e6 {
        format!("{} M", sig3(x / 1e6))
    } else if a >= 1e4 {
        format!("{} k", sig3(x / 1e3))
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else {
        sig3(x)
    }
}

/// `x` to three significant digits, trailing zeros dropped, as C's `%.3g`.
pub fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let sci = format!("{x:.2e}");
    let (mantissa, exponent) = sci.split_once('e').expect("`{:e}` writes an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` writes an integer exponent");
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if (-4..3).contains(&exponent) {
        trim(format!("{:.*}", (2 - exponent) as usize, x))
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa.to_string()), exponent.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_the_tables_write_them() {
        for (x, s) in [
            (0.0, "0"),
            (10.0324946, "10"),
            (6.6571388, "6.66"),
            (0.0964, "0.0964"),
            (0.99, "0.99"),
            (999.6, "1000"),
            (1508.2, "1508"),
            (48_100.0, "48.1 k"),
            (3_160_000.0, "3.16 M"),
            (2.5e9, "2.5 G"),
            (0.00001234, "1.23e-05"),
            (-2.5, "-2.5"),
        ] {
            assert_eq!(number(x), s, "{x}");
        }
    }

    #[test]
    fn a_chart_is_an_svg_naming_its_rows_series_and_footer() {
        let chart = Chart {
            title: "t".into(),
            axis: "ns".into(),
            footer: vec!["data: here".into()],
            categories: vec!["row one".into(), "row two".into()],
            series: vec![
                ("elite".into(), vec![Some((1.0, 2.0, 3.0)), None]),
                ("go".into(), vec![Some((10.0, 200.0, 300.0)), Some((5.0, 6.0, 7.0))]),
            ],
            reference: Some(1.0),
        };
        let svg = chart.to_svg().expect("drawn");
        assert!(svg.starts_with("<svg"), "{}", &svg[..50]);
        for text in ["row one", "row two", "elite", "go", "data: here"] {
            assert!(svg.contains(text), "{text} missing");
        }
        assert_eq!(svg, chart.to_svg().expect("drawn"), "the same data draws the same SVG");
    }
}
