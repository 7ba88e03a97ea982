//! Minimal RFC 4180 CSV: write one record, parse a document back.
//!
//! Fields containing a comma, a double quote, CR or LF are quoted, and quotes
//! inside are doubled. The parser accepts exactly what [`record`] writes (and
//! `\r\n` line ends), which is all skq needs to read its own files back.

use std::fmt;

/// One CSV line (with its trailing `\n`) from the given fields.
pub fn record<S: AsRef<str>>(fields: &[S]) -> String {
    let mut out = String::new();
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let f = f.as_ref();
        if f.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&f.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(f);
        }
    }
    out.push('\n');
    out
}

/// A malformed CSV document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvError {
    /// 1-based line where the problem was found.
    pub line: usize,
    /// What is wrong.
    pub what: &'static str,
}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CSV line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for CsvError {}

/// Parses a whole document into records of fields. Blank lines are skipped.
pub fn parse(text: &str) -> Result<Vec<Vec<String>>, CsvError> {
    let mut records = Vec::new();
    let mut record = Vec::new();
    let mut field = String::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    let mut field_started = false;
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => {
                    quoted = false;
                    if !matches!(chars.peek(), None | Some(',') | Some('\n') | Some('\r')) {
                        return Err(CsvError {
                            line,
                            what: "text after a closing quote",
                        });
                    }
                }
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() && !field_started => {
                quoted = true;
                field_started = true;
            }
            '"' => {
                return Err(CsvError {
                    line,
                    what: "quote inside an unquoted field",
                })
            }
            ',' => {
                record.push(std::mem::take(&mut field));
                field_started = false;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                if field_started || !field.is_empty() || !record.is_empty() {
                    record.push(std::mem::take(&mut field));
                    records.push(std::mem::take(&mut record));
                }
                field_started = false;
                line += 1;
            }
            _ => {
                field.push(c);
                field_started = true;
            }
        }
    }
    if quoted {
        return Err(CsvError {
            line,
            what: "unterminated quoted field",
        });
    }
    if field_started || !field.is_empty() || !record.is_empty() {
        record.push(field);
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_awkward_fields() {
        let rows = vec![
            vec!["plain".to_string(), "".into(), "a,b".into()],
            vec!["say \"hi\"".into(), "two\nlines".into(), "x".into()],
        ];
        let text: String = rows.iter().map(|r| record(r)).collect();
        assert_eq!(parse(&text).unwrap(), rows);
        assert_eq!(parse(&text.replace('\n', "\r\n")).unwrap()[0], rows[0]);
    }

    #[test]
    fn rejects_broken_quotes() {
        assert_eq!(
            parse("a,\"b\nc").unwrap_err().what,
            "unterminated quoted field"
        );
        assert_eq!(
            parse("a,b\"c\n").unwrap_err(),
            CsvError {
                line: 1,
                what: "quote inside an unquoted field"
            }
        );
        assert!(parse("\"a\"b\n").is_err());
    }
}
