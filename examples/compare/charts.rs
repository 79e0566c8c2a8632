//! SVG charts of the experiments: one small panel per algorithm, each with
//! the cumulative requests sent and admitted over time and the worst 1-s
//! span shaded; the counts are in the panel's title.
//!
//! Only plotters' SVG backend: text is written as SVG `<text>` and laid out
//! by whatever displays the file, so drawing needs no font files.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;
use std::path::Path;

/// One algorithm's panel.
pub struct Panel {
    /// The algorithm and its counts, as the table prints them.
    pub caption: String,
    /// Times of the admitted requests, sorted.
    pub admitted: Vec<u64>,
    /// The span to shade: where the most were admitted.
    pub worst: (u64, u64),
    /// Leaky bucket: when the admitted requests leave the queue, sorted.
    pub served: Option<Vec<u64>>,
}

/// One experiment: a file with a title and one panel per algorithm.
pub struct Figure {
    pub file: &'static str,
    pub title: String,
    /// Which store made the decisions, and the limits, for the subtitle.
    pub subtitle: String,
    /// What the shaded span is, for the legend.
    pub worst_label: &'static str,
    /// Times of all requests sent, sorted.
    pub sent: Vec<u64>,
    /// The time axis, in ms since the epoch.
    pub x_ms: (u64, u64),
    /// Fixed-window boundaries to draw as thin vertical lines.
    pub boundaries: Vec<u64>,
    /// Bursts `(from, to)`: each panel labels how many of each were admitted.
    pub bursts: Vec<(u64, u64)>,
    pub panels: Vec<Panel>,
}

const SENT: RGBColor = RGBColor(160, 160, 160);
const ADMITTED: RGBColor = RGBColor(31, 100, 180);
const SERVED: RGBColor = RGBColor(20, 150, 50);
const WORST: RGBColor = RGBColor(255, 140, 0);
const BOUNDARY: RGBColor = RGBColor(195, 195, 195);
const WORST_ALPHA: f64 = 0.28;

type Error = Box<dyn std::error::Error>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draw `fig` to an SVG file at `path`; times are shown in seconds after `t0`.
pub fn draw(fig: &Figure, t0: u64, path: &Path) -> Result<(), Error> {
    let root = SVGBackend::new(path, (1200, 1040)).into_drawing_area();
    root.fill(&WHITE)?;
    let (head, body) = root.split_vertically(104);
    header(&head, fig)?;
    let s = |t: u64| (t as f64 - t0 as f64) / 1000.0;
    let x = s(fig.x_ms.0)..s(fig.x_ms.1);
    let y_max = (fig.sent.len() as f64 * 1.06).ceil();
    for (area, p) in body.split_evenly((3, 2)).iter().zip(&fig.panels) {
        panel(area, fig, p, x.clone(), y_max, &s)?;
    }
    root.present()?;
    Ok(())
}

/// Title, subtitle, and one legend for all panels.
fn header(head: &Area<'_>, fig: &Figure) -> Result<(), Error> {
    head.draw(&Text::new(
        fig.title.as_str(),
        (20, 12),
        ("sans-serif", 24).into_font().style(FontStyle::Bold),
    ))?;
    head.draw(&Text::new(
        fig.subtitle.as_str(),
        (20, 46),
        ("sans-serif", 15).into_font().color(&BLACK.mix(0.7)),
    ))?;
    let y = 84;
    let label = ("sans-serif", 15)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let mut x = 20;
    let mut item = |width: i32, text: &str| {
        let at = x;
        x += 32 + width;
        (at, Text::new(text.to_string(), (at + 26, y), label.clone()))
    };
    let (at, text) = item(150, "cumulative sent");
    head.draw(&PathElement::new(
        [(at, y), (at + 20, y)],
        SENT.stroke_width(3),
    ))?;
    head.draw(&text)?;
    let (at, text) = item(180, "cumulative admitted");
    head.draw(&PathElement::new(
        [(at, y), (at + 20, y)],
        ADMITTED.stroke_width(3),
    ))?;
    head.draw(&text)?;
    let (at, text) = item(fig.worst_label.len() as i32 * 8, fig.worst_label);
    head.draw(&Rectangle::new(
        [(at, y - 8), (at + 20, y + 8)],
        WORST.mix(WORST_ALPHA + 0.1).filled(),
    ))?;
    head.draw(&text)?;
    let (at, text) = item(180, "fixed-window boundary");
    head.draw(&PathElement::new(
        [(at + 10, y - 10), (at + 10, y + 10)],
        BOUNDARY.stroke_width(1),
    ))?;
    head.draw(&text)?;
    if fig.panels.iter().any(|p| p.served.is_some()) {
        let (at, text) = item(200, "left the leaky bucket's queue");
        head.draw(&PathElement::new(
            [(at, y), (at + 20, y)],
            SERVED.stroke_width(3),
        ))?;
        head.draw(&text)?;
    }
    Ok(())
}

