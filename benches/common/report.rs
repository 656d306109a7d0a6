//! The benches' report files, which need no GPU: the JSON each bench writes
//! (serde; `--replot FILE` reads it back) and the SVG plots drawn from it
//! (plotters). `tests/bench_reports.rs` includes this file, so the tests
//! at its end run with the workspace's tests, on machines without a GPU.

use plotters::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use smelt::{Error, Result};
use std::path::Path;

/// One measured point of a plotted series: `y` is GB/s for the bandwidth
/// benches (named `gbps` in `softmax.json`), TFLOP/s for matmul; `ms` is
/// the time per run (0 for derived series such as the copy ceiling).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub series: String,
    pub x: f64,
    #[serde(rename = "gbps")]
    pub y: f64,
    pub ms: f64,
}

/// `softmax.json`: the device, the date (YYYY-MM-DD) and every point of
/// the bandwidth bench (vector add, softmax, layer norm, their copies).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandwidthReport {
    pub device: String,
    pub date: String,
    pub points: Vec<Point>,
}

/// The plots of a [`BandwidthReport`]: file name, the series prefix it
/// selects, its title and x label.
const BANDWIDTH_PLOTS: [(&str, &str, &str, &str); 5] = [
    (
        "vector_add.svg",
        "vector add",
        "vector add f32: GB/s vs elements",
        "elements",
    ),
    (
        "softmax_f32.svg",
        "softmax float32",
        "softmax f32, M = 4096: GB/s vs N",
        "N",
    ),
    (
        "softmax_bf16.svg",
        "softmax bfloat16",
        "softmax bf16, M = 4096: GB/s vs N",
        "N",
    ),
    (
        "layer_norm_f32.svg",
        "layer_norm float32",
        "layer_norm f32, M = 4096: GB/s vs N",
        "N",
    ),
    (
        "layer_norm_bf16.svg",
        "layer_norm bfloat16",
        "layer_norm bf16, M = 4096: GB/s vs N",
        "N",
    ),
];

/// The copy ceiling's series: `ops.json` holds one point of it (x: the
/// bytes copied); `softmax.json`'s series of it end with it after a
/// prefix (`softmax float32 copy ceiling (1 GiB)`).
pub const CEILING: &str = "copy ceiling (1 GiB)";

impl BandwidthReport {
    /// Every plot of the report as (file name, SVG text): vector add and
    /// each op and dtype (naive and fused), each with its same-size copies
    /// and the 1 GiB copy ceiling.
    pub fn plots(&self) -> Result<Vec<(&'static str, String)>> {
        BANDWIDTH_PLOTS
            .iter()
            .map(|&(file, prefix, title, xlabel)| {
                let mut sel: Vec<Point> = self
                    .points
                    .iter()
                    .filter(|p| p.series.starts_with(prefix))
                    .cloned()
                    .collect();
                if prefix == "vector add" {
                    // Its same-size copies are the series named plainly
                    // "copy ...". The 1 GiB copy ceiling, measured once,
                    // is stored with the ops' points: drawn here too.
                    let line = self.ceiling_at(&sel);
                    sel.extend(
                        self.points
                            .iter()
                            .filter(|p| p.series.starts_with("copy"))
                            .cloned(),
                    );
                    sel.extend(line);
                }
                let title = format!("{title}; {}, {}", self.device, self.date);
                Ok((file, svg(&sel, &title, xlabel, "GB/s")?))
            })
            .collect()
    }
}

impl BandwidthReport {
    /// The copy ceiling's GB/s, if the report has it.
    pub fn ceiling(&self) -> Option<f64> {
        self.points
            .iter()
            .find(|p| p.series.ends_with(CEILING))
            .map(|p| p.y)
    }

    /// The copy ceiling as a flat series at each x of `points` (none if
    /// the report lacks it), to draw as a reference line.
    fn ceiling_at(&self, points: &[Point]) -> Vec<Point> {
        let Some(y) = self.ceiling() else {
            return Vec::new();
        };
        let mut xs: Vec<f64> = points.iter().map(|p| p.x).collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        xs.into_iter()
            .map(|x| Point {
                series: CEILING.into(),
                x,
                y,
                ms: 0.0,
            })
            .collect()
    }

