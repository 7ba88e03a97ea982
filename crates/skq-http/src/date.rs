//! HTTP dates (RFC 7231 §7.1.1.1): formatting the preferred IMF-fixdate
//! (`Sun, 06 Nov 1994 08:49:37 GMT`) and parsing it back. Only the fixed
//! form is parsed; a date in an obsolete form is treated as absent, which
//! RFC 7232 allows for `If-Modified-Since` (the full reply is sent).

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Length of an IMF-fixdate.
pub const LEN: usize = 29;

/// (year, month 1..=12, day 1..=31) of day `days` since 1970-01-01, in the
/// proleptic Gregorian calendar (eras of 400 years, 146,097 days each).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st
    let mp = (5 * doy + 2) / 153; // month from March, 0..11
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a civil date (the inverse of [`civil`]).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Formats `secs` since the Unix epoch as an IMF-fixdate.
pub fn format(secs: u64) -> [u8; LEN] {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil(days);
    let s = std::format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[m as usize - 1],
        y % 10_000,
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    );
    let mut out = [b' '; LEN];
    out.copy_from_slice(&s.as_bytes()[..LEN]);
    out
}

/// Parses an IMF-fixdate into seconds since the Unix epoch.
pub fn parse(s: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(s).ok()?.trim();
    if s.len() != LEN || !s.ends_with(" GMT") || s.as_bytes()[3] != b',' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let t = s.get(r)?;
        if t.bytes().all(|b| b.is_ascii_digit()) {
            t.parse().ok()
        } else {
            None
        }
    };
    let d = num(5..7)?;
    let m = MONTHS.iter().position(|&n| Some(n) == s.get(8..11))? as u32 + 1;
    let y = num(12..16)?;
    let (hh, mm, ss) = (num(17..19)?, num(20..22)?, num(23..25)?);
    if s.as_bytes()[19] != b':' || s.as_bytes()[22] != b':' || d == 0 || d > 31 || hh > 23 {
        return None;
    }
    if mm > 59 || ss > 60 || y < 1970 {
        return None;
    }
    let days = days_from_civil(i64::from(y), m, d);
    let secs = days * 86_400 + i64::from(hh * 3600 + mm * 60 + ss);
    u64::try_from(secs).ok()
}

/// The `Date` header value, formatted at most once per second per owner.
#[derive(Debug)]
pub struct DateCache {
    secs: u64,
    text: [u8; LEN],
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache {
            secs: 0,
            text: format(0),
        }
    }
}

impl DateCache {
    /// The date for `secs` since the epoch.
    pub fn get(&mut self, secs: u64) -> &[u8; LEN] {
        if secs != self.secs {
            self.secs = secs;
            self.text = format(secs);
        }
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_the_rfc_example_and_the_epoch() {
        assert_eq!(&format(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&format(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&format(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
    }

    #[test]
    fn parse_inverts_format_over_centuries() {
        let mut t = 0u64;
        while t < 8_000_000_000 {
            assert_eq!(parse(&format(t)), Some(t), "{t}");
            t += 86_399 * 37 + 11;
        }
    }

    #[test]
    fn parse_refuses_other_forms() {
        assert_eq!(parse(b"Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse(b"Sun Nov  6 08:49:37 1994"), None);
        assert_eq!(parse(b"Sun, 06 Nox 1994 08:49:37 GMT"), None);
        assert_eq!(parse(b"Sun, 06 Nov 1994 08:49:37 UTC"), None);
        assert_eq!(parse(b""), None);
    }
}
