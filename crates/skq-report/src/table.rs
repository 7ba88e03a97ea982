//! A small text table rendered three ways: aligned for a terminal, CSV, and
//! an HTML `<table>` (through [`crate::html::Report::table`]).
//!
//! Cells are strings; the producer formats numbers once, so the terminal, the
//! CSV and the HTML report show the same digits.

use std::fmt::Write as _;

/// Horizontal alignment of a column in the terminal rendering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Pad on the right (text).
    Left,
    /// Pad on the left (numbers).
    Right,
}

/// A header row plus data rows. Rows shorter than the header are padded with
/// empty cells when rendered; longer rows are cut to the header's width.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Column titles.
    pub headers: Vec<String>,
    /// Column alignment (missing entries mean [`Align::Left`]).
    pub align: Vec<Align>,
    /// Data rows.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles, all left-aligned.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        let headers: Vec<String> = headers.into_iter().map(Into::into).collect();
        Table {
            align: vec![Align::Left; headers.len()],
            headers,
            rows: Vec::new(),
        }
    }

    /// Sets the alignment of column `col` (ignored when out of range).
    pub fn align(mut self, col: usize, a: Align) -> Self {
        if let Some(slot) = self.align.get_mut(col) {
            *slot = a;
        }
        self
    }

    /// Appends a row.
    pub fn push<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) {
        self.rows.push(row.into_iter().map(Into::into).collect());
    }

    /// The cell at (`row`, `col`), empty when the row is short.
    pub fn cell(&self, row: usize, col: usize) -> &str {
        self.rows
            .get(row)
            .and_then(|r| r.get(col))
            .map_or("", String::as_str)
    }

    /// Aligned plain text: header, a rule of `-`, then the rows; columns are
    /// separated by two spaces and widths count characters, not bytes.
    pub fn to_text(&self) -> String {
        let n = self.headers.len();
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in 0..self.rows.len() {
            for (c, w) in width.iter_mut().enumerate() {
                *w = (*w).max(self.cell(r, c).chars().count());
            }
        }
        let mut out = String::new();
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
            let mut parts = Vec::with_capacity(n);
            for (c, cell) in cells.enumerate().take(n) {
                let pad = width[c] - cell.chars().count();
                let a = self.align.get(c).copied().unwrap_or(Align::Left);
                parts.push(match a {
                    Align::Left => format!("{cell}{}", " ".repeat(pad)),
                    Align::Right => format!("{}{cell}", " ".repeat(pad)),
                });
            }
            let _ = writeln!(out, "{}", parts.join("  ").trim_end());
        };
        line(&mut out, &mut self.headers.iter().map(String::as_str));
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        let _ = writeln!(out, "{}", rule.join("  "));
        for r in 0..self.rows.len() {
            line(&mut out, &mut (0..n).map(|c| self.cell(r, c)));
        }
        out
    }

    /// RFC 4180 CSV (header first, `\n` line ends).
    pub fn to_csv(&self) -> String {
        let mut out = crate::csv::record(&self.headers);
        for r in 0..self.rows.len() {
            let cells: Vec<&str> = (0..self.headers.len()).map(|c| self.cell(r, c)).collect();
            out.push_str(&crate::csv::record(&cells));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_columns_line_up_and_numbers_align_right() {
        let mut t = Table::new(["config", "max load"]).align(1, Align::Right);
        t.push(["vanilla", "12.5k"]);
        t.push(["best2+steal", "9"]);
        let text = t.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "config       max load");
        assert_eq!(lines[1], "-----------  --------");
        assert_eq!(lines[2], "vanilla         12.5k");
        assert_eq!(lines[3], "best2+steal         9");
    }

    #[test]
    fn short_rows_are_padded_and_csv_quotes() {
        let mut t = Table::new(["a", "b"]);
        t.push(["x, y"]);
        assert_eq!(t.cell(0, 1), "");
        assert_eq!(t.to_csv(), "a,b\n\"x, y\",\n");
        assert_eq!(t.to_text().lines().nth(2), Some("x, y"));
    }
}
