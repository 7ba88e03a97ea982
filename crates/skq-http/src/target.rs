//! From a request target to a path below the document root.
//!
//! The target's path is percent-decoded once, then split at `/` and
//! normalised as nginx does: empty and `.` segments are dropped, and a `..`
//! segment — written plainly or encoded (`%2e%2e`, `.%2E`, ...), since
//! decoding comes first — removes the segment before it, so
//! `/sub/../good.txt` names `good.txt`. A `..` with nothing left to remove
//! (an attempt to climb above the root) refuses the request, as does a NUL
//! byte or a malformed escape. What remains is a relative path with no
//! `..`, which the opener then resolves with the kernel confining it below
//! the root (so symlinks cannot leave it either). Normalising is lexical:
//! `a/../b` is `b` even when `a` is a symlink, which is what a client
//! means and cannot lead out of the root, since no `..` reaches the
//! opener.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// A request target that names a file to look up.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    /// Relative path below the root (empty for the root itself).
    pub rel: PathBuf,
    /// Whether the decoded path ended in `/` (a directory was asked for).
    pub trailing_slash: bool,
    /// The path as sent, without query (for redirects and logs).
    pub raw_path: String,
}

/// Why a target was refused.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Refused {
    /// Not origin-form or absolute-form, a bad escape, or a NUL byte.
    Malformed,
    /// A `..` segment (plain or encoded) above the root: an attempt to leave it.
    Traversal,
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes `s` (no `+` rule: that belongs to form bodies).
pub fn percent_decode(s: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%' {
            let hi = hex(*s.get(i + 1)?)?;
            let lo = hex(*s.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Parses a request target (origin-form `/a/b?q`, or absolute-form
/// `http://host/a/b`) into the file path it names.
pub fn parse(target: &str) -> Result<Target, Refused> {
    let path = if target.starts_with('/') {
        target
    } else if let Some(rest) = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("https://"))
    {
        match rest.find('/') {
            Some(i) => &rest[i..],
            None => "/",
        }
    } else {
        return Err(Refused::Malformed);
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    let decoded = percent_decode(path.as_bytes()).ok_or(Refused::Malformed)?;
    if decoded.contains(&0) {
        return Err(Refused::Malformed);
    }
    let mut segs: Vec<&[u8]> = Vec::new();
    for seg in decoded.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                segs.pop().ok_or(Refused::Traversal)?;
            }
            s => segs.push(s),
        }
    }
    let rel = segs.join(&b'/');
    Ok(Target {
        rel: PathBuf::from(OsString::from_vec(rel)),
        trailing_slash: decoded.ends_with(b"/")
            || decoded.ends_with(b"/.")
            || decoded.ends_with(b"/.."),
        raw_path: path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(t: &str) -> String {
        parse(t).unwrap().rel.to_string_lossy().into_owned()
    }

    #[test]
    fn plain_paths_and_queries() {
        assert_eq!(rel("/"), "");
        assert_eq!(rel("/index.html?x=1#f"), "index.html");
        assert_eq!(rel("//a/./b//c"), "a/b/c");
        assert_eq!(rel("/a%20b.txt"), "a b.txt");
        assert_eq!(rel("http://example.com/x/y"), "x/y");
        assert_eq!(rel("http://example.com"), "");
        assert!(parse("/dir/").unwrap().trailing_slash);
        assert!(!parse("/dir").unwrap().trailing_slash);
    }

    #[test]
    fn traversal_in_every_spelling_is_refused() {
        for t in [
            "/..",
            "/../etc/passwd",
            "/a/../../b",
            "/%2e%2e/etc/passwd",
            "/%2E%2E%2Fetc%2Fpasswd",
            "/.%2e/x",
            "/a/%2e./../x",
            "/a%2f..%2f..%2fb",
            "/a/b/../../../c",
            "/./../x",
        ] {
            assert_eq!(parse(t), Err(Refused::Traversal), "{t}");
        }
        // A dot-dot inside a name is a name.
        assert_eq!(rel("/a..b/..c"), "a..b/..c");
    }

    #[test]
    fn dot_dot_below_the_root_is_normalised_as_nginx_does() {
        assert_eq!(rel("/sub/../good.txt"), "good.txt");
        assert_eq!(rel("/a/%2e./x"), "x");
        assert_eq!(rel("/a%2f..%2fb"), "b");
        assert_eq!(rel("/a/b/../c/./d/.."), "a/c");
        assert_eq!(rel("/a/.."), "");
        // Ending in a dot segment names a directory, as a trailing slash does.
        assert!(parse("/a/b/..").unwrap().trailing_slash);
        assert!(parse("/a/.").unwrap().trailing_slash);
    }

    #[test]
    fn malformed_targets_are_refused() {
        for t in ["*", "index.html", "/%zz", "/%4", "/a%00b", "ftp://x/y", ""] {
            assert_eq!(parse(t), Err(Refused::Malformed), "{t}");
        }
    }
}