/// A cumulative count as a staircase from `x.start` to `x.end`, cut at the
/// edges (plotters does not clip lines to the plot).
fn staircase(times: &[u64], x: &Range<f64>, s: &dyn Fn(u64) -> f64) -> Vec<(f64, f64)> {
    let mut pts = vec![(x.start, 0.0)];
    let mut n = 0.0;
    for &t in times {
        let at = s(t).max(x.start);
        if at > x.end {
            break;
        }
        pts.push((at, n));
        n += 1.0;
        pts.push((at, n));
    }
    pts.push((x.end, n));
    pts
}

fn panel(
    area: &Area<'_>,
    fig: &Figure,
    p: &Panel,
    x: Range<f64>,
    y_max: f64,
    s: &dyn Fn(u64) -> f64,
) -> Result<(), Error> {
    let short = x.end - x.start < 1.0;
    let mut chart = ChartBuilder::on(area)
        .caption(
            p.caption.as_str(),
            ("sans-serif", 17).into_font().style(FontStyle::Bold),
        )
        .margin_left(10)
        .margin_right(24)
        .margin_top(6)
        .margin_bottom(6)
        .x_label_area_size(42)
        .y_label_area_size(56)
        .build_cartesian_2d(x.clone(), 0.0..y_max)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.12))
        .x_desc("time (s)")
        .y_desc("requests (cumulative)")
        .x_labels(if short { 9 } else { 12 })
        .x_label_formatter(&|v| {
            if short {
                format!("{v:.2}")
            } else {
                format!("{v:.0}")
            }
        })
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()?;

    let clamp = |t: u64| s(t).clamp(x.start, x.end);
    chart.draw_series([Rectangle::new(
        [(clamp(p.worst.0), 0.0), (clamp(p.worst.1), y_max)],
        WORST.mix(WORST_ALPHA).filled(),
    )])?;
    // Solid lines: plotters writes dashes one element each, which makes
    // the files large.
    for &b in &fig.boundaries {
        chart.draw_series(LineSeries::new(
            [(s(b), 0.0), (s(b), y_max)],
            BOUNDARY.stroke_width(1),
        ))?;
    }
    chart.draw_series(LineSeries::new(
        staircase(&fig.sent, &x, s),
        SENT.stroke_width(2),
    ))?;
    if let Some(served) = &p.served {
        // Under the admitted line: it shows where the queue holds requests back.
        chart.draw_series(LineSeries::new(
            staircase(served, &x, s),
            SERVED.stroke_width(3),
        ))?;
    }
    chart.draw_series(LineSeries::new(
        staircase(&p.admitted, &x, s),
        ADMITTED.stroke_width(2),
    ))?;

    // How many of each burst got through, left of the admitted line's jump.
    let style = ("sans-serif", 15)
        .into_font()
        .style(FontStyle::Bold)
        .color(&ADMITTED)
        .pos(Pos::new(HPos::Right, VPos::Bottom));
    for &(from, to) in &fig.bursts {
        let before = p.admitted.iter().filter(|&&t| t < from).count();
        let within = p.admitted.iter().filter(|&&t| from <= t && t <= to).count();
        chart.draw_series([Text::new(
            format!("+{within}"),
            (s(from) - 0.08, (before + within) as f64),
            style.clone(),
        )])?;
    }
    Ok(())
}
