//! CPU lists as the kernel and the command lines write them (`0-3,8`), one
//! parser and one formatter for every crate.

use crate::config::MAX_CPUS;

/// Parses `0,1`, `0-3` or `0-1,4` (surrounding blanks and a trailing
/// newline allowed): CPUs ascending, without duplicates. The error names
/// the list.
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("`{}` is not a CPU list (e.g. 0-3,8)", s.trim());
    let mut out = Vec::new();
    for part in s.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: u32 = a.trim().parse().map_err(|_| bad())?;
        let b: u32 = b.trim().parse().map_err(|_| bad())?;
        if a > b || b >= MAX_CPUS {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Formats CPUs compactly, ascending: runs of three or more as `a-b`,
/// others listed (`1,3-5,9`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}-{}", v[i], v[j]));
        } else {
            parts.extend(v[i..=j].iter().map(u32::to_string));
        }
        i = j + 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list(" 3,1,1 ").unwrap(), vec![1, 3]);
        for bad in ["3-1", "x", "", "1,,2", "99999"] {
            assert!(
                parse_cpu_list(bad).unwrap_err().contains("not a CPU list"),
                "{bad}"
            );
        }
        assert_eq!(format_cpu_list(&[8, 0, 1, 2, 3, 10, 11]), "0-3,8,10,11");
        assert_eq!(format_cpu_list(&[1, 3, 4, 5, 9]), "1,3-5,9");
        assert_eq!(format_cpu_list(&[0, 1]), "0,1");
        assert_eq!(format_cpu_list(&[]), "");
    }
}
