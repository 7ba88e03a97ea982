//! SVG plots shared by `skq bench` and `skq sim`.
//!
//! Every function here is pure: it takes data and returns a complete
//! `<svg ...>...</svg>` document as a `String`, fit to be written to a `.svg`
//! file or inlined into an HTML page ([`crate::html::Report::svg`]). A
//! [`Chart`] is the same call as data, for a report to draw when it renders
//! ([`crate::html::Report::chart`]). Nothing here reads files, spawns
//! processes or looks at the clock.
//!
//! Three plots, each laid out by one shared set-up (`frame`: background,
//! caption, axes, tick labels, grid) and closed by one legend box (`legend`):
//! * [`p99_vs_load_svg`]: tail latency against load (or throughput), one
//!   line per configuration, dashed lines for theoretical bounds, and a
//!   horizontal SLO line. The y axis is logarithmic, because curves span from
//!   about one service time to hundreds of them at saturation.
//! * [`cdf_svg`]: cumulative distribution of latency, one line per
//!   configuration.
//! * [`time_series_svg`]: values over time on a shared time axis, in short
//!   strips stacked one above the other.
//!
//! Non-finite points (and, on logarithmic axes, non-positive ones) are dropped
//! rather than drawn. A plot with no drawable data still renders, as an SVG
//! that says so, so a report never shows a broken image.

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One line on a plot: a label for the legend and `(x, y)` points.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    /// Legend text (a configuration name, `centralized FCFS`, ...).
    pub label: String,
    /// Points in drawing order (sorted by x by the plot functions).
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from a label and points.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            label: label.into(),
            points,
        }
    }
}

/// Title and axis labels of a plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Labels {
    /// Caption above the plot.
    pub title: String,
    /// X axis description, with its unit.
    pub x: String,
    /// Y axis description, with its unit.
    pub y: String,
}

impl Labels {
    /// Labels from three strings.
    pub fn new(title: impl Into<String>, x: impl Into<String>, y: impl Into<String>) -> Self {
        Labels {
            title: title.into(),
            x: x.into(),
            y: y.into(),
        }
    }
}

/// A chart as data: what to draw, not how. A report holds charts in this
/// form ([`crate::html::Block::Chart`]) and draws them when it is rendered,
/// so a producer builds plain data and never calls into the drawing code.
#[derive(Clone, Debug, PartialEq)]
pub enum Chart {
    /// Tail latency against load ([`p99_vs_load_svg`]).
    P99VsLoad {
        /// Title and axes.
        labels: Labels,
        /// Measured (or simulated) curves.
        series: Vec<Series>,
        /// Theoretical curves, drawn dashed in grey.
        bounds: Vec<Series>,
        /// A horizontal SLO line at this latency.
        slo: Option<f64>,
    },
    /// A latency CDF ([`cdf_svg`]).
    Cdf {
        /// Title and axes.
        labels: Labels,
        /// `(latency, cumulative fraction)` curves.
        series: Vec<Series>,
    },
    /// A strip of values over time ([`time_series_svg`]).
    TimeSeries {
        /// Title and axes.
        labels: Labels,
        /// Curves, drawn in the order given.
        series: Vec<Series>,
        /// The shared time axis (seconds).
        x_range: (f64, f64),
    },
}

impl Chart {
    /// The chart drawn as a complete `<svg>` document.
    pub fn svg(&self) -> String {
        match self {
            Chart::P99VsLoad {
                labels,
                series,
                bounds,
                slo,
            } => p99_vs_load_svg(labels, series, bounds, *slo),
            Chart::Cdf { labels, series } => cdf_svg(labels, series),
            Chart::TimeSeries {
                labels,
                series,
                x_range,
            } => time_series_svg(labels, series, *x_range),
        }
    }
}

/// Plot size in pixels (the SVG scales in a browser; this sets proportions
/// and text size relative to the plot).
pub const SIZE: (u32, u32) = (760, 440);

/// Colours for series, in order; bounds use [`BOUND_COLOURS`].
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const BOUND_COLOURS: [RGBColor; 3] = [
    RGBColor(0, 0, 0),
    RGBColor(90, 90, 90),
    RGBColor(150, 150, 150),
];
const SLO_COLOUR: RGBColor = RGBColor(200, 0, 0);