    /// The points of every series starting with one of `prefixes`, and
    /// with `ceiling` the copy ceiling at their x values: one plot's data.
    pub fn select(&self, prefixes: &[&str], ceiling: bool) -> Vec<Point> {
        let mut sel: Vec<Point> = self
            .points
            .iter()
            .filter(|p| prefixes.iter().any(|w| p.series.starts_with(w)))
            .cloned()
            .collect();
        if ceiling && !sel.is_empty() {
            sel.extend(self.ceiling_at(&sel));
        }
        sel
    }

    /// A text table of every measured point (references such as copies
    /// left out) next to the point of `other` (named `who`) with the same
    /// series and x: GB/s, % of each report's copy ceiling, and the ratio
    /// of `other`'s time to this one's (above 1, this report is faster).
    /// Points `other` lacks show `-`.
    pub fn compare(&self, other: &BandwidthReport, who: &str) -> String {
        let pct = |y: f64, c: Option<f64>| match c {
            Some(c) if c > 0.0 => format!("{:.1}%", 100.0 * y / c),
            _ => "-".into(),
        };
        let (c0, c1) = (self.ceiling(), other.ceiling());
        let mut out = format!(
            "{}, {} against {who}: {}, {}\n",
            self.device, self.date, other.device, other.date
        );
        let mut series = "";
        for p in self.points.iter().filter(|p| !is_reference(&p.series)) {
            if p.series != series {
                series = &p.series;
                out += &format!(
                    "\n{series}\n{:>10} {:>10} {:>8} {:>10} {:>8} {:>8}\n",
                    "x", "GB/s", "% copy", who, "% copy", "ratio"
                );
            }
            let theirs = other
                .points
                .iter()
                .find(|q| q.series == p.series && q.x == p.x);
            let (y1, pct1, ratio) = match theirs {
                Some(q) if p.ms > 0.0 => (
                    format!("{:.0}", q.y),
                    pct(q.y, c1),
                    format!("{:.2}x", q.ms / p.ms),
                ),
                _ => ("-".into(), "-".into(), "-".into()),
            };
            out += &format!(
                "{:>10} {:>10.0} {:>8} {y1:>10} {pct1:>8} {ratio:>8}\n",
                p.x,
                p.y,
                pct(p.y, c0)
            );
        }
        out
    }
}

/// One measured cell of `matmul.json`: a column of the bench's table
/// (`series`, e.g. "smelt B^T"), the shape, the dtype's name, milliseconds
/// per product and TFLOP/s (`2 batch m n k` flops).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatmulPoint {
    pub series: String,
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dtype: String,
    pub ms: f64,
    pub tflops: f64,
}

impl MatmulPoint {
    /// TFLOP/s recomputed from `ms`. The plot uses this, not the stored
    /// `tflops`, which older files rounded to 2 decimals (their `ms` to 5,
    /// which is what their plots were drawn from).
    pub fn tflops_from_ms(&self) -> f64 {
        2.0 * (self.batch * self.m * self.n * self.k) as f64 / (self.ms * 1e-3) / 1e12
    }
}

/// `matmul.json`: device, date, where the cuBLAS columns came from, and
/// every measured cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatmulReport {
    pub device: String,
    pub date: String,
    pub cublas: String,
    pub points: Vec<MatmulPoint>,
}

impl MatmulReport {
    /// `matmul_square.svg`: TFLOP/s against the size of square products
    /// with B stored `[n, k]`, smelt's kernel and cuBLAS, one line each
    /// per dtype.
    pub fn square_svg(&self) -> Result<String> {
        let mut points = Vec::new();
        for p in &self.points {
            let who = match p.series.as_str() {
                "smelt B^T" => "smelt",
                "cuBLAS B^T" => "cuBLAS",
                _ => continue,
            };
            if p.batch == 1 && p.m == p.n && p.n == p.k {
                points.push(Point {
                    series: format!("{who} {}", p.dtype),
                    x: p.n as f64,
                    y: p.tflops_from_ms(),
                    ms: p.ms,
                });
            }
        }
        let title = format!(
            "matmul, square, B^T: TFLOP/s; {}, {}",
            self.device, self.date
        );
        svg(&points, &title, "m = n = k", "TFLOP/s")
    }
}

