//! `include/skq.h` is current: cbindgen regenerates it from `src/` and the
//! result must equal the committed file. Fails (naming the fix) when cbindgen
//! is missing: `bash scripts/setup.sh` installs it (scripts/setup.d/40-capi.sh).

use std::path::Path;
use std::process::Command;

#[test]
fn header_matches_cbindgen_output() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("skq-h-{}.h", std::process::id()));
    let run = Command::new("cbindgen")
        .current_dir(dir)
        .args([
            "--config",
            "cbindgen.toml",
            "--crate",
            "skq-capi",
            "--quiet",
            "--output",
        ])
        .arg(&out)
        .output()
        .unwrap_or_else(|e| {
            panic!("cbindgen is not installed ({e}): run `bash scripts/setup.sh` first")
        });
    assert!(
        run.status.success(),
        "cbindgen failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let fresh = std::fs::read_to_string(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    let committed = std::fs::read_to_string(dir.join("include/skq.h")).unwrap();
    assert!(
        fresh == committed,
        "include/skq.h is stale: run `cbindgen --config cbindgen.toml --crate skq-capi \
         --output include/skq.h` in crates/skq-capi"
    );
}

/// Every exported function is declared in the header and used by the C test
/// program, so "every function of the header is exercised" stays true.
#[test]
fn c_test_program_calls_every_header_function() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(dir.join("include/skq.h")).unwrap();
    let test = std::fs::read_to_string(dir.join("tests/c/test_api.c")).unwrap();
    let mut names = Vec::new();
    for line in header.lines() {
        let Some(open) = line.find('(') else { continue };
        if line.starts_with("//") || line.starts_with(' ') || line.starts_with("typedef") {
            continue;
        }
        let head = &line[..open];
        if let Some(name) = head
            .rsplit([' ', '*'])
            .next()
            .filter(|n| n.starts_with("skq_"))
        {
            names.push(name.to_string());
        }
    }
    assert!(names.len() >= 35, "found only {names:?}");
    let missing: Vec<_> = names
        .iter()
        .filter(|n| !test.contains(&format!("{n}(")))
        .collect();
    assert!(
        missing.is_empty(),
        "not exercised by tests/c/test_api.c: {missing:?}"
    );
}