/// The colour the plots give series number `i` (so tables can match it).
pub fn colour_hex(i: usize) -> String {
    let c = COLOURS[i % COLOURS.len()];
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// Tail latency against load.
///
/// `series` are measured (or simulated) curves with x = load or throughput
/// and y = p99 latency; `bounds` are theoretical curves drawn dashed in
/// grey; `slo` draws a horizontal line at that latency. The units are the
/// caller's, named in `labels`. The y axis is logarithmic.
pub fn p99_vs_load_svg(
    labels: &Labels,
    series: &[Series],
    bounds: &[Series],
    slo: Option<f64>,
) -> String {
    let keep = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite() && p.1 > 0.0;
    let series = clean(series, keep);
    let bounds = clean(bounds, keep);
    let all = || {
        series
            .iter()
            .chain(bounds.iter())
            .flat_map(|s| s.points.iter())
    };
    let Some((x_lo, x_hi)) = span(all().map(|p| p.0)) else {
        return placeholder(labels, "no data to plot");
    };
    let (mut y_lo, mut y_hi) = span(all().map(|p| p.1)).expect("x span implies y span");
    if let Some(s) = slo.filter(|s| s.is_finite() && *s > 0.0) {
        y_lo = y_lo.min(s);
        y_hi = y_hi.max(s);
    }
    let x_range = pad_linear(x_lo.min(0.0), x_hi);
    let y_range = (y_lo / 1.5)..(y_hi * 1.5);
    render(labels, |root| {
        draw_p99(root, labels, &series, &bounds, slo, x_range, y_range)
    })
}

fn draw_p99(
    root: &DrawingArea<SVGBackend, Shift>,
    labels: &Labels,
    series: &[Series],
    bounds: &[Series],
    slo: Option<f64>,
    x_range: std::ops::Range<f64>,
    y_range: std::ops::Range<f64>,
) -> Result<(), String> {
    let mut chart = frame(
        root,
        labels,
        &Frame::FULL,
        x_range.clone(),
        y_range.log_scale(),
    )?;
    for (i, b) in bounds.iter().enumerate() {
        let style = BOUND_COLOURS[i % BOUND_COLOURS.len()].stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(b.points.iter().copied(), 6, 4, style))
            .map_err(err)?
            .label(b.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    if let Some(s) = slo.filter(|s| s.is_finite() && *s > 0.0) {
        let style = SLO_COLOUR.stroke_width(1);
        let line = vec![(x_range.start, s), (x_range.end, s)];
        chart
            .draw_series(DashedLineSeries::new(line, 3, 3, style))
            .map_err(err)?
            .label(format!("SLO {}", short_number(s)))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    for (i, s) in series.iter().enumerate() {
        line(&mut chart, i, &s.label, s.points.iter().copied())?;
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .map_err(err)?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// Size of a [`time_series_svg`] strip: as wide as the other plots and
/// shorter, so several stack on one time axis.
pub const STRIP_SIZE: (u32, u32) = (760, 240);

/// Values over time on a linear scale from 0, for plots stacked on a shared
/// time axis: every strip of a stack gets the same `x_range` (seconds).
/// Points are drawn in the order given (a step function may repeat an x),
/// non-finite ones dropped; the units are the caller's, named in `labels`.
pub fn time_series_svg(labels: &Labels, series: &[Series], x_range: (f64, f64)) -> String {
    let series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s
                .points
                .iter()
                .copied()
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let Some((_, y_hi)) = span(series.iter().flat_map(|s| s.points.iter().map(|p| p.1))) else {
        return placeholder(labels, "no data to plot");
    };
    let (x_lo, x_hi) = x_range;
    let x_range = if x_hi > x_lo {
        x_lo..x_hi
    } else {
        x_lo..x_lo + 1.0
    };
    let y_range = pad_linear(0.0, y_hi.max(0.0));
    render_sized(labels, STRIP_SIZE, |root| {
        let mut chart = frame(root, labels, &Frame::STRIP, x_range, y_range)?;
        for (i, s) in series.iter().enumerate() {
            line(&mut chart, i, &s.label, s.points.iter().copied())?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    })
}

/// Cumulative distribution of latency.
///
/// Each series holds `(latency, cumulative fraction in 0..=1)` points, sorted
/// or not. The x axis runs from 0 to the largest latency at which any series
/// is still below its 99.9th percentile (so one extreme outlier does not
/// squash the interesting part); `labels` names the unit.
pub fn cdf_svg(labels: &Labels, series: &[Series]) -> String {
    let keep = |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite() && p.0 >= 0.0;
    let series = clean(series, keep);
    let x_hi = series
        .iter()
        .filter_map(|s| {
            let cut = s.points.iter().find(|p| p.1 >= 0.999).or(s.points.last());
            cut.map(|p| p.0)
        })
        .fold(f64::NAN, f64::max);
    if !x_hi.is_finite() {
        return placeholder(labels, "no data to plot");
    }
    render(labels, |root| {
        draw_cdf(root, labels, &series, pad_linear(0.0, x_hi))
    })
}

fn draw_cdf(
    root: &DrawingArea<SVGBackend, Shift>,
    labels: &Labels,
    series: &[Series],
    x_range: std::ops::Range<f64>,
) -> Result<(), String> {
    let end = x_range.end;
    let mut chart = frame(root, labels, &Frame::CDF, x_range, 0.0..1.0)?;
    for (i, s) in series.iter().enumerate() {
        // Clip at the axis end so the line leaves the plot at its edge.
        let pts = s.points.iter().copied().filter(|p| p.0 <= end);
        line(&mut chart, i, &s.label, pts)?;
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}

/// The chart on `root` over SVG: the coordinate system every plot here draws on.
type Canvas<'a, 'b, X, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, Y>>;

/// How a plot's frame is laid out: caption size, margin and label areas in
/// pixels, and whether y ticks use [`short_number`].
struct Frame {
    caption: u32,
    margin: u32,
    x_area: u32,
    y_area: u32,
    short_y: bool,
}

impl Frame {
    /// A full-size plot ([`p99_vs_load_svg`]).
    const FULL: Frame = Frame {
        caption: 18,
        margin: 12,
        x_area: 42,
        y_area: 64,
        short_y: true,
    };
    /// A CDF: y is a fraction, with plotters' own tick labels.
    const CDF: Frame = Frame {
        y_area: 56,
        short_y: false,
        ..Frame::FULL
    };
    /// A [`time_series_svg`] strip.
    const STRIP: Frame = Frame {
        caption: 15,
        margin: 8,
        x_area: 34,
        y_area: 64,
        short_y: true,
    };
}

/// The set-up every plot shares: a white background, the caption, the axes
/// over `x` × `y` with their descriptions, compact tick labels and a light
/// grid.
fn frame<'a, 'b, X, Y>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    labels: &Labels,
    f: &Frame,
    x: X,
    y: Y,
) -> Result<Canvas<'a, 'b, X::CoordDescType, Y::CoordDescType>, String>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(root)
        .caption(&labels.title, ("sans-serif", f.caption))
        .margin(f.margin)
        .x_label_area_size(f.x_area)
        .y_label_area_size(f.y_area)
        .build_cartesian_2d(x, y)
        .map_err(err)?;
    let short = |v: &f64| short_number(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(labels.x.as_str())
        .y_desc(labels.y.as_str())
        .x_label_formatter(&short);
    if f.short_y {
        mesh.y_label_formatter(&short);
    }
    mesh.light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// Series number `i` as a solid line in its colour, with a legend entry.
fn line<X, Y>(
    chart: &mut Canvas<'_, '_, X, Y>,
    i: usize,
    label: &str,
    points: impl IntoIterator<Item = (f64, f64)>,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let colour = COLOURS[i % COLOURS.len()];
    chart
        .draw_series(LineSeries::new(points, colour.stroke_width(2)))
        .map_err(err)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
    Ok(())
}

/// The legend box every plot ends with, at `position`.
fn legend<'a, 'b: 'a, X, Y>(
    chart: &mut Canvas<'a, 'b, X, Y>,
    position: SeriesLabelPosition,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .draw()
        .map_err(err)
}

/// A plotters drawing error as text.
fn err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// Copies of the series with unusable points removed and points sorted by x;
/// series left empty are dropped.
fn clean(series: &[Series], keep: impl Fn(&(f64, f64)) -> bool) -> Vec<Series> {
    series
        .iter()
        .map(|s| {
            let mut points: Vec<_> = s.points.iter().copied().filter(|p| keep(p)).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
            Series {
                label: s.label.clone(),
                points,
            }
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

fn span(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// A linear range with 5% head room, never empty.
fn pad_linear(lo: f64, hi: f64) -> std::ops::Range<f64> {
    let width = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
    lo..(hi + 0.05 * width)
}

/// `12k`, `1.5M`, `0.25`, `850`: compact tick labels.
fn short_number(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.1}"))
    } else {
        trim(format!("{v:.3}"))
    }
}

/// Draws one chart into an SVG string; a drawing error yields the labelled
/// placeholder instead.
fn render(
    labels: &Labels,
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
) -> String {
    render_sized(labels, SIZE, draw)
}

/// [`render`] at another size.
fn render_sized(
    labels: &Labels,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        if let Err(e) = draw(&root).and_then(|_| root.present().map_err(|e| e.to_string())) {
            drop(root);
            return placeholder(labels, &format!("plot failed: {e}"));
        }
    }
    svg
}

/// An SVG of the plot's size that states why there is no plot.
fn placeholder(labels: &Labels, why: &str) -> String {
    let (w, h) = SIZE;
    format!(
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\">\
         <rect x=\"0\" y=\"0\" width=\"{w}\" height=\"{h}\" fill=\"#fafafa\" stroke=\"#cccccc\"/>\
         <text x=\"{}\" y=\"40\" text-anchor=\"middle\" font-family=\"sans-serif\" font-size=\"18\">{}</text>\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-family=\"sans-serif\" font-size=\"14\">{}</text></svg>",
        w / 2,
        crate::html::escape(&labels.title),
        w / 2,
        h / 2,
        crate::html::escape(why)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Labels {
        Labels::new("p99 vs load", "throughput (req/s)", "p99 (µs)")
    }

    #[test]
    fn time_strips_draw_every_series_and_say_when_empty() {
        let l = Labels::new("active workers", "time (s)", "workers");
        // A step down repeats its x: drawn in the order given, not sorted.
        let steps = Series::new(
            "elastic",
            vec![
                (0.0, 8.0),
                (4.0, 8.0),
                (4.0, 2.0),
                (11.0, 2.0),
                (f64::NAN, 1.0),
            ],
        );
        let svg = time_series_svg(
            &l,
            &[steps, Series::new("fixed", vec![(0.0, 8.0)])],
            (0.0, 11.0),
        );
        assert!(svg.starts_with("<svg") && svg.contains(&format!("height=\"{}\"", STRIP_SIZE.1)));
        for needle in ["active workers", "elastic", "fixed", "workers"] {
            assert!(svg.contains(needle), "missing {needle}");
        }
        let empty = time_series_svg(&l, &[Series::new("x", vec![])], (0.0, 1.0));
        assert!(empty.contains("no data to plot"));
    }

    #[test]
    fn p99_plot_has_every_series_bound_and_slo() {
        let a = Series::new(
            "vanilla",
            vec![(1000.0, 600.0), (3000.0, 900.0), (5000.0, 9000.0)],
        );
        let b = Series::new(
            "hybrid",
            vec![(1000.0, 550.0), (3000.0, 700.0), (5000.0, 1500.0)],
        );
        let bound = Series::new("centralized FCFS", vec![(0.0, 500.0), (6000.0, 2000.0)]);
        let svg = p99_vs_load_svg(&labels(), &[a, b], &[bound], Some(5000.0));
        assert!(svg.starts_with("<svg"), "{}", &svg[..60]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for needle in [
            "vanilla",
            "hybrid",
            "centralized FCFS",
            "SLO 5000",
            "p99 vs load",
            "throughput (req/s)",
        ] {
            assert!(svg.contains(needle), "missing {needle}");
        }
        // Two measured lines and two dashed lines (bound + SLO) at least.
        assert!(svg.matches("<polyline").count() + svg.matches("<path").count() >= 4);
        assert!(
            svg.matches("<circle").count() >= 6,
            "one marker per measured point"
        );
    }

    #[test]
    fn unusable_points_are_dropped_and_empty_data_says_so() {
        let s = Series::new("x", vec![(f64::NAN, 1.0), (1.0, 0.0), (2.0, f64::INFINITY)]);
        let svg = p99_vs_load_svg(&labels(), &[s], &[], Some(10.0));
        assert!(svg.contains("no data to plot"));
        let svg = cdf_svg(&labels(), &[]);
        assert!(svg.contains("no data to plot") && svg.starts_with("<svg"));
    }

    #[test]
    fn cdf_plot_renders_each_series() {
        let pts: Vec<_> = (0..=100)
            .map(|i| (i as f64 * 10.0, i as f64 / 100.0))
            .collect();
        let svg = cdf_svg(
            &Labels::new("CDF", "latency (µs)", "fraction"),
            &[
                Series::new("shared", pts.clone()),
                Series::new("cpu", pts.iter().map(|p| (p.0 * 2.0, p.1)).collect()),
            ],
        );
        assert!(svg.contains("shared") && svg.contains("cpu"));
        assert!(!svg.contains("no data"));
    }

    #[test]
    fn tick_labels_are_compact() {
        assert_eq!(short_number(12_000.0), "12k");
        assert_eq!(short_number(1_500_000.0), "1.5M");
        assert_eq!(short_number(850.0), "850");
        assert_eq!(short_number(0.25), "0.25");
        assert_eq!(short_number(2.0), "2");
    }
}