/// `value` as pretty-printed JSON, ending in a newline.
pub fn to_json<T: Serialize>(value: &T) -> Result<String> {
    let mut s = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Runtime(format!("report as JSON: {e}")))?;
    s.push('\n');
    Ok(s)
}

/// Reads a report that a bench wrote (for `--replot`).
pub fn read_json<T: DeserializeOwned>(file: &Path) -> Result<T> {
    let bad = |e: &dyn std::fmt::Display| Error::Runtime(format!("{}: {e}", file.display()));
    let text = std::fs::read_to_string(file).map_err(|e| bad(&e))?;
    serde_json::from_str(&text).map_err(|e| bad(&e))
}

/// Picture size in pixels; the legend's column widens the picture.
const WIDTH: u32 = 640;
const HEIGHT: u32 = 440;

/// Line colours, one per series stem (see [`stem`]) in order of first
/// appearance.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
];

/// Whether a series is a reference the benches compare against (a copy's
/// bandwidth, the copy ceiling, cuBLAS) rather than one of smelt's
/// kernels: drawn dashed, without point markers.
fn is_reference(series: &str) -> bool {
    series.contains("copy") || series.starts_with("cuBLAS")
}

/// The part of a series name that picks its colour: the name without a
/// leading "smelt " or "cuBLAS ", so both of a dtype's lines share one.
fn stem(series: &str) -> &str {
    ["smelt ", "cuBLAS "]
        .iter()
        .find_map(|w| series.strip_prefix(w))
        .unwrap_or(series)
}

/// A line chart of `y` (axis title `ylabel`) against `x` (axis title
/// `xlabel`, log scale, a tick at each power of two the data spans, or
/// every other one when they would crowd), one line per series with a
/// marker at each point (references dashed; smelt's and cuBLAS's lines of
/// one dtype share a colour), titled `title`, the legend in a column
/// right of the chart. Points need `x > 0`.
pub fn svg(points: &[Point], title: &str, xlabel: &str, ylabel: &str) -> Result<String> {
    draw(points, title, xlabel, ylabel).map_err(|e| Error::Runtime(format!("plot {title:?}: {e}")))
}

