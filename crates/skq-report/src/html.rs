//! A self-contained HTML report: one file, inline CSS and inline SVG, no
//! scripts and no external resources, so it opens offline and from `file://`.
//!
//! Build it block by block with [`Report`] and call [`Report::render`]:
//!
//! ```
//! use skq_report::html::Report;
//! use skq_report::table::Table;
//! let mut t = Table::new(["config", "max load"]);
//! t.push(["vanilla", "12000"]);
//! let html = Report::new("skq bench")
//!     .meta("service mode", "emulate")
//!     .alert("hybrid: self-check FAILED (rate error -12%)")
//!     .heading("Summary")
//!     .table(&t)
//!     .render();
//! assert!(html.contains("<table") && html.contains("self-check FAILED"));
//! ```
//!
//! A [`Report`] is plain data (a title, header lines and [`Block`]s: text,
//! tables and charts as [`Chart`] values) until [`Report::render`] draws it,
//! so a producer builds the whole model first and skq-report does all the
//! drawing, with no call-backs into the producer.
//!
//! All text given to the builder is escaped; only [`Report::svg`] takes
//! markup, and it must be a complete `<svg>` element (as produced by
//! [`crate::plot`]).

use crate::plot::Chart;
use crate::table::{Align, Table};

/// Escapes `&`, `<`, `>`, `"` and `'` for HTML text and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// One block of a report's body, in page order.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// A section heading.
    Heading(String),
    /// A paragraph of plain text.
    Paragraph(String),
    /// A highlighted warning box.
    Alert(String),
    /// A table.
    Table(Table),
    /// A figure given as SVG markup (already drawn).
    Svg {
        /// Caption under the figure.
        caption: String,
        /// A complete `<svg>` element.
        svg: String,
    },
    /// A figure given as data, drawn when the report is rendered.
    Chart {
        /// Caption under the figure.
        caption: String,
        /// What to draw.
        chart: Chart,
    },
    /// Preformatted text.
    Pre(String),
}

/// One HTML page as data, with builder methods.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Page title (also the top heading).
    pub title: String,
    /// Key/value lines of the header box.
    pub meta: Vec<(String, String)>,
    /// The body, in page order.
    pub blocks: Vec<Block>,
}

impl Report {
    /// An empty report with a page title (also the top heading).
    pub fn new(title: impl Into<String>) -> Self {
        Report {
            title: title.into(),
            meta: Vec::new(),
            blocks: Vec::new(),
        }
    }

    /// A key/value line in the header box (date, cores, service mode, ...).
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.meta.push((key.into(), value.into()));
        self
    }

    /// A section heading.
    pub fn heading(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Heading(text.into()));
        self
    }

    /// A paragraph of plain text.
    pub fn paragraph(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Paragraph(text.into()));
        self
    }

    /// A highlighted warning box (self-check failures, missing bounds, errors).
    pub fn alert(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Alert(text.into()));
        self
    }

    /// A table. Cells equal to `PASS`, `FAIL` or `ERROR` are coloured.
    pub fn table(mut self, table: &Table) -> Self {
        self.blocks.push(Block::Table(table.clone()));
        self
    }

    /// A figure: an inline SVG document with a caption. An XML declaration or
    /// doctype in front of `<svg` is removed.
    pub fn svg(mut self, caption: impl Into<String>, svg: impl Into<String>) -> Self {
        self.blocks.push(Block::Svg {
            caption: caption.into(),
            svg: svg_element(svg.into()),
        });
        self
    }

    /// A figure given as data: `chart` is drawn when the report is rendered.
    pub fn chart(mut self, caption: impl Into<String>, chart: Chart) -> Self {
        self.blocks.push(Block::Chart {
            caption: caption.into(),
            chart,
        });
        self
    }

    /// Preformatted text (a command line, a terminal table).
    pub fn pre(mut self, text: impl Into<String>) -> Self {
        self.blocks.push(Block::Pre(text.into()));
        self
    }

    /// Number of figures added so far.
    pub fn figures(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| matches!(b, Block::Svg { .. } | Block::Chart { .. }))
            .count()
    }

    /// The complete document.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        out.push_str(&format!(
            "<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
            escape(&self.title)
        ));
        out.push_str(&format!("<h1>{}</h1>\n", escape(&self.title)));
        if !self.meta.is_empty() {
            out.push_str("<dl class=\"meta\">\n");
            for (k, v) in &self.meta {
                out.push_str(&format!("<dt>{}</dt><dd>{}</dd>\n", escape(k), escape(v)));
            }
            out.push_str("</dl>\n");
        }
        for b in &self.blocks {
            match b {
                Block::Heading(t) => out.push_str(&format!("<h2>{}</h2>\n", escape(t))),
                Block::Paragraph(t) => out.push_str(&format!("<p>{}</p>\n", escape(t))),
                Block::Alert(t) => out.push_str(&format!("<p class=\"alert\">{}</p>\n", escape(t))),
                Block::Pre(t) => out.push_str(&format!("<pre>{}</pre>\n", escape(t))),
                Block::Svg { caption, svg } => out.push_str(&figure_html(caption, svg)),
                Block::Chart { caption, chart } => {
                    out.push_str(&figure_html(caption, &svg_element(chart.svg())))
                }
                Block::Table(t) => out.push_str(&table_html(t)),
            }
        }
        out.push_str("</body>\n</html>\n");
        out
    }
}