fn draw(
    points: &[Point],
    title: &str,
    xlabel: &str,
    ylabel: &str,
) -> std::result::Result<String, Box<dyn std::error::Error>> {
    if points.is_empty()
        || points
            .iter()
            .any(|p| !(p.x.is_finite() && p.x > 0.0 && p.y.is_finite()))
    {
        return Err("no points, or a point with x <= 0 or y not finite".into());
    }
    let (mut names, mut stems): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for p in points {
        if !names.contains(&p.series.as_str()) {
            names.push(&p.series);
        }
        if !stems.contains(&stem(&p.series)) {
            stems.push(stem(&p.series));
        }
    }
    let mut xs: Vec<f64> = points.iter().map(|p| p.x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let (x0, x1) = (xs[0], xs[xs.len() - 1]);
    let ymax = points.iter().map(|p| p.y).fold(0.0, f64::max).max(1e-9) * 1.1;
    // Powers of two from 2^20 up read better as such.
    let pow2 = x1 >= (1 << 20) as f64 && xs.iter().all(|x| x.log2().fract() == 0.0);
    let x_label = move |x: &f64| {
        if pow2 {
            format!("2{}", superscript(x.log2().round() as i64))
        } else {
            format!("{x}")
        }
    };
    let y_label = move |y: &f64| {
        if ymax >= 10.0 {
            format!("{y:.0}")
        } else {
            format!("{y:.2}")
        }
    };
    // The legend's column fits its longest name (about 7 px a character
    // in its 13 px font: plotters' size 16) after a 40 px line sample.
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let legend_w = 50 + 7 * longest as u32;

    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (WIDTH + legend_w, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let body = root.titled(title, ("sans-serif", 20))?;
        let (chart_area, legend_area) = body.split_horizontally(WIDTH);
        // A margin of 15% beyond the first and last x keeps their markers
        // inside the frame.
        let xrange = (x0 / 1.15..x1 * 1.15).log_scale().base(2.0);
        let mut chart = ChartBuilder::on(&chart_area)
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(65)
            .build_cartesian_2d(xrange, 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_labels(xs.len())
            .y_labels(8)
            .max_light_lines(4)
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .x_desc(xlabel)
            .y_desc(ylabel)
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .draw()?;
        for (i, name) in names.iter().enumerate() {
            let colour = stems.iter().position(|s| *s == stem(name)).unwrap_or(0);
            let style = PALETTE[colour % PALETTE.len()].stroke_width(2);
            let mut line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.series == *name)
                .map(|p| (p.x, p.y))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            if is_reference(name) {
                chart.draw_series(DashedLineSeries::new(line, 8, 5, style))?;
            } else {
                chart.draw_series(LineSeries::new(line, style.filled()).point_size(3))?;
            }
            // The legend entry: a sample of the line (two dashes for a
            // reference, else with a marker), then the name.
            let y = 60 + 20 * i as i32;
            if is_reference(name) {
                legend_area.draw(&PathElement::new([(8, y), (20, y)], style))?;
                legend_area.draw(&PathElement::new([(28, y), (40, y)], style))?;
            } else {
                legend_area.draw(&PathElement::new([(8, y), (40, y)], style))?;
                legend_area.draw(&Circle::new((24, y), 3, style.filled()))?;
            }
            legend_area.draw(&Text::new(
                name.to_string(),
                (46, y - 7),
                ("sans-serif", 16).into_font(),
            ))?;
        }
        root.present()?;
    }
    Ok(out)
}

/// `n` in Unicode superscript digits (for `2¹²`).
fn superscript(n: i64) -> String {
    const DIGITS: [char; 10] = ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'];
    let sign = if n < 0 { "⁻" } else { "" };
    let digits: String = n
        .unsigned_abs()
        .to_string()
        .bytes()
        .map(|b| DIGITS[(b - b'0') as usize])
        .collect();
    format!("{sign}{digits}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A committed report under `docs/bench`.
    fn committed(file: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/bench")
            .join(file)
    }

    fn point(series: &str, x: f64, y: f64) -> Point {
        Point {
            series: series.into(),
            x,
            y,
            ms: 0.25,
        }
    }

    /// The contents of every `<text>` element of `svg`, trimmed.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("</text>")
            .filter_map(|el| Some(el.rsplit_once('>')?.1.trim().to_string()))
            .collect()
    }

    /// Whether `svg` has a `<text>` element reading `s`.
    fn has_text(svg: &str, s: &str) -> bool {
        texts(svg).iter().any(|t| t == s)
    }

    /// The series' polyline points in `svg`, as (x, y) pixels, one list
    /// per `<polyline>` element.
    fn polylines(svg: &str) -> Vec<Vec<(f64, f64)>> {
        svg.split("<polyline")
            .skip(1)
            .filter_map(|el| {
                let pts = el.split("points=\"").nth(1)?.split('"').next()?;
                Some(
                    pts.split_whitespace()
                        .filter_map(|xy| {
                            let (x, y) = xy.split_once(',')?;
                            Some((x.parse().ok()?, y.parse().ok()?))
                        })
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn bandwidth_report_round_trips_through_json() {
        let report = BandwidthReport {
            device: "GPU \"quoted\" \\ name".into(),
            date: "2026-01-02".into(),
            points: vec![
                point("softmax float32 naive", 256.0, 369.25),
                point("softmax float32 fused", 256.0, 1448.125),
            ],
        };
        let text = to_json(&report).unwrap();
        // The y field keeps the name older files use.
        assert!(text.contains("\"gbps\": 369.25"), "{text}");
        let back: BandwidthReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn matmul_report_round_trips_through_json() {
        let report = MatmulReport {
            device: "H100".into(),
            date: "2026-01-02".into(),
            cublas: "cuBLAS 13 through cudarc".into(),
            points: vec![MatmulPoint {
                series: "smelt B^T".into(),
                batch: 1,
                m: 4096,
                n: 4096,
                k: 4096,
                dtype: "float16".into(),
                ms: 0.2441,
                tflops: 563.0,
            }],
        };
        let back: MatmulReport = serde_json::from_str(&to_json(&report).unwrap()).unwrap();
        assert_eq!(back, report);
    }

    /// A plot written to a file holds its title, axis titles, tick labels
    /// and every series name, and one line per series whose points are
    /// ordered by x and placed by value (a larger y is higher up).
    #[test]
    fn svg_has_series_labels_and_ordered_lines() {
        let mut points = Vec::new();
        for (i, n) in [256.0, 512.0, 1024.0, 2048.0].into_iter().enumerate() {
            points.push(point("naive", n, 100.0 + i as f64));
            points.push(point("fused", n, 400.0 * (i + 1) as f64));
            points.push(point("copy ceiling (1 GiB)", n, 2000.0));
        }
        let text = svg(&points, "a title", "N", "GB/s").unwrap();
        let dir = std::env::temp_dir().join(format!("smelt-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("plot.svg");
        std::fs::write(&file, &text).unwrap();
        let back = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(back.starts_with("<svg") && back.trim_end().ends_with("</svg>"));
        for s in [
            "a title",
            "N",
            "GB/s",
            "naive",
            "fused",
            "copy ceiling (1 GiB)",
            "256",
            "512",
            "1024",
            "2048",
        ] {
            assert!(has_text(&back, s), "{s} missing from the SVG");
        }
        // naive and fused are solid lines with markers (the dashed
        // ceiling is drawn in many short pieces); legend samples are
        // two-point lines.
        let lines: Vec<_> = polylines(&back)
            .into_iter()
            .filter(|l| l.len() == 4)
            .collect();
        assert_eq!(lines.len(), 2, "{back}");
        for l in &lines {
            assert!(l.windows(2).all(|w| w[0].0 < w[1].0), "x increases: {l:?}");
        }
        let (naive, fused) = (&lines[0], &lines[1]);
        assert!(fused[3].1 < naive[3].1, "fused is drawn above naive");
        assert!(fused.windows(2).all(|w| w[1].1 < w[0].1), "fused rises");
    }

    /// A plot's selection takes the series of its prefixes and draws the
    /// copy ceiling, stored once, at each of their x values.
    #[test]
    fn select_adds_the_ceiling_at_each_x() {
        let report = BandwidthReport {
            device: "GPU".into(),
            date: "2026-01-02".into(),
            points: vec![
                point(CEILING, (1u64 << 30) as f64, 3000.0),
                point("cat axis 0 float32", 2.0, 2500.0),
                point("cat axis 0 float32", 8.0, 2400.0),
                point("cat axis -1 float32", 2.0, 2300.0),
                point("gather last float32", 256.0, 900.0),
            ],
        };
        let sel = report.select(&["cat"], true);
        let ceiling: Vec<(f64, f64)> = sel
            .iter()
            .filter(|p| p.series == CEILING)
            .map(|p| (p.x, p.y))
            .collect();
        assert_eq!(ceiling, [(2.0, 3000.0), (8.0, 3000.0)]);
        assert_eq!(sel.len(), 5);
        assert!(!sel.iter().any(|p| p.series.starts_with("gather")));
        assert_eq!(report.select(&["cat"], false).len(), 3);
        assert!(report.select(&["sort"], true).is_empty());
        assert!(svg(&sel, "t", "inputs", "GB/s").is_ok());
    }

    /// The comparison pairs points by series and x, gives each report's %
    /// of its own ceiling and the other's time over this one's, marks
    /// points the other lacks and leaves references out.
    #[test]
    fn compare_pairs_points_by_series_and_x() {
        let ours = BandwidthReport {
            device: "H100".into(),
            date: "2026-01-02".into(),
            points: vec![
                point(CEILING, 1e9, 3000.0),
                Point {
                    series: "cat axis 0 float32".into(),
                    x: 2.0,
                    y: 2700.0,
                    ms: 0.05,
                },
                point("cumsum copy (same bytes) last float32", 2.0, 2900.0),
                point("cat axis 0 float32", 8.0, 2400.0),
            ],
        };
        let torch = BandwidthReport {
            device: "H100, torch 2.11".into(),
            date: "2026-01-02".into(),
            points: vec![
                point(CEILING, 1e9, 3010.0),
                Point {
                    series: "cat axis 0 float32".into(),
                    x: 2.0,
                    y: 1505.0,
                    ms: 0.1,
                },
            ],
        };
        let text = ours.compare(&torch, "torch");
        let rows: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert!(text.contains("\ncat axis 0 float32\n"), "{text}");
        assert!(!text.contains("copy (same bytes)"), "{text}");
        assert!(
            rows.contains(&vec!["2", "2700", "90.0%", "1505", "50.0%", "2.00x"]),
            "{text}"
        );
        assert!(
            rows.contains(&vec!["8", "2400", "80.0%", "-", "-", "-"]),
            "{text}"
        );
    }

    #[test]
    fn large_powers_of_two_are_labelled_as_powers() {
        let points: Vec<Point> = (12..=28)
            .step_by(2)
            .map(|e| point("vector add", (1u64 << e) as f64, e as f64))
            .collect();
        let text = svg(&points, "t", "elements", "GB/s").unwrap();
        assert!(has_text(&text, "2¹²") && has_text(&text, "2²⁸"), "{text}");
        assert_eq!(superscript(-30), "⁻³⁰");
    }

    #[test]
    fn svg_rejects_what_a_log_axis_cannot_show() {
        assert!(svg(&[], "t", "x", "y").is_err());
        assert!(svg(&[point("a", 0.0, 1.0)], "t", "x", "y").is_err());
        assert!(svg(&[point("a", 1.0, f64::NAN)], "t", "x", "y").is_err());
    }

    /// The committed softmax.json still reads, and its five plots name
    /// the series BENCHMARKS.md describes.
    #[test]
    fn committed_bandwidth_report_replots() {
        let r: BandwidthReport = read_json(&committed("softmax.json")).unwrap();
        assert_eq!(r.points.len(), 178);
        assert!(r.device.contains("H200"), "{}", r.device);
        let plots = r.plots().unwrap();
        let files: Vec<&str> = plots.iter().map(|(f, _)| *f).collect();
        assert_eq!(
            files,
            [
                "vector_add.svg",
                "softmax_f32.svg",
                "softmax_bf16.svg",
                "layer_norm_f32.svg",
                "layer_norm_bf16.svg"
            ]
        );
        let (_, softmax) = &plots[1];
        for s in [
            "naive",
            "fused",
            "copy (same bytes)",
            "copy ceiling (1 GiB)",
        ] {
            assert!(has_text(softmax, &format!("softmax float32 {s}")), "{s}");
        }
        assert!(has_text(&plots[0].1, "vector add") && has_text(&plots[0].1, "copy (same bytes)"));
    }

    /// The committed matmul.json still reads (`--replot`'s input) and its
    /// plot has smelt and cuBLAS per dtype.
    #[test]
    fn committed_matmul_report_replots() {
        let r: MatmulReport = read_json(&committed("matmul.json")).unwrap();
        assert_eq!(r.points.len(), 116);
        let p = &r.points[0];
        assert_eq!(
            (p.series.as_str(), p.m, p.dtype.as_str()),
            ("smelt B^T", 1024, "float16")
        );
        assert!((p.tflops_from_ms() - p.tflops).abs() < 0.01 * p.tflops);
        let svg = r.square_svg().unwrap();
        for dt in ["float16", "bfloat16", "float32"] {
            for who in ["smelt", "cuBLAS"] {
                assert!(has_text(&svg, &format!("{who} {dt}")), "{who} {dt}");
            }
        }
    }

    /// The committed ops.json still reads (`ops.rs --replot`'s input) and
    /// selects the series of its scan and sort plots.
    #[test]
    fn committed_ops_report_reads() {
        let r: BandwidthReport = read_json(&committed("ops.json")).unwrap();
        assert!(r.device.contains("H100"), "{}", r.device);
        assert!(!r.select(&["cumsum"], false).is_empty());
        assert!(!r.select(&["sort", "topk"], false).is_empty());
    }

    #[test]
    fn unreadable_reports_name_their_file() {
        let e = read_json::<MatmulReport>(&committed("softmax.json")).unwrap_err();
        assert!(e.to_string().contains("softmax.json"), "{e}");
    }
}