/// `svg` from its `<svg` on (an XML declaration or doctype is dropped).
fn svg_element(svg: String) -> String {
    match svg.find("<svg") {
        Some(i) => svg[i..].to_string(),
        None => svg,
    }
}

fn figure_html(caption: &str, svg: &str) -> String {
    format!(
        "<figure>\n{svg}\n<figcaption>{}</figcaption>\n</figure>\n",
        escape(caption)
    )
}

fn table_html(t: &Table) -> String {
    let mut out = String::from("<table>\n<thead><tr>");
    for h in &t.headers {
        out.push_str(&format!("<th>{}</th>", escape(h)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in 0..t.rows.len() {
        out.push_str("<tr>");
        for c in 0..t.headers.len() {
            let cell = t.cell(r, c);
            let mut class = Vec::new();
            if t.align.get(c) == Some(&Align::Right) {
                class.push("num");
            }
            match cell {
                "PASS" => class.push("pass"),
                "FAIL" | "ERROR" => class.push("fail"),
                _ => {}
            }
            if class.is_empty() {
                out.push_str(&format!("<td>{}</td>", escape(cell)));
            } else {
                out.push_str(&format!(
                    "<td class=\"{}\">{}</td>",
                    class.join(" "),
                    escape(cell)
                ));
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1100px;color:#222}\
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}\
dl.meta{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;background:#f6f6f6;padding:.8em}\
dl.meta dt{font-weight:bold}dl.meta dd{margin:0}\
table{border-collapse:collapse;font-size:.9em}th,td{border:1px solid #ccc;padding:.25em .6em}\
th{background:#eee}td.num{text-align:right;font-variant-numeric:tabular-nums}\
td.pass{color:#11661a;font-weight:bold}td.fail{color:#b00000;font-weight:bold}\
p.alert{background:#fff0f0;border-left:4px solid #c00;padding:.5em .8em}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{font-size:.9em;color:#555}\
pre{background:#f6f6f6;padding:.8em;overflow-x:auto}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_text_and_keeps_svg_markup() {
        let html = Report::new("a < b")
            .meta("k", "\"v\"")
            .paragraph("x & y")
            .svg(
                "fig",
                "<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>",
            )
            .render();
        assert!(html.contains("<title>a &lt; b</title>"));
        assert!(html.contains("<dd>&quot;v&quot;</dd>"));
        assert!(html.contains("<p>x &amp; y</p>"));
        assert!(html.contains("<figure>\n<svg xmlns"));
        assert!(!html.contains("<?xml"));
    }

    #[test]
    fn a_chart_is_drawn_when_the_report_renders() {
        let chart = Chart::Cdf {
            labels: crate::plot::Labels::new("CDF", "latency (µs)", "fraction"),
            series: vec![crate::plot::Series::new(
                "shared",
                vec![(1.0, 0.5), (2.0, 1.0)],
            )],
        };
        let model = Report::new("r").chart("cdf", chart.clone());
        assert_eq!(model.figures(), 1);
        assert!(matches!(&model.blocks[0], Block::Chart { chart: c, .. } if *c == chart));
        // The same page as drawing the chart first and inlining its SVG.
        let drawn = Report::new("r").svg("cdf", chart.svg());
        assert_eq!(model.render(), drawn.render());
        assert!(model.render().contains("shared"));
    }

    #[test]
    fn pass_fail_cells_are_marked() {
        let mut t = Table::new(["config", "self-check"]);
        t.push(["vanilla", "PASS"]);
        t.push(["hybrid", "FAIL"]);
        t.push(["tokio", "ERROR"]);
        let html = Report::new("r").table(&t).render();
        assert!(html.contains("<td class=\"fail\">ERROR</td>"));
        assert!(html.contains("<td class=\"pass\">PASS</td>"));
        assert!(html.contains("<td class=\"fail\">FAIL</td>"));
    }
}
